"""DP-SGD's own settings (``DPSGDConfig``): a configuration, no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from labeldp.errors import ConfigError
from labeldp.options import option

#: the per-example gradient paths of :func:`labeldp.dpsgd.clipping.clipped_gradient_sum`
CLIPPING_METHODS = ("auto", "fast", "vmap")


@dataclass
class DPSGDConfig:
    """DP-SGD's own settings (epochs, expected batch size, optimiser and schedule are in TrainConfig).

    ``noise_multiplier`` None means: calibrate it to the run's (epsilon, delta). ``ema_decay`` 0
    means: no EMA.

    Attributes
    ----------
    max_grad_norm : float
        The per-example clipping bound C (default 1.0).
    noise_multiplier : float or None
        sigma, the Gaussian noise's standard deviation over C; None (default) for the smallest that meets
        the run's (epsilon, delta).
    augmult : int
        Augmentations per example averaged before clipping (default 1).
    ema_decay : float
        Decay of the parameter EMA used for evaluation, in [0, 1); 0 turns it off (default 0.999; a
        None read from an older configuration becomes 0).
    physical_batch_size : int or None
        Examples per forward/backward pass: bounds memory, same result (default 512).
    clipping : str
        The per-example gradient path, one of :data:`CLIPPING_METHODS` (default ``"auto"``).
    """

    max_grad_norm: float = option(1.0, help="per-example clipping bound C")
    noise_multiplier: float | None = option(
        None,
        help="sigma (noise std / C); default: the smallest that meets "
        "--epsilon and --delta (a given one that spends more is refused)",
    )
    augmult: int = option(1, help="augmentations per example averaged before clipping")
    ema_decay: float = option(0.999, help="decay of the parameter EMA used for evaluation; 0 turns it off")
    physical_batch_size: int | None = option(512, help="examples per forward/backward pass; bounds memory, same result")
    clipping: str = option("auto", choices=CLIPPING_METHODS, help="per-example gradient path")

    def __post_init__(self) -> None:
        if self.ema_decay is None:  # configurations written when "no EMA" was None
            self.ema_decay = 0.0

    def validate(self) -> None:
        """Refuse settings DP-SGD cannot run with (checked before anything is trained).

        Raises
        ------
        labeldp.errors.ConfigError
            If ``max_grad_norm`` is not a finite number > 0, ``noise_multiplier`` is given and not > 0,
            ``augmult`` or ``physical_batch_size`` is below 1, ``ema_decay`` is outside [0, 1), or
            ``clipping`` is not one of :data:`CLIPPING_METHODS`.
        """
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
