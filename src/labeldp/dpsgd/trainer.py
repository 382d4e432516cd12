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
the sampled examples: the augmentation of each step draws from a generator seeded for that step. It assumes the batches and the noise are
unpredictable to the adversary: both come from ``noise`` (a :class:`~labeldp.randomness.NoiseSource`,
fresh OS entropy by default), each epoch from generators of its own that are never saved, so a
resumed run draws its remaining steps afresh.

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
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel
from tqdm.auto import tqdm

from labeldp import distributed
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.errors import ConfigError
from labeldp.boundary import PrivateLabels, unseal
from labeldp.randomness import NoiseSource, public_seed
from labeldp.training.augment import augment
from labeldp.dpsgd.clipping import check_per_example_model, clipped_gradient_sum
from labeldp.dpsgd.noise import noise_generator, privatize_gradients
from labeldp.dpsgd.sampling import PoissonSampler, sampling_generator
from labeldp.config.train import TrainConfig
from labeldp.training.predict import accuracy
from labeldp.training.checkpoint import restore_checkpoint, save_checkpoint
from labeldp.training.stage import EpochRecord, lr_schedule, make_optimizer


def check_training_options(config: TrainConfig, dp: DPSGDConfig, augmentation: str | None = None) -> None:
    """Refuse training settings that DP-SGD cannot honour: mixup (it mixes examples), amp (bf16 norms
    under the clipping bound), augmentation multiplicity without augmentation (K identical views).
    ``augmentation`` is the dataset's policy, None while it is not known yet."""
    if config.mixup_alpha > 0:
        raise ConfigError("DP-SGD cannot use mixup: it mixes examples, which breaks per-example clipping; "
                         "use mixup_alpha=0")
    if config.amp:
        raise ConfigError("DP-SGD runs in float32: amp (bf16 autocast) would compute the per-example gradient norms "
                         "that the clipping bound rests on in bf16; use amp=False")
    if dp.augmult > 1 and (not config.augment or augmentation == "none"):
        reason = "augmentation is off" if not config.augment else "the dataset has no augmentation"
        raise ConfigError(f"augmult {dp.augmult} averages the gradients of augmented views of each example, but "
                         f"{reason}; use augmult 1")


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
    """(q, steps, steps per epoch) for ``config.epochs`` epochs at expected batch size ``config.batch_size``."""
    if config.batch_size > num_examples:
        raise ConfigError(f"batch_size ({config.batch_size}) exceeds the number of training examples ({num_examples})")
    q = config.batch_size / num_examples
    steps_per_epoch = max(1, round(1 / q))
    return q, config.epochs * steps_per_epoch, steps_per_epoch


def private_gradient(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, dp: DPSGDConfig,
                     noise_multiplier: float, expected_batch_size: float, noise_rng, parallel: bool = False) -> None:
    """Set ``model``'s gradients to one DP-SGD step's privatised gradient: (the sum of the clipped
    per-example gradients of ``inputs`` + N(0, (sigma C)^2)) / ``expected_batch_size``.

    With ``parallel`` (a collective call of every rank of the process group), ``inputs`` are this
    rank's share of the batch: rank 0 adds the noise to its share only (``noise_rng`` is used there
    alone), and the shares are summed across the ranks, so that the noise enters once."""
    clipped = clipped_gradient_sum(model, inputs, labels, dp.max_grad_norm, method=dp.clipping,
                                   physical_batch_size=dp.physical_batch_size, multiple_views=dp.augmult > 1)
    noisy = not parallel or distributed.is_main()
    privatize_gradients(model, clipped, noise_multiplier if noisy else 0.0, dp.max_grad_norm, expected_batch_size,
                        noise_rng if noisy else None)
    if parallel:
        params = [p for p in model.parameters() if p.requires_grad]
        flat = torch.cat([p.grad.reshape(-1) for p in params])
        flat = distributed.all_reduce_sum(flat)
        offset = 0
        for param in params:
            param.grad.copy_(flat[offset:offset + param.numel()].view_as(param.grad))
            offset += param.numel()


def train_dpsgd(
    model: nn.Module,
    inputs: np.ndarray,
    labels: PrivateLabels | np.ndarray,
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
    """
    config.validate()
    dp.validate()
    check_training_options(config, dp, augmentation)
    check_per_example_model(model)
    x = torch.as_tensor(np.asarray(inputs, dtype=np.float32))
    y = torch.from_numpy(unseal(labels).astype(np.int64))  # read inside the mechanism: clipped, noised steps
    if len(x) != len(y) or len(x) == 0:
        raise ConfigError(f"inputs and labels must be non-empty and of equal length, got {len(x)} and {len(y)}")
    q, steps, steps_per_epoch = sampling_plan(len(x), config)
    device = next(model.parameters()).device
    optimizer = make_optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(config, steps_per_epoch))
    noise = noise or NoiseSource()
    ema = AveragedModel(model, multi_avg_fn=_ema_with_warmup(dp.ema_decay), use_buffers=True) \
        if dp.ema_decay > 0 else None
    path = Path(checkpoint) if checkpoint is not None else None
    parallel = data_parallel and distributed.active()
    main, ranks, me = distributed.is_main(), distributed.world_size(), distributed.rank()
    state, history = restore_checkpoint(path, model, optimizer, scheduler, parallel=parallel)
    if state is not None and ema is not None:
        ema.load_state_dict(state["ema"])

    evaluated = ema.module if ema is not None else model
    model.train()
    for epoch in range(len(history) + 1, config.epochs + 1):
        start = time.perf_counter()
        noise_rng = next_batch = None
        if main:  # the secret batches and noise: rank 0 alone draws them
            sampler = PoissonSampler(len(x), q, steps_per_epoch, sampling_generator(noise, epoch))
            noise_rng = noise_generator(noise, "dpsgd-noise", epoch, device=device)
            next_batch = sampler.sample
        if parallel:  # the epoch's batches, sampled over the whole dataset on rank 0, for every rank
            next_batch = iter(distributed.on_main(lambda: [sampler.sample() for _ in range(steps_per_epoch)])).__next__
        for step in tqdm(range(steps_per_epoch), desc=f"dp-sgd epoch {epoch}/{config.epochs}", leave=False,
                         disable=None if progress else True, unit="step"):
            batch = next_batch()
            # Each example's views depend on (epoch, step, its index) only, not on the others in the batch.
            augment_rng = torch.Generator().manual_seed(public_seed(seed, "dpsgd-augment", epoch, step))
            if parallel:
                batch = batch[me::ranks]
            xb = x[batch]
            if dp.augmult > 1:
                xb = torch.stack([augment(xb, augmentation, augment_rng, batch, len(x)) for _ in range(dp.augmult)],
                                 dim=1)
            elif config.augment:
                xb = augment(xb, augmentation, augment_rng, batch, len(x))
            private_gradient(model, xb.to(device), y[batch].to(device), dp, noise_multiplier, q * len(x), noise_rng,
                             parallel)
            optimizer.step()
            scheduler.step()
            if ema is not None:
                ema.update_parameters(model)
        test_accuracy = (accuracy(evaluated, *test, config.eval_batch_size, sharded=parallel)
                         if test is not None else None)
        record = EpochRecord(epoch, None, test_accuracy, optimizer.param_groups[0]["lr"], time.perf_counter() - start)
        history.append(record)
        save_checkpoint(path, model, optimizer, scheduler, history, ema=ema.state_dict() if ema is not None else None)
        if on_epoch_end is not None and main:
            on_epoch_end(record)
    return evaluated, history
