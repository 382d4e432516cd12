"""One supervised training stage: plain (non-private) learning on already-released labels.

Everything here runs *after* the privacy boundary: it never sees true training labels, only the
noisy labels a mechanism released, so any model, optimiser or augmentation is allowed.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from labeldp import distributed
from labeldp.errors import ConfigError
from labeldp.config.train import TrainConfig
from labeldp.training.augment import augment, mixup
from labeldp.training.checkpoint import restore_checkpoint, save_checkpoint
from labeldp.training.losses import (_held_out_loss, _training_targets, held_out_loss, likelihood_loss,
                                     posterior_loss)
from labeldp.training.predict import accuracy, rmse

def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto`` means the GPU when torch sees one, else the CPU; anything else is passed to torch."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    resolved = torch.device(device)
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device {device!r} requested but torch sees no CUDA GPU")
    return resolved


def check_amp(config: TrainConfig, device: torch.device) -> None:
    """Refuse ``amp`` off CUDA GPUs: it is bf16 autocast there, and elsewhere the run would silently
    train in float32."""
    if config.amp and device.type != "cuda":
        raise ConfigError(f"amp (bf16 autocast) is for CUDA GPUs; this run is on {device.type}: leave amp off")


@dataclass
class EpochRecord:
    """One epoch's figures. ``train_loss`` is the mean loss on the released labels the stage trained
    on; None for trainers whose loss would depend on private labels without noise (DP-SGD). A
    regression reports ``test_rmse`` (of the predicted expected values) instead of ``test_accuracy``.
    ``validation_loss`` is the loss on held-out released labels, when some are held out."""

    epoch: int
    train_loss: float | None
    test_accuracy: float | None
    lr: float
    seconds: float
    test_rmse: float | None = None
    validation_loss: float | None = None


def make_optimizer(model: nn.Module, config: TrainConfig) -> torch.optim.Optimizer:
    if config.optimizer == "adam":
        return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    return torch.optim.SGD(model.parameters(), lr=config.lr, momentum=config.momentum,
                           weight_decay=config.weight_decay, nesterov=config.momentum > 0)


def lr_schedule(config: TrainConfig, steps_per_epoch: int) -> Callable[[int], float]:
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


def _batch_loss(model: nn.Module, xb: torch.Tensor, targets: torch.Tensor, config: TrainConfig, augmentation: str,
                generator: torch.Generator, np_rng: np.random.Generator,
                loss_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = likelihood_loss) -> torch.Tensor:
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
    """
    config.validate()
    parallel = data_parallel and distributed.active()
    main = distributed.is_main()
    x = torch.as_tensor(np.asarray(inputs, dtype=np.float32))
    fitted, loss_of = _training_targets(targets, num_classes, label_values)
    if soft_labels:
        if loss_of is not likelihood_loss:
            raise ConfigError("soft_labels needs (n, K) likelihood targets")
        loss_of = posterior_loss
    if len(x) != len(fitted) or len(x) == 0:
        raise ConfigError(f"inputs and targets must be non-empty and of equal length, got {len(x)} and {len(fitted)}")
    if validation is not None:
        x_held = torch.as_tensor(np.asarray(validation[0], dtype=np.float32))
        held, held_loss_of = _training_targets(validation[1], num_classes, label_values)
        held_loss_of = _held_out_loss(held_loss_of)
        if len(x_held) != len(held) or len(x_held) == 0:
            raise ConfigError("validation inputs and targets must be non-empty and of equal length")
    device = next(model.parameters()).device
    check_amp(config, device)
    steps_per_epoch = math.ceil(len(x) / config.batch_size)
    optimizer = make_optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(config, steps_per_epoch))
    generator = torch.Generator().manual_seed(seed)
    np_rng = np.random.default_rng(seed)
    path = Path(checkpoint) if checkpoint is not None else None
    state, history = restore_checkpoint(path, model, optimizer, scheduler, parallel=parallel)
    best = None  # the best epoch on the validation examples so far: (loss, epoch, weights)
    if state is not None:
        generator.set_state(state["torch_rng"])
        np_rng.bit_generator.state = state["numpy_rng"]
        best = state.get("best")

    net: nn.Module = model
    if parallel:  # wrapped for the steps only: the caller's model object stays as it is
        net = nn.parallel.DistributedDataParallel(model, device_ids=[device] if device.type == "cuda" else None)
    ranks, me = distributed.world_size(), distributed.rank()
    model.train()
    for epoch in range(len(history) + 1, config.epochs + 1):
        start = time.perf_counter()
        order = torch.randperm(len(x), generator=generator)
        # in parallel the shared generator draws only the order (the same on every rank); each rank
        # augments its share from a stream of its own
        augment_rng = torch.Generator().manual_seed(distributed.seed_of_rank(seed, epoch)) if parallel else generator
        total_loss = torch.zeros((), dtype=torch.float64, device=device)
        bar = tqdm(range(steps_per_epoch), desc=f"{description} epoch {epoch}/{config.epochs}",
                   leave=False, disable=None if progress else True, unit="batch")
        for step in bar:
            batch = order[step * config.batch_size:(step + 1) * config.batch_size]
            weight = 1.0
            if parallel:
                size, batch = len(batch), batch[me::ranks]
                # the mean over the whole batch once DDP averages the ranks' gradients; a rank left
                # without examples (a last batch smaller than the ranks) steps with weight 0
                weight = ranks * len(batch) / size
                if len(batch) == 0:
                    batch = order[step * config.batch_size:][:1]
            loss = _batch_loss(net, x[batch], fitted[batch].to(device), config, augmentation, augment_rng,
                               np_rng, loss_of)
            optimizer.zero_grad(set_to_none=True)
            (loss * weight if parallel else loss).backward()
            optimizer.step()
            scheduler.step()
            # summed on the device: no wait for a GPU per batch
            total_loss += loss.detach().double() * (len(batch) if weight else 0)
            if step % 20 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}")
        if parallel:
            total_loss = distributed.all_reduce_sum(total_loss)
            for buffer in model.buffers():  # rank 0's BatchNorm statistics everywhere, as DDP does at each step
                torch.distributed.broadcast(buffer, 0)
        test_accuracy = test_rmse = None
        if test is not None and label_values is not None:
            test_rmse = rmse(model, *test, label_values, config.eval_batch_size, sharded=parallel)
        elif test is not None:
            test_accuracy = accuracy(model, *test, config.eval_batch_size, sharded=parallel)
        validation_loss = None
        if validation is not None:
            validation_loss = held_out_loss(model, x_held, held, held_loss_of, config.eval_batch_size,
                                            sharded=parallel)
            if best is None or validation_loss < best[0]:
                best = (validation_loss, epoch, {k: v.detach().cpu().clone() for k, v in model.state_dict().items()})
        record = EpochRecord(epoch, float(total_loss) / len(x), test_accuracy, optimizer.param_groups[0]["lr"],
                             time.perf_counter() - start, test_rmse, validation_loss)
        history.append(record)
        save_checkpoint(path, model, optimizer, scheduler, history, torch_rng=generator.get_state(),
                        numpy_rng=np_rng.bit_generator.state, best=best)
        if on_epoch_end is not None and main:
            on_epoch_end(record)
    if validation is not None and best is not None:
        model.load_state_dict(best[2])
    return history
