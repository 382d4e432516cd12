"""A resumable DP-SGD training loop (Abadi et al. 2016, with the accuracy techniques of De et al. 2022).

Each of ``steps`` steps: Poisson-sample a batch (rate q), compute the sum of clipped per-example
gradients (micro-batched to ``physical_batch_size``; with augmentation multiplicity M, each example's
gradient is averaged over M augmented views before clipping), add N(0, (sigma C)^2) noise, divide by
the expected batch size q n, and take an optimiser step (SGD with momentum or AdamW, warm-up and
cosine schedule: post-processing). An exponential moving average of the parameters (EMA, with the
usual warm-up of its decay) is kept for evaluation when ``ema_decay`` is set; it is post-processing too.

Privacy: (epsilon, delta)-DP for add-or-remove-one-example neighbours, where epsilon is what
:func:`labeldp.accounting.dpsgd_epsilon` gives for (sigma, q, steps) -- the run records that
event on its ledger before training starts. The guarantee covers everything the trainer writes or
shows, which is a function of the privatised gradients and public data only: the final and every
intermediate model, the checkpoints (model, optimiser, schedule, EMA), test accuracy on the public
test set, the learning rate. It writes no training loss and no batch size, nor anything that counts
the sampled examples: the augmentation of each step draws from a generator seeded for that step. It
assumes the batches and the noise are unpredictable to the adversary: both come from ``noise`` (a
:class:`~labeldp.randomness.NoiseSource`, fresh OS entropy by default), each epoch from generators of
its own that are never saved, so a resumed run draws its remaining steps afresh.

Across processes (``torchrun``, ``data_parallel``; :mod:`labeldp.distributed`) the mechanism is the
same one: rank 0 alone samples each epoch's batches (Poisson over the whole dataset, with its
generator) and hands them to the others; each rank sums the clipped gradients of its share of the
batch; rank 0 alone adds the Gaussian noise, to its share; the shares are summed across the ranks
(all-reduce) and divided by the expected batch size. The privatised gradient is therefore
distributed exactly as in one process (:func:`private_gradient`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel
from tqdm.auto import tqdm

from labeldp import distributed, runtime
from labeldp.boundary import PrivateLabels, unseal
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.train import TrainConfig
from labeldp.dpsgd.clipping import check_per_example_model, clipped_gradient_sum
from labeldp.dpsgd.noise import noise_generator, privatize_gradients
from labeldp.dpsgd.sampling import PoissonSampler, sampling_generator
from labeldp.errors import ConfigError
from labeldp.randomness import NoiseSource, public_seed
from labeldp.training.augment import augment
from labeldp.training.checkpoint import restore_checkpoint, save_checkpoint
from labeldp.training.predict import accuracy
from labeldp.training.records import EpochRecord
from labeldp.training.stage import lr_schedule, make_optimizer


def check_training_options(config: TrainConfig, dp: DPSGDConfig, augmentation: str | None = None) -> None:
    """Refuse training settings that DP-SGD cannot honour: mixup (it mixes examples), amp (bf16 norms
    under the clipping bound), augmentation multiplicity without augmentation (K identical views).
    ``augmentation`` is the dataset's policy, None while it is not known yet.

    Parameters
    ----------
    config : TrainConfig
        The training settings.
    dp : DPSGDConfig
        The DP-SGD settings.
    augmentation : str or None, optional
        The dataset's augmentation policy (None: not known yet).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``config`` asks for mixup or amp, or ``dp.augmult`` > 1 without augmentation.
    """
    if config.mixup_alpha > 0:
        raise ConfigError(
            "DP-SGD cannot use mixup: it mixes examples, which breaks per-example clipping; use mixup_alpha=0"
        )
    if config.amp:
        raise ConfigError(
            "DP-SGD runs in float32: amp (bf16 autocast) would compute the per-example gradient norms "
            "that the clipping bound rests on in bf16; use amp=False"
        )
    if dp.augmult > 1 and (not config.augment or augmentation == "none"):
        reason = "augmentation is off" if not config.augment else "the dataset has no augmentation"
        raise ConfigError(
            f"augmult {dp.augmult} averages the gradients of augmented views of each example, but "
            f"{reason}; use augmult 1"
        )


def _ema_with_warmup(decay: float) -> Callable[[list[torch.Tensor], list[torch.Tensor], torch.Tensor], None]:
    """EMA update (an ``AveragedModel`` ``multi_avg_fn``) whose decay ramps up as
    min(decay, (1 + t) / (10 + t)) over the first updates, so that short runs are not dominated by the
    initial weights. The rate is computed on the parameters' device, in float64 (float32 on Apple's
    MPS, which has no float64): the update never waits for a GPU to report t, and its arithmetic is
    that of a Python-float rate."""

    def average(averaged: list[torch.Tensor], current: list[torch.Tensor], updates: torch.Tensor) -> None:
        t = updates.to(torch.float32 if updates.device.type == "mps" else torch.float64)
        rate = torch.clamp((1.0 + t) / (10.0 + t), max=decay)
        scaled = torch._foreach_mul(current, 1.0 - rate)
        torch._foreach_mul_(averaged, rate)
        torch._foreach_add_(averaged, scaled)

    return average


def sampling_plan(num_examples: int, config: TrainConfig) -> tuple[float, int, int]:
    """(q, steps, steps per epoch) for ``config.epochs`` epochs at expected batch size ``config.batch_size``.

    Parameters
    ----------
    num_examples : int
        n, the number of training examples.
    config : TrainConfig
        The training settings (epochs, expected batch size).

    Returns
    -------
    tuple
        q = batch_size / n (float), the number of steps, epochs x round(1/q) (int), and the steps per
        epoch (int).

    Raises
    ------
    labeldp.errors.ConfigError
        If the batch size exceeds n.
    """
    if config.batch_size > num_examples:
        raise ConfigError(f"batch_size ({config.batch_size}) exceeds the number of training examples ({num_examples})")
    q = config.batch_size / num_examples
    steps_per_epoch = max(1, round(1 / q))
    return q, config.epochs * steps_per_epoch, steps_per_epoch


def private_gradient(
    model: nn.Module,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    dp: DPSGDConfig,
    noise_multiplier: float,
    expected_batch_size: float,
    noise_rng,
    parallel: bool = False,
) -> None:
    """Set ``model``'s gradients to one DP-SGD step's privatised gradient: (the sum of the clipped
    per-example gradients of ``inputs`` + N(0, (sigma C)^2)) / ``expected_batch_size``.

    With ``parallel`` (a collective call of every rank of the process group), ``inputs`` are this
    rank's share of the batch: rank 0 adds the noise to its share only (``noise_rng`` is used there
    alone), and the shares are summed across the ranks, so that the noise enters once.

    Parameters
    ----------
    model : torch.nn.Module
        A per-example model (:func:`~labeldp.dpsgd.clipping.check_per_example_model`); its ``.grad``
        are set.
    inputs : torch.Tensor
        The batch's inputs (with augmentation multiplicity, (b, M, ...) views).
    labels : torch.Tensor
        Their labels.
    dp : DPSGDConfig
        The DP-SGD settings (clipping bound C, clipping method, micro-batch size).
    noise_multiplier : float
        sigma.
    expected_batch_size : float
        q n, the divisor of the noisy sum.
    noise_rng : torch.Generator or str or None
        The generator of the Gaussian noise (:func:`~labeldp.dpsgd.noise.noise_generator`); used on rank
        0 only under ``parallel``.
    parallel : bool, optional
        Sum the ranks' shares (a collective call).
    """
    clipped = clipped_gradient_sum(
        model,
        inputs,
        labels,
        dp.max_grad_norm,
        method=dp.clipping,
        physical_batch_size=dp.physical_batch_size,
        multiple_views=dp.augmult > 1,
    )
    noisy = not parallel or distributed.is_main()
    privatize_gradients(
        model,
        clipped,
        noise_multiplier if noisy else 0.0,
        dp.max_grad_norm,
        expected_batch_size,
        noise_rng if noisy else None,
    )
    if parallel:
        params = [p for p in model.parameters() if p.requires_grad]
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        flat = distributed.all_reduce_sum(flat)
        offset = 0
        for param in params:
            param.grad.copy_(flat[offset : offset + param.numel()].view_as(param.grad))
            offset += param.numel()


@dataclass
class _DPSGDRun:
    """What the epochs of one :func:`train_dpsgd` call share. ``y`` are the true labels, read inside the
    mechanism; ``noise`` gives each epoch's batches and Gaussian noise (never saved); ``ema`` is the
    parameters' moving average, when kept."""

    model: nn.Module
    x: torch.Tensor
    y: torch.Tensor
    config: TrainConfig
    dp: DPSGDConfig
    noise_multiplier: float
    q: float
    steps_per_epoch: int
    noise: NoiseSource
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    ema: AveragedModel | None
    augmentation: str
    seed: int
    parallel: bool
    device: torch.device
    checkpoint: Path | None

    @property
    def evaluated(self) -> nn.Module:
        """The model to evaluate and return: the EMA when kept, else the trained model.

        Returns
        -------
        torch.nn.Module
            The EMA's module when ``ema`` is kept, else ``model``.
        """
        return self.ema.module if self.ema is not None else self.model


def _resume(run: _DPSGDRun) -> list[EpochRecord]:
    """Restore ``run`` from its checkpoint, when there is one (under ``parallel`` rank 0 reads it and
    every rank resumes from it), the EMA included; the history so far. No sampling or noise state is
    restored: none is saved."""
    state, history = restore_checkpoint(run.checkpoint, run.model, run.optimizer, run.scheduler, parallel=run.parallel)
    if state is not None and run.ema is not None:
        run.ema.load_state_dict(state["ema"])
    return history


def _save(run: _DPSGDRun, history: list[EpochRecord]) -> None:
    """Checkpoint ``run`` after an epoch (rank 0 writes): the model, optimiser, schedule, EMA and
    ``history``, nothing of the sampling or the noise."""
    save_checkpoint(
        run.checkpoint,
        run.model,
        run.optimizer,
        run.scheduler,
        history,
        ema=run.ema.state_dict() if run.ema is not None else None,
    )


def _step(run: _DPSGDRun, epoch: int, step: int, batch: torch.Tensor, noise_rng) -> None:
    """One DP-SGD step on ``batch`` (in parallel, this rank's share of it): augmentation, the privatised
    gradient, the optimiser step and the EMA's update."""
    # Each example's views depend on (epoch, step, its index) only, not on the others in the batch.
    augment_rng = torch.Generator().manual_seed(public_seed(run.seed, "dpsgd-augment", epoch, step))
    if run.parallel:
        batch = batch[distributed.rank() :: distributed.world_size()]
    n = len(run.x)
    xb = run.x[batch]
    if run.dp.augmult > 1:
        xb = torch.stack([augment(xb, run.augmentation, augment_rng, batch, n) for _ in range(run.dp.augmult)], dim=1)
    elif run.config.augment:
        xb = augment(xb, run.augmentation, augment_rng, batch, n)
    private_gradient(
        run.model,
        xb.to(run.device),
        run.y[batch].to(run.device),
        run.dp,
        run.noise_multiplier,
        run.q * n,
        noise_rng,
        run.parallel,
    )
    run.optimizer.step()
    run.scheduler.step()
    if run.ema is not None:
        run.ema.update_parameters(run.model)


def _epoch(run: _DPSGDRun, epoch: int, progress: bool) -> None:
    """The steps of one epoch. Its Poisson batches and Gaussian noise come from generators of its own
    (from ``run.noise``), drawn on rank 0 alone; in parallel rank 0 samples the epoch's batches over the
    whole dataset and hands them to every rank."""
    noise_rng = next_batch = None
    if distributed.is_main():  # the secret batches and noise: rank 0 alone draws them
        sampler = PoissonSampler(len(run.x), run.q, run.steps_per_epoch, sampling_generator(run.noise, epoch))
        noise_rng = noise_generator(run.noise, "dpsgd-noise", epoch, device=run.device)
        next_batch = sampler.sample
    if run.parallel:  # the epoch's batches, sampled over the whole dataset on rank 0, for every rank
        next_batch = iter(distributed.on_main(lambda: [sampler.sample() for _ in range(run.steps_per_epoch)])).__next__
    for step in tqdm(
        range(run.steps_per_epoch),
        desc=f"dp-sgd epoch {epoch}/{run.config.epochs}",
        leave=False,
        disable=None if progress else True,
        unit="step",
    ):
        runtime.recheck_threads()  # the command's automatic threads follow the machine's free cores
        _step(run, epoch, step, next_batch(), noise_rng)


def _end_of_epoch(run: _DPSGDRun, epoch: int, start: float, test: tuple[np.ndarray, np.ndarray] | None) -> EpochRecord:
    """The record of ``epoch``: the evaluated model's accuracy on the public test set (shared among the
    ranks in parallel) and the learning rate; no training loss."""
    test_accuracy = (
        accuracy(run.evaluated, *test, run.config.eval_batch_size, sharded=run.parallel) if test is not None else None
    )
    return EpochRecord(epoch, None, test_accuracy, run.optimizer.param_groups[0]["lr"], time.perf_counter() - start)


def _epochs(
    run: _DPSGDRun,
    history: list[EpochRecord],
    test: tuple[np.ndarray, np.ndarray] | None,
    on_epoch_end: Callable[[EpochRecord], None] | None,
    progress: bool,
) -> None:
    """The epochs after the last one in ``history``, up to ``config.epochs``: each trains, is evaluated,
    appended to ``history``, checkpointed, and reported to ``on_epoch_end`` (on rank 0)."""
    for epoch in range(len(history) + 1, run.config.epochs + 1):
        start = time.perf_counter()
        _epoch(run, epoch, progress)
        record = _end_of_epoch(run, epoch, start, test)
        history.append(record)
        _save(run, history)
        if on_epoch_end is not None and distributed.is_main():
            on_epoch_end(record)


def train_dpsgd(
    model: nn.Module,
    inputs: np.ndarray,
    labels: PrivateLabels,
    config: TrainConfig,
    dp: DPSGDConfig,
    noise_multiplier: float,
    *,
    augmentation: str = "none",
    test: tuple[np.ndarray, np.ndarray] | None = None,
    seed: int = 0,
    noise: NoiseSource | None = None,
    checkpoint: str | os.PathLike | None = None,
    on_epoch_end: Callable[[EpochRecord], None] | None = None,
    progress: bool = True,
    data_parallel: bool = False,
) -> tuple[nn.Module, list[EpochRecord]]:
    """Train ``model`` in place with DP-SGD; returns (the model to evaluate -- the EMA when kept --, history).

    The sampling plan is :func:`sampling_plan` (q = batch_size / n, epochs x round(1/q) steps).
    ``noise`` gives the batches and the Gaussian noise (:class:`~labeldp.randomness.NoiseSource`);
    ``seed`` only the augmentation, which is public. A ``checkpoint`` is written after every epoch
    (model, optimiser, schedule, EMA) and resumed from.

    With ``data_parallel`` (every rank of a ``torchrun`` group calls it; ignored in one process) the
    ranks share each step as the module docstring says; only rank 0 samples, draws noise, reads and
    writes the checkpoint and calls ``on_epoch_end``.

    Parameters
    ----------
    model : torch.nn.Module
        A per-example model (no BatchNorm), trained in place.
    inputs : numpy.ndarray
        The training inputs, one row per example.
    labels : PrivateLabels
        The true training labels, read inside the mechanism only (a plain array is refused).
    config : TrainConfig
        The training settings (``batch_size`` is the expected Poisson batch size).
    dp : DPSGDConfig
        The DP-SGD settings (clipping, micro-batches, augmentation multiplicity, EMA).
    noise_multiplier : float
        sigma, calibrated by the caller for the target epsilon.
    augmentation : str, optional
        The dataset's augmentation policy.
    test : tuple of numpy.ndarray, optional
        Public test inputs and labels, scored after every epoch.
    seed : int, optional
        The public seed of the augmentation.
    noise : NoiseSource, optional
        The source of the batches and the noise (default fresh OS entropy).
    checkpoint : str or os.PathLike, optional
        The checkpoint file, written after every epoch and resumed from.
    on_epoch_end : callable, optional
        Called with each epoch's :class:`~labeldp.training.records.EpochRecord` (on rank 0).
    progress : bool, optional
        Show a progress bar.
    data_parallel : bool, optional
        Share each step across the processes of a ``torchrun`` group (a collective call).

    Returns
    -------
    tuple
        The model to evaluate (the EMA's module when kept, else ``model``) and the per-epoch history.

    Raises
    ------
    labeldp.errors.ConfigError
        If the settings cannot train privately (:func:`check_training_options`, the batch size), or the
        inputs and labels are empty or of different lengths.
    labeldp.dpsgd.clipping.UnsupportedModelError
        If ``model`` is not a per-example model.
    labeldp.errors.RunDirectoryError
        If the checkpoint is damaged.
    """
    config.validate()
    dp.validate()
    check_training_options(config, dp, augmentation)
    check_per_example_model(model)
    x = torch.as_tensor(np.asarray(inputs, dtype=np.float32))
    y = torch.from_numpy(unseal(labels).astype(np.int64))  # read inside the mechanism: clipped, noised steps
    if len(x) != len(y) or len(x) == 0:
        raise ConfigError(f"inputs and labels must be non-empty and of equal length, got {len(x)} and {len(y)}")
    q, _, steps_per_epoch = sampling_plan(len(x), config)
    device = next(model.parameters()).device
    optimizer = make_optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(config, steps_per_epoch))
    noise = noise or NoiseSource()
    ema = (
        AveragedModel(model, multi_avg_fn=_ema_with_warmup(dp.ema_decay), use_buffers=True)
        if dp.ema_decay > 0
        else None
    )
    run = _DPSGDRun(
        model,
        x,
        y,
        config,
        dp,
        noise_multiplier,
        q,
        steps_per_epoch,
        noise,
        optimizer,
        scheduler,
        ema,
        augmentation,
        seed,
        data_parallel and distributed.active(),
        device,
        Path(checkpoint) if checkpoint is not None else None,
    )
    history = _resume(run)
    model.train()
    _epochs(run, history, test, on_epoch_end, progress)
    return run.evaluated, history
