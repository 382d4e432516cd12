"""Data-parallel runs under ``torchrun``: the process group, and the few collective operations a run uses.

``torchrun --nproc_per_node N -m labeldp train ...`` starts N processes whose environment names
their place (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT``).
:func:`start` joins them into one process group (gloo on the CPU, nccl on CUDA GPUs, chosen by the
run's device); without that environment, or with one process, nothing changes: every function here
then acts as for a single process.

Rank 0 is the only process that touches the privacy boundary and the run folder: it draws every
release (with the run's :class:`~labeldp.randomness.NoiseSource`), keeps the ledger and writes every
file. The other ranks receive what they need by :func:`broadcast` and only compute: their shares of
each training batch, of each evaluation and of each prior's inference. :func:`on_main` runs a step on
rank 0 and hands its result, or its error, to every rank.

The ads route (``labeldp hashed train``) is the exception: each rank reads only its own row groups of
a Parquet table, so each counts, or draws the released labels of, its own rows, and hands its part to
rank 0 (:func:`gather_to_main`), which alone records the release, once, and writes the run folder
(:mod:`labeldp.boundary.release_parts`).
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
    """Whether this torch has ``torch.distributed``.

    Returns
    -------
    bool
        ``torch.distributed.is_available()``.
    """
    return torch.distributed.is_available()


def active() -> bool:
    """Whether this process belongs to a process group of more than one process.

    Returns
    -------
    bool
        True once :func:`start` joined a group of several processes.
    """
    return (
        torch.distributed.is_available()
        and torch.distributed.is_initialized()
        and torch.distributed.get_world_size() > 1
    )


def rank() -> int:
    """This process's rank in the process group (0 when not data-parallel).

    Returns
    -------
    int
        The rank.
    """
    return torch.distributed.get_rank() if active() else 0


def world_size() -> int:
    """Number of processes in the process group (1 when not data-parallel).

    Returns
    -------
    int
        The number of processes.
    """
    return torch.distributed.get_world_size() if active() else 1


def is_main() -> bool:
    """Whether this process is rank 0, the only one that touches the privacy boundary and the run folder.

    Returns
    -------
    bool
        True on rank 0 and when not data-parallel.
    """
    return rank() == 0


def local_device(device: torch.device) -> torch.device:
    """The device of this process: on CUDA the GPU ``LOCAL_RANK`` (one per process), else ``device``.

    Parameters
    ----------
    device : torch.device
        The run's device.

    Returns
    -------
    torch.device
        ``cuda:LOCAL_RANK`` for a CUDA device without an index in a multi-process run, else ``device``.
    """
    if device.type == "cuda" and requested() and device.index is None:
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    return device


def start(device: torch.device) -> bool:
    """Join the process group that the environment describes (once; nccl for CUDA, gloo otherwise).

    Parameters
    ----------
    device : torch.device
        This process's device (see :func:`local_device`); it chooses the backend.

    Returns
    -------
    bool
        Whether this process now runs data-parallel.

    Raises
    ------
    labeldp.errors.ConfigError
        If the environment asks for several processes but this torch has no ``torch.distributed``.
    """
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
    """Leave the process group (at the end of the command that started it).

    Waits at a barrier first, so that no rank leaves while another still talks to it. Does nothing
    without a process group.

    Returns
    -------
    None
    """
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        gc.collect()  # the training's DistributedDataParallel reducers go before their process group
        torch.distributed.barrier()  # no rank leaves while another still talks to it (gloo aborts otherwise)
        torch.distributed.destroy_process_group()


def communication_device() -> torch.device:
    """Where collective operations take their tensors: the current GPU under nccl, else the CPU.

    Returns
    -------
    torch.device
        The device.
    """
    if not active():
        return torch.device("cpu")
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def broadcast(value: Any = None) -> Any:
    """Rank 0's ``value`` on every rank (pickled; the others' ``value`` is ignored).

    Every rank must call it.

    Parameters
    ----------
    value : object, optional
        The value to send, read on rank 0 only.

    Returns
    -------
    object
        Rank 0's value (``value`` itself when not data-parallel).
    """
    if not active():
        return value
    box = [value if is_main() else None]
    torch.distributed.broadcast_object_list(box, src=0, device=communication_device())
    return box[0]


def on_main(step: Callable[[], T]) -> T:
    """Run ``step`` on rank 0 alone and return its result on every rank.

    An error raised by ``step`` is raised on every rank (a :class:`~labeldp.errors.LabelDPError` as its
    own class), so that no rank waits for a result that never comes.

    Parameters
    ----------
    step : callable
        A function of no arguments; its result must be picklable.

    Returns
    -------
    object
        ``step``'s result.

    Raises
    ------
    labeldp.errors.LabelDPError
        The error ``step`` raised on rank 0, of the same class on every rank; any other error is raised
        as itself on rank 0 and as ``RuntimeError`` on the others.
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
    """The sum over ranks of ``tensor``, on its device (the tensor itself when alone).

    Every rank receives the same values (the backend reduces each element once and shares the result).

    Parameters
    ----------
    tensor : torch.Tensor
        This rank's part, the same shape on every rank.

    Returns
    -------
    torch.Tensor
        The sum, on ``tensor``'s device.
    """
    if not active():
        return tensor
    moved = tensor.to(communication_device())
    torch.distributed.all_reduce(moved, op=torch.distributed.ReduceOp.SUM)
    return moved.to(tensor.device)


def gather_to_main(value: Any) -> list[Any] | None:
    """Every rank's ``value`` on rank 0, in rank order (pickled); None on the other ranks.

    Every rank must call it. A rank's share of a release drawn by several ranks reaches rank 0 this way
    (:func:`labeldp.boundary.release_hashed.release_hashed_counts`' ``gather``).

    Parameters
    ----------
    value : object
        This rank's value (picklable).

    Returns
    -------
    list or None
        On rank 0 (and when not data-parallel) every rank's value, ``[value]`` alone; None elsewhere.
    """
    if not active():
        return [value]
    found: list[Any] | None = [None] * world_size() if is_main() else None
    torch.distributed.gather_object(value, found, dst=0)
    return found


def gather_everywhere(value: Any) -> list[Any]:
    """Every rank's ``value`` on every rank, in rank order (pickled).

    Parameters
    ----------
    value : object
        This rank's value (picklable).

    Returns
    -------
    list
        Every rank's value (``[value]`` when not data-parallel).
    """
    if not active():
        return [value]
    found: list[Any] = [None] * world_size()
    torch.distributed.all_gather_object(found, value)
    return found


def gather_tensors(tensor: torch.Tensor) -> list[torch.Tensor]:
    """Every rank's ``tensor`` (the same shape and type on every rank), on every rank, in rank order.

    Parameters
    ----------
    tensor : torch.Tensor
        This rank's tensor.

    Returns
    -------
    list of torch.Tensor
        One per rank, on ``tensor``'s device (``[tensor]`` when not data-parallel).
    """
    if not active():
        return [tensor]
    moved = tensor.to(communication_device())
    parts = [torch.empty_like(moved) for _ in range(world_size())]
    torch.distributed.all_gather(parts, moved)
    return [part.to(tensor.device) for part in parts]


def shard(count: int) -> slice:
    """This rank's contiguous share of ``count`` rows (the first ranks take one more when it does not divide).

    With :func:`gather_rows`, evaluation over ``count`` examples split among the ranks.

    Parameters
    ----------
    count : int
        Number of rows.

    Returns
    -------
    slice
        This rank's rows.
    """
    size, ranks, me = count, world_size(), rank()
    base, extra = divmod(size, ranks)
    begin = me * base + min(me, extra)
    return slice(begin, begin + base + (me < extra))


def gather_rows(local: torch.Tensor, count: int) -> torch.Tensor:
    """Every rank's :func:`shard` of rows, concatenated in rank order (``count`` rows), on every rank.

    Parameters
    ----------
    local : torch.Tensor
        This rank's rows, shape (len(shard), ...).
    count : int
        Total number of rows.

    Returns
    -------
    torch.Tensor
        Shape (count, ...), on ``local``'s device.
    """
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
    """Refuse to go on when the ranks disagree on ``value`` (e.g. the configuration each was started with).

    Parameters
    ----------
    value : object
        This rank's value (picklable, comparable with ``==``).
    what : str
        What it is, for the message.

    Returns
    -------
    None

    Raises
    ------
    labeldp.errors.ConfigError
        If some rank's value differs from rank 0's.
    """
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
    """A seed for this rank's own public stream (its augmentation), distinct per rank and ``ids``.

    Parameters
    ----------
    seed : int
        The run's public seed.
    *ids : int
        Further identifiers of the stream (e.g. an epoch).

    Returns
    -------
    int
        A seed in [0, 2^63).
    """
    return int(np.random.SeedSequence([int(seed), 0x6464, rank(), *map(int, ids)]).generate_state(1, np.uint64)[0] >> 1)
