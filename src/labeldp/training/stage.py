"""One supervised training stage: plain (non-private) learning on already-released labels.

It never sees true training labels, only what a mechanism released, so any model, optimiser or
augmentation is allowed. The optimiser, schedule and :func:`train_stage` live here; losses, predictions
and checkpoints in their own modules of :mod:`labeldp.training`.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from labeldp import distributed, runtime
from labeldp.config.train_config import TrainConfig
from labeldp.errors import ConfigError
from labeldp.models.boosted_trees import BoostedTrees
from labeldp.randomness import public_seed
from labeldp.training.augment import augment, mixup
from labeldp.training.checkpoint import restore_checkpoint, save_checkpoint
from labeldp.training.losses import (
    PerExampleLoss,
    held_out_loss,
    held_out_loss_of,
    likelihood_loss,
    posterior_loss,
    prepare_targets,
)
from labeldp.training.predictions import accuracy, rmse
from labeldp.training.records import EpochRecord


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto``: the GPU when torch sees one, else the CPU; anything else goes to torch (CUDA needs a GPU)."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but torch sees no CUDA GPU")
    return resolved


def check_amp(config: TrainConfig, device: torch.device) -> None:
    """Refuse ``amp`` off CUDA GPUs: it is bf16 autocast there, and elsewhere would silently train in float32."""
    if config.amp and device.type != "cuda":
        raise ConfigError(f"amp (bf16 autocast) is for CUDA GPUs; this run is on {device.type}: leave amp off")


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW, or SGD (Nesterov momentum when ``config.momentum`` > 0), with ``config``'s rate and weight decay."""
    if config.optimizer == "adam":
        return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(
        model.parameters(),
        lr=config.lr,
        momentum=config.momentum,
        weight_decay=config.weight_decay,
        nesterov=config.momentum > 0,
    )


def lr_schedule(config: TrainConfig, steps_per_epoch: int) -> Callable[[int], float]:
    """Each step's factor of the peak learning rate (for ``LambdaLR``): linear warm-up, then constant or cosine to 0."""
    total = config.epochs * steps_per_epoch
    warmup = int(config.warmup_epochs * steps_per_epoch)

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        if config.schedule == "constant":
            return 1.0
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1.0 + math.cos(math.pi * min(progress, 1.0)))

    return factor


def _batch_loss(
    model: nn.Module,
    xb: torch.Tensor,
    targets: torch.Tensor,
    config: TrainConfig,
    augmentation: str,
    generator: torch.Generator,
    np_rng: np.random.Generator,
    loss_of: PerExampleLoss = likelihood_loss,
) -> torch.Tensor:
    """One batch's mean loss, after augmentation and mixup drawn from the stage's generators."""
    device = targets.device
    if config.augment:
        xb = augment(xb, augmentation, generator, flip=config.flip, cutout=config.cutout)
    lam, perm = 1.0, None
    if config.mixup_alpha > 0:
        lam = float(np_rng.beta(config.mixup_alpha, config.mixup_alpha))
        xb, perm = mixup(xb, lam, generator)
    # bf16 autocast on GPUs when asked (no loss scaling needed); the loss itself in float32
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.amp):
        logits = model(xb.to(device, non_blocking=True))
    loss = loss_of(logits.float(), targets)
    if perm is not None:
        loss = lam * loss + (1 - lam) * loss_of(logits.float(), targets[perm])
    return loss.mean()


@dataclass
class _StageRun:
    """What the epochs of one :func:`train_stage` call share.

    ``net`` is ``model`` or its ``DistributedDataParallel`` wrapper; ``held`` the validation inputs,
    targets and loss; ``best`` the best epoch on them so far, (loss, epoch, weights).
    """

    model: nn.Module
    net: nn.Module
    x: torch.Tensor
    fitted: torch.Tensor
    loss_of: PerExampleLoss
    config: TrainConfig
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    generator: torch.Generator
    np_rng: np.random.Generator
    augmentation: str
    seed: int
    parallel: bool
    device: torch.device
    steps_per_epoch: int
    checkpoint: Path | None
    held: tuple[torch.Tensor, torch.Tensor, PerExampleLoss] | None = None
    best: tuple[float, int, dict] | None = None


def _fitted_targets(
    inputs: np.ndarray, targets: np.ndarray, num_classes: int, label_values: np.ndarray | None, soft_labels: bool
) -> tuple[torch.Tensor, torch.Tensor, PerExampleLoss]:
    """The training inputs, the targets as a tensor, and the per-example loss that fits them."""
    x = torch.as_tensor(np.asarray(inputs, dtype=np.float32))
    fitted, loss_of = prepare_targets(targets, num_classes, label_values)
    if soft_labels:
        if loss_of is not likelihood_loss:
            raise ConfigError("soft_labels needs (n, K) likelihood targets")
        loss_of = posterior_loss
    if len(x) != len(fitted) or len(x) == 0:
        raise ConfigError(f"inputs and targets must be non-empty and of equal length, got {len(x)} and {len(fitted)}")
    return x, fitted, loss_of


def _held_out_targets(
    validation: tuple[np.ndarray, np.ndarray], num_classes: int, label_values: np.ndarray | None
) -> tuple[torch.Tensor, torch.Tensor, PerExampleLoss]:
    """The validation inputs, their targets as a tensor, and the loss that scores a model on them."""
    x_held = torch.as_tensor(np.asarray(validation[0], dtype=np.float32))
    held, held_loss_of = prepare_targets(validation[1], num_classes, label_values)
    held_loss_of = held_out_loss_of(held_loss_of)
    if len(x_held) != len(held) or len(x_held) == 0:
        raise ConfigError("validation inputs and targets must be non-empty and of equal length")
    return x_held, held, held_loss_of


def _resume(run: _StageRun) -> list[EpochRecord]:
    """Restore ``run`` from its checkpoint, generators and best epoch included; the history so far."""
    state, history = restore_checkpoint(run.checkpoint, run.model, run.optimizer, run.scheduler, parallel=run.parallel)
    if state is not None:
        run.generator.set_state(state["torch_rng"])
        run.np_rng.bit_generator.state = state["numpy_rng"]
        run.best = state.get("best")
    return history


def _save(run: _StageRun, history: list[EpochRecord]) -> None:
    """Checkpoint ``run`` after an epoch (rank 0 writes), its generators and best epoch included."""
    save_checkpoint(
        run.checkpoint,
        run.model,
        run.optimizer,
        run.scheduler,
        history,
        torch_rng=run.generator.get_state(),
        numpy_rng=run.np_rng.bit_generator.state,
        best=run.best,
    )


def _step(run: _StageRun, order: torch.Tensor, step: int, augment_rng: torch.Generator) -> tuple[torch.Tensor, int]:
    """One optimiser step on batch ``step`` of ``order`` (this rank's share): its mean loss and examples' count."""
    batch_size = run.config.batch_size
    batch = order[step * batch_size : (step + 1) * batch_size]
    weight = 1.0
    if run.parallel:
        ranks = distributed.world_size()
        size, batch = len(batch), batch[distributed.rank() :: ranks]
        # the mean over the whole batch once DDP averages the ranks' gradients; a rank left
        # without examples (a last batch smaller than the ranks) steps with weight 0
        weight = ranks * len(batch) / size
        if len(batch) == 0:
            batch = order[step * batch_size :][:1]
    loss = _batch_loss(
        run.net,
        run.x[batch],
        run.fitted[batch].to(run.device),
        run.config,
        run.augmentation,
        augment_rng,
        run.np_rng,
        run.loss_of,
    )
    run.optimizer.zero_grad(set_to_none=True)
    (loss * weight if run.parallel else loss).backward()
    run.optimizer.step()
    run.scheduler.step()
    return loss, (len(batch) if weight else 0)


def _epoch(run: _StageRun, epoch: int, bar: tqdm) -> torch.Tensor:
    """One epoch's steps over a fresh shuffle; the sum of the examples' losses over every rank."""
    order = torch.randperm(len(run.x), generator=run.generator)
    # in parallel the shared generator draws only the order (the same on every rank); each rank
    # augments its share from a stream of its own
    augment_rng = (
        torch.Generator().manual_seed(distributed.seed_of_rank(run.seed, epoch)) if run.parallel else run.generator
    )
    total_loss = torch.zeros((), dtype=torch.float64, device=run.device)
    for step in bar:
        runtime.recheck_threads()  # the command's automatic threads follow the machine's free cores
        loss, examples = _step(run, order, step, augment_rng)
        # summed on the device: no wait for a GPU per batch
        total_loss += loss.detach().double() * examples
        if step % 20 == 0:
            bar.set_postfix(loss=f"{loss.item():.3f}")
    if run.parallel:
        total_loss = distributed.all_reduce_sum(total_loss)
        for buffer in run.model.buffers():  # rank 0's BatchNorm statistics everywhere, as DDP does at each step
            torch.distributed.broadcast(buffer, 0)
    return total_loss


def _end_of_epoch(
    run: _StageRun,
    epoch: int,
    total_loss: torch.Tensor,
    start: float,
    test: tuple[np.ndarray, np.ndarray] | None,
    label_values: np.ndarray | None,
) -> EpochRecord:
    """Evaluate after ``epoch`` on the public test set and the validation examples (keeping the best); its record."""
    sharded, batch_size = run.parallel, run.config.eval_batch_size
    test_accuracy = test_rmse = None
    if test is not None and label_values is not None:
        test_rmse = rmse(run.model, *test, label_values, batch_size, sharded=sharded)
    elif test is not None:
        test_accuracy = accuracy(run.model, *test, batch_size, sharded=sharded)
    validation_loss = None
    if run.held is not None:
        validation_loss = held_out_loss(run.model, *run.held, batch_size, sharded=sharded)
        if run.best is None or validation_loss < run.best[0]:
            weights = {k: v.detach().cpu().clone() for k, v in run.model.state_dict().items()}
            run.best = (validation_loss, epoch, weights)
    return EpochRecord(
        epoch,
        float(total_loss) / len(run.x),
        test_accuracy,
        run.optimizer.param_groups[0]["lr"],
        time.perf_counter() - start,
        test_rmse,
        validation_loss,
    )


def dropout_streams(device: torch.device) -> contextlib.AbstractContextManager:
    """Around a stage's epochs: torch's global streams of the CPU and ``device``, which dropout draws from,
    restored after."""
    return torch.random.fork_rng(devices=[device] if device.type == "cuda" else [])


def seed_dropout(seed: int, epoch: int, device: torch.device, parallel: bool) -> None:
    """Seed dropout's streams for ``epoch`` from the public ``seed`` (in data-parallel training, each rank's
    own), so that a resumed run draws what it would have."""
    value = distributed.seed_of_rank(seed, epoch, 1) if parallel else public_seed(seed, "dropout", epoch)
    torch.default_generator.manual_seed(value)
    if device.type == "cuda":
        with torch.cuda.device(device):
            torch.cuda.manual_seed(value)


def _epochs(
    run: _StageRun,
    history: list[EpochRecord],
    test: tuple[np.ndarray, np.ndarray] | None,
    label_values: np.ndarray | None,
    on_epoch_end: Callable[[EpochRecord], None] | None,
    progress: bool,
    description: str,
) -> None:
    """The epochs after ``history``'s last: each trained, evaluated, appended, checkpointed and reported (rank 0)."""
    epochs = run.config.epochs
    with dropout_streams(run.device):
        for epoch in range(len(history) + 1, epochs + 1):
            start = time.perf_counter()
            seed_dropout(run.seed, epoch, run.device, run.parallel)
            bar = tqdm(
                range(run.steps_per_epoch),
                desc=f"{description} epoch {epoch}/{epochs}",
                leave=False,
                disable=None if progress else True,
                unit="batch",
            )
            total_loss = _epoch(run, epoch, bar)
            record = _end_of_epoch(run, epoch, total_loss, start, test, label_values)
            history.append(record)
            _save(run, history)
            if on_epoch_end is not None and distributed.is_main():
                on_epoch_end(record)


def train_stage(
    model: nn.Module,
    inputs: np.ndarray,
    targets: np.ndarray,
    num_classes: int,
    config: TrainConfig,
    *,
    augmentation: str = "none",
    test: tuple[np.ndarray, np.ndarray] | None = None,
    seed: int = 0,
    checkpoint: str | os.PathLike | None = None,
    on_epoch_end: Callable[[EpochRecord], None] | None = None,
    progress: bool = True,
    description: str = "train",
    label_values: np.ndarray | None = None,
    validation: tuple[np.ndarray, np.ndarray] | None = None,
    data_parallel: bool = False,
    soft_labels: bool = False,
) -> list[EpochRecord]:
    """Train ``model`` in place on (``inputs``, ``targets``) for ``config.epochs`` epochs; the per-epoch history.

    ``targets`` are prepared by :func:`~labeldp.training.losses.prepare_targets`: (n,) labels, (n, K)
    likelihoods L[i, y] = Pr[observed label of i | class y] (forward-corrected cross-entropy), (n, 3, K)
    binned evidence, or with ``label_values`` a regression's (n,) float values (``test`` then holds values
    and each epoch reports the RMSE). ``soft_labels`` trains likelihoods by
    :func:`~labeldp.training.losses.posterior_loss`.

    With ``validation`` (held-out inputs and released targets) the model ends with the weights of the
    epoch that scored best on them. With ``checkpoint`` the whole state is written after every epoch and
    resumed from: an interrupted stage continues with the same random stream as an uninterrupted one.

    With ``data_parallel`` (a collective call of a ``torchrun`` group, :mod:`labeldp.distributed`; ignored
    in one process) the model trains inside ``DistributedDataParallel``, ``model`` itself unwrapped and
    trained on every rank: each rank takes a disjoint share of each batch of the same public shuffle and
    the gradients follow the whole batch's mean, as in one process. Only rank 0 reads and writes the
    checkpoint and calls ``on_epoch_end``.

    Parameters
    ----------
    seed : int, optional
        The public seed of the shuffles, augmentation, mixup and dropout (torch's global streams are left as
        they were).
    augmentation : str, optional
        The dataset's augmentation policy (:func:`~labeldp.training.augment.augment`).
    """
    config.validate()
    if isinstance(model, BoostedTrees):
        raise ConfigError("model 'gbdt' is fitted from released targets (fit_trees), not trained by gradient steps")
    parallel = data_parallel and distributed.active()
    x, fitted, loss_of = _fitted_targets(inputs, targets, num_classes, label_values, soft_labels)
    held = _held_out_targets(validation, num_classes, label_values) if validation is not None else None
    device = next(model.parameters()).device
    check_amp(config, device)
    steps_per_epoch = math.ceil(len(x) / config.batch_size)
    optimizer = make_optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(config, steps_per_epoch))
    run = _StageRun(
        model,
        model,
        x,
        fitted,
        loss_of,
        config,
        optimizer,
        scheduler,
        torch.Generator().manual_seed(seed),
        np.random.default_rng(seed),
        augmentation,
        seed,
        parallel,
        device,
        steps_per_epoch,
        Path(checkpoint) if checkpoint is not None else None,
        held,
    )
    history = _resume(run)
    if parallel:  # wrapped for the steps only: the caller's model object stays as it is
        run.net = nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    model.train()
    _epochs(run, history, test, label_values, on_epoch_end, progress, description)
    if held is not None and run.best is not None:
        model.load_state_dict(run.best[2])
    return history
