"""Out-of-core training of hashed sparse models on released targets, and their predictions.

An epoch is one pass over the table's blocks (:func:`labeldp.data.hashing.hashed_blocks`, re-read and
re-hashed each epoch: memory is a block's and the model's), each shuffled by the public seed and cut
into minibatches, while a background thread reads and hashes the next block. The losses read the
public side of the boundary: :func:`forward_loss` released labels through their channel,
:func:`counts_loss` noisy label counts (:mod:`labeldp.training.from_counts`).

``l2`` adds lambda / 2 |w|^2 (factors included) spread over each bucket's rows (a row of bucket j
carries lambda w_j^2 / (2 n_j), n_j its public size), so a minibatch's mean is unbiased and only its
buckets are touched. Under ``torchrun`` each rank reads its own row groups and the gradients are
summed every step (:mod:`labeldp.training.sparse_parallel`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from labeldp import distributed
from labeldp.data.hashing import HashSpec
from labeldp.errors import ConfigError
from labeldp.models.sparse import HashedFM, HashedLogistic
from labeldp.randomness import public_seed
from labeldp.training.checkpoint import save_atomic
from labeldp.training.losses import likelihood_loss
from labeldp.training.sparse_parallel import share_gradients

#: a per-row loss: ``loss(model, buckets, targets)``, one value per row
SparseLoss = Callable[[HashedLogistic, torch.Tensor, torch.Tensor], torch.Tensor]
OPTIMIZERS = ("adagrad", "torch-adagrad", "sgd", "sparse-adam")


@dataclass(frozen=True)
class SparseTrainConfig:
    """The settings of :func:`train_sparse`.

    Parameters
    ----------
    optimizer : str
        ``"adagrad"`` (:class:`ScatterAdagrad`), ``"torch-adagrad"`` (the same updates, slower), ``"sgd"``
        or ``"sparse-adam"`` (SparseAdam on the buckets, Adam on the bias).
    l2 : float
        lambda of the penalty lambda / 2 |w|^2 on the summed loss (needs the buckets' sizes).
    seed : int
        The public seed of the rows' order.
    threads : int or None
        torch's intra-op threads while training (restored after); None leaves them. 1 by default: a
        sparse step is too small to share, and the reading thread needs a core of its own.
    """

    epochs: int = 1
    batch_rows: int = 8192
    lr: float = 0.1
    optimizer: str = "adagrad"
    l2: float = 0.0
    seed: int = 0
    threads: int | None = 1

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.epochs < 1 or self.batch_rows < 1 or not self.lr > 0 or self.l2 < 0:
            raise ConfigError("epochs and batch_rows must be at least 1, lr > 0 and l2 >= 0")


def forward_loss(model: nn.Module, buckets: torch.Tensor, log_channel: torch.Tensor) -> torch.Tensor:
    """Per-row -log sum_y p(y | x) Pr[released | y] of a binary model; ``log_channel`` is (batch, 2)."""
    logit = model(buckets)
    return likelihood_loss(torch.stack([torch.zeros_like(logit), logit], dim=1), log_channel)


def counts_loss(model: HashedLogistic, buckets: torch.Tensor, rates: torch.Tensor) -> torch.Tensor:
    """Per-row softplus(z) - sum_f w[i_f] t[i_f] - b t_0: the logistic likelihood with label counts for labels.

    Summed over the rows it is exact when t[j] is bucket j's positive count over its size and t_0 the
    positive rate; ``rates`` is (batch, F + 1), the buckets' rates then the base rate.
    """
    weights = model.linear_weights(buckets)
    logit = weights.sum(dim=1) + model.bias
    return F.softplus(logit) - (weights * rates[:, :-1]).sum(dim=1) - model.bias * rates[:, -1]


def _penalty(model: HashedLogistic, buckets: torch.Tensor, inverse_sizes: torch.Tensor, l2: float) -> torch.Tensor:
    scale = F.embedding(buckets, inverse_sizes.unsqueeze(1)).squeeze(-1)  # (batch, F) 1 / n_j
    total = (model.linear_weights(buckets).pow(2) * scale).sum()
    factors = model.factor_weights(buckets)
    if factors is not None:
        total = total + (factors.pow(2).sum(dim=2) * scale).sum()
    return 0.5 * l2 * total / buckets.shape[0]


class ScatterAdagrad(torch.optim.Optimizer):
    """Adagrad without decay (s += g^2, w -= lr g / (sqrt(s) + eps)) whose sparse step needs no sort.

    torch's sparse Adagrad coalesces (sorts) each gradient first. Here a gradient's rows are summed into a
    dense scratch vector (``index_add_``, duplicates included) and each touched row written back by plain
    indexed assignment: a repeated row gets the same value from each occurrence, so no row is updated
    twice. The scratch rows are zeroed after the step.
    """

    def __init__(self, params, lr: float = 0.05, eps: float = 1e-10):
        super().__init__(params, {"lr": lr, "eps": eps})

    @torch.no_grad()
    def step(self, closure=None):
        """One update of every parameter with a gradient (``closure`` is never called)."""
        for group in self.param_groups:
            for param in group["params"]:
                if param.grad is None:
                    continue
                state = self.state[param]
                if not state:
                    state["sum"] = torch.zeros_like(param)
                    state["scratch"] = torch.zeros_like(param) if param.grad.is_sparse else None
                if param.grad.is_sparse:
                    self._sparse_step(param, param.grad, state, group["lr"], group["eps"])
                else:
                    state["sum"].addcmul_(param.grad, param.grad)
                    param.addcdiv_(param.grad, state["sum"].sqrt().add_(group["eps"]), value=-group["lr"])

    @staticmethod
    def _sparse_step(param: torch.Tensor, grad: torch.Tensor, state: dict, lr: float, eps: float) -> None:
        rows = grad._indices()[0]
        scratch = state["scratch"]
        scratch.index_add_(0, rows, grad._values())
        total = scratch[rows]  # each occurrence sees its row's whole gradient
        accumulated = state["sum"][rows].addcmul_(total, total)
        state["sum"][rows] = accumulated
        param[rows] = param[rows] - lr * total / (accumulated.sqrt() + eps)
        scratch[rows] = 0


def make_optimizers(model: HashedLogistic, config: SparseTrainConfig) -> list[torch.optim.Optimizer]:
    """The optimisers of a hashed model: one, or SparseAdam and Adam for ``"sparse-adam"``."""
    if config.optimizer == "adagrad":
        return [ScatterAdagrad(model.parameters(), lr=config.lr)]
    if config.optimizer == "torch-adagrad":
        if not torch.sparse.check_sparse_tensor_invariants.is_enabled():
            torch.sparse.check_sparse_tensor_invariants.disable()  # the default, said explicitly (silences a warning)
        return [torch.optim.Adagrad(model.parameters(), lr=config.lr)]
    if config.optimizer == "sgd":
        return [torch.optim.SGD(model.parameters(), lr=config.lr)]
    sparse = [p for name, p in model.named_parameters() if name != "bias"]
    return [torch.optim.SparseAdam(sparse, lr=config.lr), torch.optim.Adam([model.bias], lr=config.lr)]


def prefetch(items: Iterable, depth: int = 2) -> Iterator:
    """``items``, produced by a daemon thread up to ``depth`` ahead; its error is raised here, when reached."""
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    end = object()

    def produce() -> None:
        try:
            for item in items:
                handoff.put(item)
        except BaseException as error:  # handed over, raised by the consumer
            handoff.put(error)
        handoff.put(end)

    threading.Thread(target=produce, daemon=True).start()
    while (item := handoff.get()) is not end:
        if isinstance(item, BaseException):
            raise item
        yield item


def train_sparse(
    model: HashedLogistic,
    epoch_blocks: Callable[[int], Iterable[tuple[np.ndarray, np.ndarray]]],
    loss: SparseLoss,
    config: SparseTrainConfig = SparseTrainConfig(),
    sizes: np.ndarray | None = None,
    data_parallel: bool = False,
) -> list[dict]:
    """Train ``model`` for ``config.epochs`` passes over the blocks ``epoch_blocks(epoch)`` gives; one record per epoch.

    A block is ``(buckets, targets)``, (rows, F) int64 and (rows, ...) float32, shuffled here. ``sizes``
    (the buckets' public sizes) is needed for ``config.l2``. With ``data_parallel`` under ``torchrun`` each
    rank passes its own row groups and takes its share of ``config.batch_rows``; the summed gradients
    (:func:`labeldp.training.sparse_parallel.share_gradients`) keep the models the same on every rank.
    """
    if config.l2 and sizes is None:
        raise ConfigError("an l2 penalty needs the buckets' sizes")
    inverse = None if sizes is None else torch.from_numpy(1.0 / np.maximum(np.asarray(sizes, np.float32), 1.0))
    optimizers = make_optimizers(model, config)
    threads = torch.get_num_threads()
    torch.set_num_threads(config.threads or threads)
    try:
        return _epochs(model, epoch_blocks, loss, config, optimizers, inverse, data_parallel and distributed.active())
    finally:
        torch.set_num_threads(threads)


def _epochs(model, epoch_blocks, loss, config, optimizers, inverse, parallel: bool) -> list[dict]:
    history = []
    model.train()
    world, rank = distributed.world_size(), distributed.rank()
    ranks = (world, rank) if parallel else ()
    local_rows = config.batch_rows // world + (rank < config.batch_rows % world) if parallel else config.batch_rows
    for epoch in range(config.epochs):
        generator = torch.Generator().manual_seed(public_seed(config.seed, "training", epoch, *ranks))
        batches = _batches(prefetch(epoch_blocks(epoch)), generator, local_rows)
        started, rows, total = time.perf_counter(), 0, 0.0
        while True:
            batch = next(batches, None)
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=True)
            count, value = (0, 0.0) if batch is None else _backward(model, loss, batch, config, inverse, parallel)
            if parallel:
                count, value = share_gradients(model, count, value)
            if count == 0:
                break
            for optimizer in optimizers:
                optimizer.step()
            rows, total = rows + count, total + value
        seconds = time.perf_counter() - started
        history.append(
            {
                "epoch": epoch,
                "rows": rows,
                "loss": total / max(rows, 1),
                "seconds": seconds,
                "rows_per_second": rows / seconds,
            }
        )
    return history


def _batches(blocks: Iterable, generator: torch.Generator, batch_rows: int) -> Iterator[tuple[torch.Tensor, ...]]:
    """Each block's rows, shuffled by ``generator``, in minibatches of ``batch_rows`` (a block's last shorter)."""
    for buckets, targets in blocks:
        buckets, targets = torch.from_numpy(buckets), torch.from_numpy(targets)
        order = torch.randperm(buckets.shape[0], generator=generator)
        for start in range(0, order.numel(), batch_rows):
            chosen = order[start : start + batch_rows]
            yield buckets[chosen], targets[chosen]


def _backward(model, loss, batch, config: SparseTrainConfig, inverse, summed: bool) -> tuple[int, float]:
    """Back-propagate the batch's mean loss (summed where ``summed``: the ranks' sum is divided by all their rows)."""
    buckets, targets = batch
    count = buckets.shape[0]
    value = loss(model, buckets, targets).mean()
    if config.l2:
        value = value + _penalty(model, buckets, inverse, config.l2)
    (value * count if summed else value).backward()
    return count, float(value.detach()) * count


@torch.no_grad()
def predict_sparse(model: nn.Module, blocks: Iterable, batch_rows: int = 1 << 16) -> tuple[np.ndarray, np.ndarray]:
    """``(positions, probabilities)``: Pr[positive] of every row of ``blocks``, hashed as the model was trained."""
    model.eval()
    positions, probabilities = [], []
    for block in prefetch(blocks):
        buckets = torch.from_numpy(block.buckets)
        logits = [model(buckets[start : start + batch_rows]) for start in range(0, buckets.shape[0], batch_rows)]
        probabilities.append(torch.sigmoid(torch.cat(logits)).double().numpy())
        positions.append(block.positions)
    return np.concatenate(positions), np.concatenate(probabilities)


@torch.no_grad()
def calibrate_intercept(model: HashedLogistic, sample: Iterable[np.ndarray], rate: float, steps: int = 30) -> float:
    """Shift the model's bias so that its mean predicted probability over ``sample`` is ``rate``; the shift.

    A model trained on noisy targets pins its bias poorly (Adagrad scales its small noisy gradient to full
    steps, and rare buckets fitted to noise shift the mean). A rate estimated from the release pins it;
    from public rows and released quantities, this is post-processing.
    """
    if not 0 < rate < 1:
        raise ConfigError(f"rate must lie in (0, 1), got {rate}")
    model.eval()
    logits = torch.cat([model(torch.from_numpy(buckets)) for buckets in sample]).double()
    shift = torch.zeros((), dtype=torch.float64)
    for _ in range(steps):
        probability = torch.sigmoid(logits + shift)
        slope = (probability * (1 - probability)).mean().clamp_min(1e-12)
        shift -= ((probability.mean() - rate) / slope).clamp(-1.0, 1.0)
    model.bias.add_(shift.float())
    return float(shift)


def save_sparse_model(path, model: nn.Module, spec: HashSpec) -> None:
    """Write a hashed model and its hash spec to ``path`` atomically, so new rows are hashed as training rows were."""
    kind = {"HashedLogistic": "logistic", "HashedFM": "fm"}[type(model).__name__]
    dim = model.factors.embedding_dim if isinstance(model, HashedFM) else 0
    save_atomic({"kind": kind, "dim": dim, "spec": spec.to_dict(), "state": model.state_dict()}, Path(path))


def load_sparse_model(path) -> tuple[HashedLogistic, HashSpec]:
    """A model (in evaluation mode) and its hash spec written by :func:`save_sparse_model`."""
    saved = torch.load(Path(path), weights_only=True)
    spec = HashSpec.from_dict(saved["spec"])
    model = HashedFM(spec.num_buckets, saved["dim"]) if saved["kind"] == "fm" else HashedLogistic(spec.num_buckets)
    model.load_state_dict(saved["state"])
    return model.eval(), spec


__all__ = [
    "ScatterAdagrad",
    "SparseTrainConfig",
    "calibrate_intercept",
    "counts_loss",
    "forward_loss",
    "load_sparse_model",
    "make_optimizers",
    "predict_sparse",
    "prefetch",
    "save_sparse_model",
    "train_sparse",
]
