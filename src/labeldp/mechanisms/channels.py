"""Noise channels of labels randomized outside labeldp (e.g. Chrome's Attribution Reporting API), and
the guarantee a channel implies.

A channel is the (K, K) matrix M[y, z] = Pr[reported z | true y]. It gives one label pure epsilon-DP
with epsilon = max over z of ln(max_y M[y, z] / min_y M[y, z]).
"""

from __future__ import annotations

import json
import math

import numpy as np

from labeldp.errors import ConfigError
from labeldp.mechanisms.rr import randomized_response_probabilities


def check_channel(channel, num_classes: int) -> np.ndarray:
    """``channel`` as a (K, K) float64 matrix whose rows (true classes) are distributions."""
    matrix = np.asarray(channel, dtype=np.float64)
    if matrix.shape != (num_classes, num_classes):
        raise ConfigError(f"the channel must be a {num_classes} x {num_classes} matrix, got shape {matrix.shape}")
    if not np.all(np.isfinite(matrix)) or matrix.min() < 0:
        raise ConfigError("the channel's probabilities must be finite and non-negative")
    if not np.allclose(matrix.sum(axis=1), 1.0, atol=1e-9):
        raise ConfigError("each row of the channel (a true class) must sum to 1 over the reported classes")
    return matrix


def flip_channel(rate: float) -> np.ndarray:
    """The channel of a binary label flipped with probability ``rate`` in (0, 0.5)."""
    if not 0.0 < rate < 0.5:
        raise ConfigError(f"a flip rate lies in (0, 0.5), got {rate}")
    return np.array([[1.0 - rate, rate], [rate, 1.0 - rate]])


def rr_channel(epsilon: float, num_classes: int) -> np.ndarray:
    """The channel of K-ary randomized response at ``epsilon``."""
    return randomized_response_probabilities(num_classes, epsilon)


def channel_epsilon(channel: np.ndarray) -> float:
    """The pure epsilon a checked channel guarantees one label; ``math.inf`` where a report is possible
    under one class and impossible under another.
    """
    high, low = channel.max(axis=0), channel.min(axis=0)
    possible = high > 0
    if np.any(low[possible] == 0):
        return math.inf
    return float(np.max(np.log(high[possible] / low[possible])))


def is_randomized_response(channel: np.ndarray) -> bool:
    """Whether the channel is K-ary RR (one value on the diagonal, one off it)."""
    diagonal = np.diag(channel)
    off = channel[~np.eye(channel.shape[0], dtype=bool)]
    return bool(np.allclose(diagonal, diagonal[0], atol=1e-12) and np.allclose(off, off[0], atol=1e-12))


def parse_channel(spec: str, num_classes: int) -> np.ndarray:
    """A checked channel from ``flip:RATE`` (two classes), ``rr:EPSILON`` or a K x K JSON matrix."""
    kind, _, value = spec.partition(":")
    try:
        if kind == "flip":
            if num_classes != 2:
                raise ConfigError(f"a flip rate is a channel of two classes; these labels have {num_classes}")
            return flip_channel(float(value))
        if kind == "rr":
            return check_channel(rr_channel(float(value), num_classes), num_classes)
        return check_channel(json.loads(spec), num_classes)
    except (ValueError, TypeError) as error:
        raise ConfigError(
            f"a label source's channel is flip:RATE, rr:EPSILON or a {num_classes} x {num_classes} matrix as JSON; "
            f"got {spec!r} ({error})"
        ) from None


__all__ = ["channel_epsilon", "check_channel", "flip_channel", "is_randomized_response", "parse_channel", "rr_channel"]
