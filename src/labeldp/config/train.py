"""The training settings of one stage (``TrainConfig``): a configuration, no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from labeldp.errors import ConfigError
from labeldp.options import option

OPTIMIZERS = ("sgd", "adam")
SCHEDULES = ("cosine", "constant")


@dataclass
class TrainConfig:
    """Hyper-parameters of one stage. ``epochs`` counts passes over the stage's training set.

    Attributes
    ----------
    epochs : int
        Epochs of each stage (default 10).
    batch_size : int
        Mini-batch size; for DP-SGD the expected Poisson batch size (default 128).
    optimizer : str
        ``"sgd"`` (SGD with Nesterov momentum, the default) or ``"adam"`` (AdamW).
    lr : float
        Peak learning rate (default 0.05).
    momentum : float
        SGD momentum, in [0, 1) (default 0.9).
    weight_decay : float
        Weight decay (default 5e-4).
    schedule : str
        Learning-rate schedule, ``"cosine"`` (default) or ``"constant"``.
    warmup_epochs : float
        Linear warm-up length in epochs, at most ``epochs`` (default 0).
    mixup_alpha : float
        Mixup's Beta(alpha, alpha); 0 (default) disables it.
    validation : float
        Fraction in [0, 1) of each stage's training examples held out (chosen from the seed) to keep the
        epoch whose model best fits their released labels (early stopping on released labels only); 0
        (default): train on all, keep the last epoch.
    augment : bool
        Whether the dataset's data augmentation is used (default True).
    amp : bool
        bf16 automatic mixed precision on CUDA GPUs, for the label-DP methods (default False; DP-SGD runs
        in float32).
    eval_batch_size : int
        Batch size of evaluation (default 1000).
    """

    epochs: int = option(10, help="epochs of each stage")
    batch_size: int = option(128, help="mini-batch size (dp-sgd: the expected Poisson batch size)")
    optimizer: str = option("sgd", choices=OPTIMIZERS, help="SGD with Nesterov momentum, or AdamW")
    lr: float = option(0.05, help="peak learning rate")
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
    amp: bool = option(
        False, help="bf16 automatic mixed precision on CUDA GPUs (label-DP methods; dp-sgd runs in float32)"
    )
    eval_batch_size: int = option(1000, help="batch size of evaluation")

    def validate(self) -> None:
        """Refuse settings that cannot train (checked before any label is released).

        Raises
        ------
        labeldp.errors.ConfigError
            If ``epochs``, ``batch_size`` or ``eval_batch_size`` is not an integer of at least 1, a numeric
            setting is not a finite number, ``lr`` is not > 0, ``momentum`` or ``validation`` is outside
            [0, 1), ``mixup_alpha``, ``weight_decay`` or ``warmup_epochs`` is negative, ``warmup_epochs``
            exceeds ``epochs``, or ``optimizer`` or ``schedule`` is not one of its choices.
        """
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
        if self.warmup_epochs > self.epochs:
            raise ConfigError(f"warmup_epochs ({self.warmup_epochs:g}) exceeds epochs ({self.epochs})")
        if self.optimizer not in OPTIMIZERS:
            raise ConfigError(f"optimizer must be one of {OPTIMIZERS}, got {self.optimizer!r}")
        if self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")


__all__ = ["OPTIMIZERS", "SCHEDULES", "TrainConfig"]
