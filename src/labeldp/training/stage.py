"""One supervised training stage: plain (non-private) learning on already-released labels.

Everything here runs *after* the privacy boundary: it never sees true training labels, only the
noisy labels a mechanism released, so any model, optimiser or augmentation is allowed.
"""

from __future__ import annotations

import math
import os
import pickle
import time
import zipfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.files import write_atomic
from labeldp.options import option
from labeldp.training.augment import augment, mixup

OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("cosine", "constant")


@dataclass
class TrainConfig:
    """Hyper-parameters of one stage. ``epochs`` counts passes over the stage's training set."""

    epochs: int = option(10, help="epochs of each stage")
    batch_size: int = option(128, help="mini-batch size (dp-sgd: the expected Poisson batch size)")
    optimizer: str = option("sgd", choices=OPTIMIZERS, help="SGD with Nesterov momentum, or AdamW")
    lr: float = option(0.05, help="peak learning rate")
    momentum: float = option(0.9, help="SGD momentum")
    weight_decay: float = option(5e-4, help="weight decay")
    schedule: str = option("cosine", choices=SCHEDULES, help="learning-rate schedule")
    warmup_epochs: float = option(0.0, help="linear warm-up length in epochs")
    mixup_alpha: float = option(0.0, flag="--mixup", metavar="ALPHA", help="mixup Beta(alpha, alpha); 0 disables it")
    augment: bool = option(True, help="disable the dataset's data augmentation")
    amp: bool = option(False, help="bf16 automatic mixed precision on CUDA GPUs (label-DP methods; dp-sgd runs "
                                   "in float32)")
    eval_batch_size: int = option(1000, help="batch size of evaluation")

    def validate(self) -> None:
        """Refuse settings that cannot train (checked before any label is released)."""
        for name in ("epochs", "batch_size", "eval_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer of at least 1, got {value!r}")
        for name in ("lr", "momentum", "weight_decay", "warmup_epochs", "mixup_alpha"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if not self.lr > 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"momentum must lie in [0, 1), got {self.momentum}")
        if self.mixup_alpha < 0 or self.weight_decay < 0 or self.warmup_epochs < 0:
            raise ConfigError("mixup_alpha, weight_decay and warmup_epochs must be >= 0")
        if self.warmup_epochs > self.epochs:
            raise ConfigError(f"warmup_epochs ({self.warmup_epochs:g}) exceeds epochs ({self.epochs})")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")


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
    on; None for trainers whose loss would depend on private labels without noise (DP-SGD)."""

    epoch: int
    train_loss: float | None
    test_accuracy: float | None
    lr: float
    seconds: float


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


@torch.no_grad()
def predict_logits(model: nn.Module, inputs: np.ndarray | torch.Tensor, batch_size: int = 1000) -> torch.Tensor:
    """Logits of ``model`` on ``inputs`` (eval mode, in batches)."""
    was_training = model.training
    model.eval()
    x = torch.as_tensor(inputs)
    device = next(model.parameters()).device
    out = torch.cat([model(x[i:i + batch_size].to(device)).float().cpu() for i in range(0, len(x), batch_size)])
    model.train(was_training)
    return out


def predict_proba(model: nn.Module, inputs: np.ndarray | torch.Tensor, temperature: float = 1.0,
                  batch_size: int = 1000) -> np.ndarray:
    """softmax(logits / temperature) as a float64 numpy array whose rows sum to 1."""
    if not temperature > 0:
        raise ConfigError(f"temperature must be > 0, got {temperature}")
    probs = torch.softmax(predict_logits(model, inputs, batch_size).double() / temperature, dim=1).numpy()
    return probs / probs.sum(axis=1, keepdims=True)


def accuracy(model: nn.Module, inputs: np.ndarray | torch.Tensor, labels: np.ndarray, batch_size: int = 1000) -> float:
    """Fraction of ``labels`` equal to the model's arg-max prediction."""
    predictions = predict_logits(model, inputs, batch_size).argmax(dim=1).numpy()
    return float((predictions == np.asarray(labels)).mean())


def likelihood_loss(logits: torch.Tensor, log_likelihood: torch.Tensor) -> torch.Tensor:
    """Per-example -log sum_y softmax(logits)_y * L[y]: the negative log-likelihood of an observed
    (possibly noisy) label whose noise channel is L[y] = Pr[observed label | true class y].

    With one-hot L this is ordinary cross-entropy; with a mechanism's channel it is forward-corrected
    cross-entropy (Patrini et al. 2017), whose minimiser is the *clean* class posterior.
    """
    return -torch.logsumexp(F.log_softmax(logits, dim=1) + log_likelihood, dim=1)


def _log_likelihood_targets(targets: np.ndarray, num_classes: int) -> torch.Tensor:
    array = np.asarray(targets)
    if array.ndim == 1:
        if array.dtype.kind not in "iu" or array.min() < 0 or array.max() >= num_classes:
            raise ConfigError(f"integer targets must be class indices in [0, {num_classes})")
        likelihood = F.one_hot(torch.as_tensor(array, dtype=torch.int64), num_classes).float()
    elif array.ndim == 2 and array.shape[1] == num_classes:
        if not np.all(np.isfinite(array)) or array.min() < 0 or not np.all(array.max(axis=1) > 0):
            raise ConfigError("likelihood targets must be finite, non-negative, with a positive entry per row")
        likelihood = torch.as_tensor(array, dtype=torch.float32)
    else:
        raise ConfigError(f"targets must be labels of shape (n,) or likelihoods of shape (n, {num_classes}), got {array.shape}")
    return likelihood.log()


def save_atomic(state: dict, path: Path) -> None:
    write_atomic(path, lambda tmp: torch.save(state, tmp))


def load_torch(path: Path) -> Any:
    """A file saved by ``torch.save`` (a checkpoint, a model), or an error that names it."""
    try:
        return torch.load(path, weights_only=False)
    except (OSError, RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as error:
        raise RunDirectoryError(f"{path} is damaged ({error}); restore it from a copy of the run folder") from None


def restore_checkpoint(path: Path | None, model: nn.Module, optimizer: torch.optim.Optimizer,
                       scheduler: torch.optim.lr_scheduler.LRScheduler) -> tuple[dict | None, list[EpochRecord]]:
    """Load ``path`` (if it exists) into the model, optimiser and schedule; return the whole saved state
    (for the caller's own generators) and the epoch history, or (None, []) when there is none."""
    if path is None or not path.exists():
        return None, []
    state = load_torch(path)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state, [EpochRecord(**row) for row in state["history"]]


def _batch_loss(model: nn.Module, xb: torch.Tensor, log_lik: torch.Tensor, config: TrainConfig, augmentation: str,
                generator: torch.Generator, np_rng: np.random.Generator) -> torch.Tensor:
    """One batch's mean loss, after augmentation and mixup (both drawn from the stage's generators)."""
    device = log_lik.device
    if config.augment:
        xb = augment(xb, augmentation, generator)
    lam, perm = 1.0, None
    if config.mixup_alpha > 0:
        lam = float(np_rng.beta(config.mixup_alpha, config.mixup_alpha))
        xb, perm = mixup(xb, lam, generator)
    # bf16 autocast on GPUs when asked (no loss scaling needed); the loss itself in float32
    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=config.amp):
        logits = model(xb.to(device, non_blocking=True))
    loss = likelihood_loss(logits.float(), log_lik)
    if perm is not None:
        loss = lam * loss + (1 - lam) * likelihood_loss(logits.float(), log_lik[perm])
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
) -> list[EpochRecord]:
    """Train ``model`` in place on (``inputs``, ``targets``) for ``config.epochs`` epochs.

    ``targets`` are either integer labels (cross-entropy) or an (n, K) matrix of label likelihoods
    L[i, y] = Pr[observed label of i | class y], e.g. a mechanism's noise channel (forward-corrected
    cross-entropy, see :func:`likelihood_loss`).

    If ``checkpoint`` is given, the full training state (model, optimiser, schedule, random
    generators, history) is written there after every epoch, and an existing checkpoint is resumed
    from: a stage interrupted at any point continues where its last epoch ended, with the same
    random stream as an uninterrupted run. Returns the per-epoch history.
    """
    config.validate()
    x = torch.as_tensor(np.asarray(inputs, dtype=np.float32))
    log_likelihood = _log_likelihood_targets(targets, num_classes)
    if len(x) != len(log_likelihood) or len(x) == 0:
        raise ConfigError(f"inputs and targets must be non-empty and of equal length, got {len(x)} and {len(log_likelihood)}")
    device = next(model.parameters()).device
    check_amp(config, device)
    steps_per_epoch = math.ceil(len(x) / config.batch_size)
    optimizer = make_optimizer(model, config)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_schedule(config, steps_per_epoch))
    generator = torch.Generator().manual_seed(seed)
    np_rng = np.random.default_rng(seed)
    path = Path(checkpoint) if checkpoint is not None else None
    state, history = restore_checkpoint(path, model, optimizer, scheduler)
    if state is not None:
        generator.set_state(state["torch_rng"])
        np_rng.bit_generator.state = state["numpy_rng"]

    model.train()
    for epoch in range(len(history) + 1, config.epochs + 1):
        start = time.perf_counter()
        order = torch.randperm(len(x), generator=generator)
        total_loss = 0.0
        bar = tqdm(range(steps_per_epoch), desc=f"{description} epoch {epoch}/{config.epochs}",
                   leave=False, disable=None if progress else True, unit="batch")
        for step in bar:
            batch = order[step * config.batch_size:(step + 1) * config.batch_size]
            loss = _batch_loss(model, x[batch], log_likelihood[batch].to(device), config, augmentation, generator,
                               np_rng)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            scheduler.step()
            total_loss += loss.detach().double() * len(batch)  # summed on the device: no wait for a GPU per batch
            if step % 20 == 0:
                bar.set_postfix(loss=f"{loss.item():.3f}")
        test_accuracy = accuracy(model, *test, config.eval_batch_size) if test is not None else None
        record = EpochRecord(epoch, float(total_loss) / len(x), test_accuracy, optimizer.param_groups[0]["lr"],
                             time.perf_counter() - start)
        history.append(record)
        if path is not None:
            save_atomic({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "scheduler": scheduler.state_dict(), "torch_rng": generator.get_state(),
                          "numpy_rng": np_rng.bit_generator.state,
                          "history": [asdict(r) for r in history]}, path)
        if on_epoch_end is not None:
            on_epoch_end(record)
    return history
