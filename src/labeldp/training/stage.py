"""One supervised training stage: plain (non-private) learning on already-released labels.

Everything here runs *after* the privacy boundary: it never sees true training labels, only the
noisy labels a mechanism released, so any model, optimiser or augmentation is allowed.

This module holds the optimiser, the learning-rate schedule, the epoch record and :func:`train_stage`
(its epochs, steps and end-of-epoch evaluation); the losses and the preparation of the targets are in
:mod:`labeldp.training.losses`, the predictions and metrics in :mod:`labeldp.training.predict`, and the
checkpoints (shared with DP-SGD's trainer) in :mod:`labeldp.training.checkpoint`.
"""

from __future__ import annotations

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
from labeldp.config.train import TrainConfig
from labeldp.errors import ConfigError
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
from labeldp.training.predict import accuracy, rmse
from labeldp.training.records import EpochRecord


def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` means the GPU when torch sees one, else the CPU; anything else is passed to torch.

    Parameters
    ----------
    device : str or torch.device, optional
        ``"auto"``, or a device torch knows (``"cpu"``, ``"cuda:1"``, ...).

    Returns
    -------
    torch.device
        The device.

    Raises
    ------
    labeldp.errors.ConfigError
        If a CUDA device is asked for and torch sees no CUDA GPU.
    """
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but torch sees no CUDA GPU")
    return resolved


def check_amp(config: TrainConfig, device: torch.device) -> None:
    """Refuse ``amp`` off CUDA GPUs: it is bf16 autocast there, and elsewhere the run would silently
    train in float32.

    Parameters
    ----------
    config : TrainConfig
        The training settings.
    device : torch.device
        The device the model trains on.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``config.amp`` is set and ``device`` is not a CUDA GPU.
    """
    if config.amp and device.type != "cuda":
        raise ConfigError(f"amp (bf16 autocast) is for CUDA GPUs; this run is on {device.type}: leave amp off")


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    """The optimiser ``config`` names for ``model``'s parameters: AdamW, or SGD (Nesterov momentum when
    ``config.momentum`` > 0), with ``config``'s learning rate and weight decay.

    Parameters
    ----------
    model : torch.nn.Module
        The model to train.
    config : TrainConfig
        The training settings.

    Returns
    -------
    torch.optim.Optimizer
        The optimiser.
    """
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
    """The learning-rate factor of each step (for ``torch.optim.lr_scheduler.LambdaLR``): a linear
    warm-up over ``config.warmup_epochs``, then constant or a cosine decay to 0 at the last step.

    Parameters
    ----------
    config : TrainConfig
        The training settings (epochs, warm-up, schedule).
    steps_per_epoch : int
        Optimiser steps per epoch.

    Returns
    -------
    callable
        Step index -> factor of the peak learning rate.
    """
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
    """One batch's mean loss, after augmentation and mixup (both drawn from the stage's generators);
    ``loss_of(logits, targets)`` is the per-example loss (default:
    :func:`~labeldp.training.losses.likelihood_loss` of the targets' log-likelihoods)."""
    device = targets.device
    if config.augment:
        xb = augment(xb, augmentation, generator)
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
    """What the epochs of one :func:`train_stage` call share. ``net`` is ``model``, or its
    ``DistributedDataParallel`` wrapper for the steps of a data-parallel run; ``held`` the validation
    inputs, targets and loss; ``best`` the best epoch on them so far: (loss, epoch, weights)."""

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
    """Restore ``run`` from its checkpoint, when there is one (under ``parallel`` rank 0 reads it and
    every rank resumes from it), the stage's generators and best epoch included; the history so far."""
    state, history = restore_checkpoint(run.checkpoint, run.model, run.optimizer, run.scheduler, parallel=run.parallel)
    if state is not None:
        run.generator.set_state(state["torch_rng"])
        run.np_rng.bit_generator.state = state["numpy_rng"]
        run.best = state.get("best")
    return history


def _save(run: _StageRun, history: list[EpochRecord]) -> None:
    """Checkpoint ``run`` after an epoch (rank 0 writes): the model, optimiser, schedule, the stage's
    generators and best epoch, and ``history``."""
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
    """One optimiser step on batch ``step`` of ``order`` (in parallel, this rank's share of it); returns
    the batch's mean loss and the number of examples it stands for in the epoch's loss."""
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
    """The steps of one epoch over a fresh shuffle (``bar`` iterates over the steps); returns the sum of
    the examples' losses over every rank."""
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
    """Evaluate the model after ``epoch`` (shared among the ranks in parallel): on the public test set,
    and on the validation examples, whose best epoch ``run`` keeps; the epoch's record."""
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


def _epochs(
    run: _StageRun,
    history: list[EpochRecord],
    test: tuple[np.ndarray, np.ndarray] | None,
    label_values: np.ndarray | None,
    on_epoch_end: Callable[[EpochRecord], None] | None,
    progress: bool,
    description: str,
) -> None:
    """The epochs after the last one in ``history``, up to ``config.epochs``: each trains, is evaluated,
    appended to ``history``, checkpointed, and reported to ``on_epoch_end`` (on rank 0)."""
    epochs = run.config.epochs
    for epoch in range(len(history) + 1, epochs + 1):
        start = time.perf_counter()
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
    """Train ``model`` in place on (``inputs``, ``targets``) for ``config.epochs`` epochs.

    ``targets`` are either integer labels (cross-entropy) or an (n, K) matrix of label likelihoods
    L[i, y] = Pr[observed label of i | class y], e.g. a mechanism's noise channel (forward-corrected
    cross-entropy, see :func:`~labeldp.training.losses.likelihood_loss`), or (n, 3, K) binned evidence
    of releases that tell a label's bin (:func:`~labeldp.training.losses.binned_likelihood_loss`). For a
    regression on the grid ``label_values`` they may also be float values (squared error of the
    expected value, :func:`~labeldp.training.losses.squared_error_loss`); the ``test`` pair then holds
    the test *values*, and each epoch reports the test RMSE.

    With ``soft_labels``, (n, K) likelihood targets are trained on by
    :func:`~labeldp.training.losses.posterior_loss` (cross-entropy to each row normalised) instead of
    :func:`~labeldp.training.losses.likelihood_loss`.

    With ``validation`` (held-out inputs and targets of the same kind), each epoch also scores the
    model on them (:func:`~labeldp.training.losses.held_out_loss`), and the model ends with the weights
    of the epoch that scored best (early stopping).

    If ``checkpoint`` is given, the full training state (model, optimiser, schedule, random
    generators, history) is written there after every epoch, and an existing checkpoint is resumed
    from: a stage interrupted at any point continues where its last epoch ended, with the same
    random stream as an uninterrupted run. Returns the per-epoch history.

    With ``data_parallel`` (a collective call of every process of a ``torchrun`` group, see
    :mod:`labeldp.distributed`; ignored in a single process) the model trains inside
    ``DistributedDataParallel`` (``model`` itself is left unwrapped and ends with the trained weights
    on every rank): every rank shuffles the same order (the public ``seed``), takes a disjoint share
    of each batch, and the gradients are averaged so that each step follows the whole batch's mean
    loss, as in one process. Augmentation draws from a stream of each rank's own. Evaluation is
    shared among the ranks; only rank 0 reads and writes the ``checkpoint`` and calls
    ``on_epoch_end``, the others receive the checkpoint's state from it.

    Parameters
    ----------
    model : torch.nn.Module
        The model, trained in place (its outputs are the K classes, or the grid's points).
    inputs : numpy.ndarray
        The training inputs, one row per example.
    targets : numpy.ndarray
        Released targets: (n,) labels, (n, K) likelihoods, (n, 3, K) binned evidence, or (n,) float
        values of a regression.
    num_classes : int
        K, the number of classes (or grid points).
    config : TrainConfig
        The training settings.
    augmentation : str, optional
        The dataset's augmentation policy (:func:`~labeldp.training.augment.augment`).
    test : tuple of numpy.ndarray, optional
        Public test inputs and labels (or values), scored after every epoch.
    seed : int, optional
        The public seed of the shuffles, augmentation and mixup.
    checkpoint : str or os.PathLike, optional
        The checkpoint file, written after every epoch and resumed from.
    on_epoch_end : callable, optional
        Called with each epoch's :class:`EpochRecord` (on rank 0).
    progress : bool, optional
        Show a progress bar.
    description : str, optional
        The progress bar's label.
    label_values : numpy.ndarray, optional
        The grid of a regression's label values.
    validation : tuple of numpy.ndarray, optional
        Held-out inputs and released targets, for early stopping.
    data_parallel : bool, optional
        Train data-parallel across the processes of a ``torchrun`` group (a collective call).
    soft_labels : bool, optional
        Train (n, K) likelihood targets by the posterior loss.

    Returns
    -------
    list of EpochRecord
        The per-epoch history, resumed epochs included.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``config`` cannot train, the targets (or validation targets) are malformed or do not match
        the inputs, ``soft_labels`` is given targets other than likelihoods, or ``amp`` is asked for off
        a CUDA GPU.
    labeldp.errors.RunDirectoryError
        If the checkpoint is damaged.
    """
    config.validate()
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
