"""DP-SGD's own settings (``DPSGDConfig``): a configuration, no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from labeldp.errors import ConfigError
from labeldp.options import option

#: the per-example gradient paths of :func:`labeldp.dpsgd.clipping.clipped_gradient_sum`
CLIPPING_METHODS = ("auto", "fast", "vmap")


@dataclass(frozen=True)
class DPSGDConfig:
    """DP-SGD's own settings (epochs, expected batch size, optimiser and schedule are the run's
    :class:`~labeldp.config.train_config.TrainConfig`); each field's meaning is its option's help.

    A ``ema_decay`` of None, read from an older configuration, becomes 0 (no EMA)."""

    max_grad_norm: float = option(1.0, help="per-example clipping bound C")
    noise_multiplier: float | None = option(
        None,
        help="sigma (noise std / C); default: the smallest that meets "
        "--epsilon and --delta (a given one that spends more is refused)",
    )
    augmult: int = option(1, help="augmentations per example averaged before clipping")
    ema_decay: float = option(0.999, help="decay of the parameter EMA used for evaluation; 0 turns it off")
    physical_batch_size: int | None = option(
        512, help="examples per forward/backward pass; bounds memory, same result", free_of=("dp-sgd",)
    )
    clipping: str = option("auto", choices=CLIPPING_METHODS, help="per-example gradient path", free_of=("dp-sgd",))

    def __post_init__(self) -> None:
        if self.ema_decay is None:  # configurations written when "no EMA" was None
            object.__setattr__(self, "ema_decay", 0.0)

    def validate(self) -> None:
        """Refuse (:class:`~labeldp.errors.ConfigError`) settings DP-SGD cannot run with, before anything is trained."""
        if not self.max_grad_norm > 0 or not math.isfinite(self.max_grad_norm):
            raise ConfigError(f"max_grad_norm must be a finite number > 0, got {self.max_grad_norm}")
        if self.noise_multiplier is not None and not self.noise_multiplier > 0:
            raise ConfigError(f"noise_multiplier must be > 0, got {self.noise_multiplier}")
        if self.augmult < 1:
            raise ConfigError(f"augmult must be at least 1, got {self.augmult}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ConfigError(f"ema_decay must lie in [0, 1) (0: no EMA), got {self.ema_decay}")
        if self.physical_batch_size is not None and self.physical_batch_size < 1:
            raise ConfigError(f"physical_batch_size must be at least 1, got {self.physical_batch_size}")
        if self.clipping not in CLIPPING_METHODS:
            raise ConfigError(f"clipping must be one of {CLIPPING_METHODS}, got {self.clipping!r}")


__all__ = ["CLIPPING_METHODS", "DPSGDConfig"]
