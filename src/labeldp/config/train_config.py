"""The training settings of one stage (``TrainConfig``): a configuration, no torch."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from labeldp.config.shared_options import EPOCHS, LR
from labeldp.errors import ConfigError
from labeldp.options import declared, option

OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("cosine", "constant")


@dataclass(frozen=True)
class TrainConfig:
    """The training of one stage; each field's meaning is its option's help (``labeldp train --help``).

    ``epochs`` counts passes over the stage's training set; ``augment`` True (the default) uses the dataset's
    augmentation (its flag is ``--no-augment``); ``mixup_alpha``'s flag is ``--mixup``."""

    epochs: int = declared(EPOCHS)
    batch_size: int = option(128, help="mini-batch size (dp-sgd: the expected Poisson batch size)")
    optimizer: str = option("sgd", choices=OPTIMIZERS, help="SGD with Nesterov momentum, or AdamW")
    lr: float = declared(LR)
    momentum: float = option(0.9, help="SGD momentum")
    weight_decay: float = option(5e-4, help="weight decay")
    schedule: str = option("cosine", choices=SCHEDULES, help="learning-rate schedule")
    warmup_epochs: float = option(0.0, help="linear warm-up length in epochs")
    mixup_alpha: float = option(0.0, flag="--mixup", metavar="ALPHA", help="mixup Beta(alpha, alpha); 0 disables it")
    validation: float = option(
        0.0,
        help="fraction of each stage's training examples held out (chosen from the seed) "
        "to keep the epoch whose model best fits their released labels (early "
        "stopping on released labels only); 0: train on all, keep the last epoch",
    )
    augment: bool = option(True, help="disable the dataset's data augmentation")
    flip: bool = option(
        False,
        help="also mirror the images left-right at random, for classes a mirror keeps (clothing, objects; not "
        "digits); an auto-tuned run tries it on images",
    )
    cutout: bool = option(
        False,
        help="also blank a random square of each image with probability 1/2 (cutout); an auto-tuned run tries it on "
        "images",
    )
    amp: bool = option(
        False, help="bf16 automatic mixed precision on CUDA GPUs (label-DP methods; dp-sgd runs in float32)"
    )
    eval_batch_size: int = option(1000, help="batch size of evaluation")

    def changed(self) -> list[str]:
        """The options set away from their defaults, evaluation's batch aside: what a fit with no training loop
        (marginals' counts, gradient-boosted trees) would leave unused."""
        defaults = TrainConfig()
        return [
            f.name
            for f in dataclasses.fields(self)
            if f.name != "eval_batch_size" and getattr(self, f.name) != getattr(defaults, f.name)
        ]

    def validate(self) -> None:
        """Refuse (:class:`~labeldp.errors.ConfigError`) settings that cannot train, before any label is released."""
        for name in ("epochs", "batch_size", "eval_batch_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be an integer of at least 1, got {value!r}")
        for name in ("lr", "momentum", "weight_decay", "warmup_epochs", "mixup_alpha", "validation"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if not self.lr > 0:
            raise ConfigError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ConfigError(f"momentum must lie in [0, 1), got {self.momentum}")
        if not 0 <= self.validation < 1:
            raise ConfigError(f"validation must lie in [0, 1), got {self.validation}")
        if self.mixup_alpha < 0 or self.weight_decay < 0 or self.warmup_epochs < 0:
            raise ConfigError("mixup_alpha, weight_decay and warmup_epochs must be >= 0")
        for name in ("flip", "cutout"):
            if getattr(self, name) and not self.augment:
                raise ConfigError(f"{name} adds to the dataset's augmentation: it cannot go with --no-augment")
        if self.warmup_epochs > self.epochs:
            raise ConfigError(f"warmup_epochs ({self.warmup_epochs:g}) exceeds epochs ({self.epochs})")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")


__all__ = ["OPTIMIZERS", "SCHEDULES", "TrainConfig"]
