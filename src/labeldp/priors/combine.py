"""Tempering priors, and the posterior weight of a release under one: public inputs only, no privacy cost."""

from __future__ import annotations

import numpy as np


def temper(priors: np.ndarray, temperature: float) -> np.ndarray:
    """Rows proportional to priors^(1 / temperature): flatter above 1, sharper below."""
    if temperature == 1.0:
        return priors
    tempered = np.power(priors, 1.0 / temperature)
    return tempered / tempered.sum(axis=1, keepdims=True)


def release_evidence(prior: np.ndarray | None, likelihood: np.ndarray, floor: float = 1e-4) -> np.ndarray:
    """prior(y) * Pr[noisy label | y] per class, normalised (the channel alone without a prior).

    ``likelihood[i, y]`` is Pr[release of example i | its label is y]. The prior is floored at ``floor`` so
    that a class it ruled out is unlikely, not impossible.
    """
    weights = likelihood if prior is None else np.maximum(prior, floor) * likelihood
    return weights / weights.sum(axis=1, keepdims=True)
