"""A resumable DP-SGD training loop (Abadi et al. 2016, with the accuracy techniques of De et al. 2022).

Each step Poisson-samples a batch (rate q), sums the clipped per-example gradients (micro-batched;
with augmentation multiplicity M each example's gradient is averaged over M views first), adds
N(0, (sigma C)^2), divides by q n and steps the optimiser; an EMA of the parameters may be kept.

Privacy: (epsilon, delta)-DP for add-or-remove-one, epsilon being
:func:`labeldp.accounting.dpsgd_epsilon` of (sigma, q, steps), recorded before training. It covers
everything the trainer writes or shows (every model, the checkpoints, public test accuracy, the
learning rate): functions of the privatised gradients and public data. It writes no training loss
and nothing that counts the sampled examples (each step's augmentation has a generator of its own).
It assumes secret batches and noise: both come from ``noise``, per epoch, never saved, so a resumed
run draws its remaining steps afresh.

Under ``torchrun`` (``data_parallel``) the mechanism is the same: rank 0 alone samples the batches
and hands them out, each rank sums the clipped gradients of its share, rank 0 alone adds the noise,
and the shares are summed (:func:`private_gradient`).
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
from labeldp.config.train_config import TrainConfig
from labeldp.dpsgd.clipping import check_per_example_model, clipped_gradient_sum
from labeldp.dpsgd.noise import noise_generator, privatize_gradients
from labeldp.dpsgd.sampling import PoissonSampler, sampling_generator
from labeldp.errors import ConfigError
from labeldp.randomness import NoiseSource, public_seed
from labeldp.training.augment import augment
from labeldp.training.checkpoint import restore_checkpoint, save_checkpoint
from labeldp.training.predictions import accuracy
from labeldp.training.records import EpochRecord
from labeldp.training.stage import dropout_streams, lr_schedule, make_optimizer, seed_dropout

#: the parameters (or buffers) an ``AveragedModel`` averaging function receives
_Tensors = list[torch.Tensor] | tuple[torch.Tensor, ...]


def check_training_options(config: TrainConfig, dp: DPSGDConfig, augmentation: str | None = None) -> None:
    """Refuse what DP-SGD cannot honour: mixup (it mixes examples), amp (bf16 norms under the clipping bound),
    augmentation multiplicity without augmentation (``augmentation`` None: not known yet).
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
    if dp.augmult > 1 and (not config.augment or (augmentation == "none" and not (config.flip or config.cutout))):
        reason = "augmentation is off" if not config.augment else "the dataset has no augmentation"
        raise ConfigError(
            f"augmult {dp.augmult} averages the gradients of augmented views of each example, but "
            f"{reason}; use augmult 1"
        )


def _ema_with_warmup(decay: float) -> Callable[[_Tensors, _Tensors, torch.Tensor | int], None]:
    """EMA update (an ``AveragedModel`` ``multi_avg_fn``) whose decay ramps up as min(decay, (1 + t) / (10 + t)).

    So short runs are not dominated by the initial weights. The rate is computed on the parameters'
    device (float64, float32 on MPS), so the update never waits for a GPU to report t.
    """

    def average(averaged: _Tensors, current: _Tensors, updates: torch.Tensor | int) -> None:
        updates = torch.as_tensor(updates)  # AveragedModel passes its count, a tensor (its signature allows an int)
        t = updates.to(torch.float32 if updates.device.type == "mps" else torch.float64)
        rate = torch.clamp((1.0 + t) / (10.0 + t), max=decay)
        scaled = torch._foreach_mul(current, 1.0 - rate)
        torch._foreach_mul_(averaged, rate)
        torch._foreach_add_(averaged, scaled)

    return average


def sampling_plan(num_examples: int, config: TrainConfig) -> tuple[float, int, int]:
    """(q, steps, steps per epoch): q = batch_size / n, ``config.epochs`` x round(1 / q) steps.

    A batch size above n is refused.
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
    """Set ``model``'s gradients to one step's privatised gradient (:func:`~labeldp.dpsgd.noise.privatize_gradients`).

    With ``parallel`` (a collective call), ``inputs`` are this rank's share: rank 0 alone adds the noise
    (``noise_rng`` is used there only) and the shares are summed, so the noise enters once.
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
        # privatize_gradients set every trainable parameter's grad
        grads = [p.grad for p in model.parameters() if p.requires_grad and p.grad is not None]
        flat = torch.cat([grad.reshape(-1) for grad in grads])
        flat = distributed.all_reduce_sum(flat)
        offset = 0
        for grad in grads:
            grad.copy_(flat[offset : offset + grad.numel()].view_as(grad))
            offset += grad.numel()


@dataclass
class _DPSGDRun:
    """What the epochs of one :func:`train_dpsgd` call share.

    ``y`` are the true labels, read inside the mechanism; ``noise`` gives each epoch's batches and
    Gaussian noise (never saved); ``ema`` is the parameters' moving average, when kept.
    """

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
        """The model to evaluate and return: the EMA's module when kept, else the trained model."""
        return self.ema.module if self.ema is not None else self.model


def _resume(run: _DPSGDRun) -> list[EpochRecord]:
    """Restore ``run`` from its checkpoint, the EMA included; the history so far.

    No sampling or noise state is restored: none is saved.
    """
    state, history = restore_checkpoint(run.checkpoint, run.model, run.optimizer, run.scheduler, parallel=run.parallel)
    if state is not None and run.ema is not None:
        run.ema.load_state_dict(state["ema"])
    return history


def _save(run: _DPSGDRun, history: list[EpochRecord]) -> None:
    """Checkpoint ``run`` after an epoch (rank 0 writes), with the EMA and nothing of the sampling or the noise."""
    save_checkpoint(
        run.checkpoint,
        run.model,
        run.optimizer,
        run.scheduler,
        history,
        ema=run.ema.state_dict() if run.ema is not None else None,
    )


def _step(run: _DPSGDRun, epoch: int, step: int, batch: torch.Tensor, noise_rng) -> None:
    """One DP-SGD step on ``batch`` (this rank's share): augmentation, the privatised gradient, the step, the EMA."""
    # Each example's views depend on (epoch, step, its index) only, not on the others in the batch.
    augment_rng = torch.Generator().manual_seed(public_seed(run.seed, "dpsgd-augment", epoch, step))
    if run.parallel:
        batch = batch[distributed.rank() :: distributed.world_size()]
    n = len(run.x)
    xb = run.x[batch]
    config = run.config
    if run.dp.augmult > 1:
        views = [
            augment(xb, run.augmentation, augment_rng, batch, n, config.flip, config.cutout)
            for _ in range(run.dp.augmult)
        ]
        xb = torch.stack(views, dim=1)
    elif config.augment:
        xb = augment(xb, run.augmentation, augment_rng, batch, n, config.flip, config.cutout)
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
    """One epoch's steps; its batches and noise come from generators of its own, drawn on rank 0 alone."""
    noise_rng = next_batch = None
    if distributed.is_main():  # the secret batches and noise: rank 0 alone draws them
        sampler = PoissonSampler(len(run.x), run.q, run.steps_per_epoch, sampling_generator(run.noise, epoch))
        noise_rng = noise_generator(run.noise, "dpsgd-noise", epoch, device=run.device)
        next_batch = sampler.sample
    if run.parallel:  # the epoch's batches, sampled over the whole dataset on rank 0, for every rank
        next_batch = iter(distributed.on_main(lambda: [sampler.sample() for _ in range(run.steps_per_epoch)])).__next__
    assert next_batch is not None, "set on rank 0, and on every rank of a parallel run"
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
    """The record of ``epoch``: the evaluated model's public test accuracy and the learning rate, no training loss."""
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
    """The epochs after ``history``'s last: each trained, evaluated, appended, checkpointed and reported (rank 0)."""
    with dropout_streams(run.device):
        for epoch in range(len(history) + 1, run.config.epochs + 1):
            start = time.perf_counter()
            seed_dropout(run.seed, epoch, run.device, run.parallel)
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
    """Train ``model`` in place with DP-SGD; (the model to evaluate, the EMA when kept, and the history).

    ``labels`` are read inside the mechanism only (a plain array is refused). The plan is
    :func:`sampling_plan` (``config.batch_size`` is the expected Poisson batch size); ``noise`` gives the
    batches and the noise, ``seed`` only the public augmentation and dropout. A ``checkpoint`` is written after every
    epoch and resumed from. With ``data_parallel`` (a collective call of a ``torchrun`` group) the ranks
    share each step as :mod:`labeldp.dpsgd.trainer` says; only rank 0 samples, draws noise, touches the
    checkpoint and calls ``on_epoch_end``.

    Raises
    ------
    labeldp.dpsgd.clipping.UnsupportedModelError
        If ``model`` is not a per-example model.
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
