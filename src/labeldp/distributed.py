"""Data-parallel runs under ``torchrun``: the process group, and the few collective operations a run uses.

:func:`start` joins the processes ``torchrun`` started (gloo on the CPU, nccl on CUDA GPUs); without
that environment, or with one process, every function here acts as for a single process.

Rank 0 alone touches the privacy boundary and the run folder: it draws every release, keeps the
ledger and writes every file; the other ranks receive what they need (:func:`broadcast`,
:func:`on_main`) and compute their shares of training, evaluation and inference. The ads route is
the exception: each rank counts or releases its own row groups and hands its part to rank 0
(:func:`gather_to_main`), which alone records the release, once (:mod:`labeldp.boundary.release_parts`).

The functions that exchange values (:func:`broadcast`, :func:`on_main`, the sums and gathers,
:func:`check_same`) are collective calls: every rank must call them.
"""

from __future__ import annotations

import datetime
import gc
import os
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np
import torch

from labeldp import errors
from labeldp.runtime import env_rank, requested  # noqa: F401  (what the environment asks, read before torch)

T = TypeVar("T")

#: how long a rank waits for the others at a collective: rank 0 may release or write for long
#: (PATE's teachers train on rank 0 alone) while the others wait for its broadcast
TIMEOUT = datetime.timedelta(hours=24)


def available() -> bool:
    """Whether this torch has ``torch.distributed``."""
    return torch.distributed.is_available()


def active() -> bool:
    """Whether this process belongs to a process group of more than one process."""
    return (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
        and torch.distributed.get_world_size() > 1
    )


def rank() -> int:
    """This process's rank (0 when not data-parallel)."""
    return torch.distributed.get_rank() if active() else 0


def world_size() -> int:
    """Number of processes in the group (1 when not data-parallel)."""
    return torch.distributed.get_world_size() if active() else 1


def is_main() -> bool:
    """Whether this process is rank 0, the only one that touches the privacy boundary and the run folder."""
    return rank() == 0


def local_device(device: torch.device) -> torch.device:
    """This process's device: on CUDA without an index, the GPU ``LOCAL_RANK`` (one per process); else ``device``."""
    if device.type == "cuda" and requested() and device.index is None:
        local, gpus = int(os.environ.get("LOCAL_RANK", "0")), torch.cuda.device_count()
        if local >= gpus:  # nccl refuses two ranks on one GPU, and a missing index fails deep in CUDA
            raise errors.ConfigError(
                f"torchrun started local process {local}, but this machine has {gpus} GPU(s): nccl needs one "
                "GPU per process (start at most that many with --nproc_per_node, or train with --device cpu)"
            )
        return torch.device("cuda", local)
    return device


def start(device: torch.device) -> bool:
    """Join the process group the environment describes (once); whether this process now runs data-parallel."""
    if active() or not requested():
        return active()
    if not available():
        raise errors.ConfigError("WORLD_SIZE asks for several processes, but this torch has no torch.distributed")
    backend = "nccl" if device.type == "cuda" else "gloo"
    if device.type == "cuda":
        torch.cuda.set_device(device)
    torch.distributed.init_process_group(backend, timeout=TIMEOUT)
    return True


def stop() -> None:
    """Leave the process group, after a barrier so no rank leaves while another still talks to it."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        gc.collect()  # the training's DistributedDataParallel reducers go before their process group
        torch.distributed.barrier()  # no rank leaves while another still talks to it (gloo aborts otherwise)
        torch.distributed.destroy_process_group()


def communication_device() -> torch.device:
    """Where collective operations take their tensors: the current GPU under nccl, else the CPU."""
    if not active():
        return torch.device("cpu")
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast(value: Any = None) -> Any:
    """Rank 0's ``value`` on every rank (pickled; the others' ``value`` is ignored)."""
    if not active():
        return value
    box = [value if is_main() else None]
    torch.distributed.broadcast_object_list(box, src=0, device=communication_device())
    return box[0]


def on_main(step: Callable[[], T]) -> T:
    """Run ``step`` on rank 0 alone and return its result on every rank.

    An error raised by ``step`` is raised on every rank, so none waits for a result that never comes: a
    :class:`~labeldp.errors.LabelDPError` as its own class, anything else as ``RuntimeError`` off rank 0.
    """
    if not active():
        return step()
    if is_main():
        try:
            result = step()
        except BaseException as error:
            broadcast(("error", type(error).__name__, str(error)))
            raise
        broadcast(("ok", result))
        return result
    outcome = broadcast()
    if outcome[0] == "error":
        kind = getattr(errors, outcome[1], None)
        if isinstance(kind, type) and issubclass(kind, errors.LabelDPError):
            raise kind(outcome[2])
        raise RuntimeError(f"rank 0 failed: {outcome[1]}: {outcome[2]}")
    return outcome[1]


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """The sum over ranks of ``tensor``, the same on every rank, on its device."""
    if not active():
        return tensor
    moved = tensor.to(communication_device())
    torch.distributed.all_reduce(moved, op=torch.distributed.ReduceOp.SUM)
    return moved.to(tensor.device)


def gather_to_main(value: Any) -> list[Any] | None:
    """Every rank's ``value`` on rank 0, in rank order (pickled); None on the other ranks."""
    if not active():
        return [value]
    found: list[Any] | None = [None] * world_size() if is_main() else None
    torch.distributed.gather_object(value, found, dst=0)
    return found


def gather_everywhere(value: Any) -> list[Any]:
    """Every rank's ``value`` on every rank, in rank order (pickled)."""
    if not active():
        return [value]
    found: list[Any] = [None] * world_size()
    torch.distributed.all_gather_object(found, value)
    return found


def gather_tensors(tensor: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's ``tensor`` (of one shape and type) on every rank, in rank order."""
    if not active():
        return [tensor]
    moved = tensor.to(communication_device())
    parts = [torch.empty_like(moved) for _ in range(world_size())]
    torch.distributed.all_gather(parts, moved)
    return [part.to(tensor.device) for part in parts]


def shard(count: int) -> slice:
    """This rank's contiguous share of ``count`` rows (the first ranks take one more)."""
    size, ranks, me = count, world_size(), rank()
    base, extra = divmod(size, ranks)
    begin = me * base + min(me, extra)
    return slice(begin, begin + base + (me < extra))


def gather_rows(local: torch.Tensor, count: int) -> torch.Tensor:
    """Every rank's :func:`shard` of rows, concatenated in rank order, on every rank."""
    if not active():
        return local
    ranks = world_size()
    longest = -(-count // ranks)
    device = communication_device()
    padded = torch.zeros((longest, *local.shape[1:]), dtype=local.dtype, device=device)
    padded[: len(local)] = local.to(device)
    parts = [torch.empty_like(padded) for _ in range(ranks)]
    torch.distributed.all_gather(parts, padded)
    base, extra = divmod(count, ranks)
    return torch.cat([part[: base + (r < extra)] for r, part in enumerate(parts)]).to(local.device)


def check_same(value: Any, what: str) -> None:
    """Refuse (ConfigError) to go on when the ranks disagree on ``value``, e.g. the configuration each started with."""
    if not active():
        return
    values: list[Any] = [None] * world_size()
    torch.distributed.all_gather_object(values, value)
    differ = [r for r, v in enumerate(values) if v != values[0]]
    if differ:
        raise errors.ConfigError(
            f"the processes of this run disagree on {what} (ranks {differ} differ from rank 0); "
            "start every process with the same command"
        )


def seed_of_rank(seed: int, *ids: int) -> int:
    """A seed of this rank's own public stream (its augmentation), distinct per rank and ``ids``."""
    return int(np.random.SeedSequence([int(seed), 0x6464, rank(), *map(int, ids)]).generate_state(1, np.uint64)[0] >> 1)
