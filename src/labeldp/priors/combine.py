"""Working with priors and what was released: tempering, and the posterior weight of a release.

Both use public inputs only (priors computed from public features or from models trained on other
examples' released labels, and noise channels of released labels), so they cost no privacy.
"""

from __future__ import annotations

import numpy as np


def temper(priors: np.ndarray, temperature: float) -> np.ndarray:
    """Rows proportional to priors^(1 / temperature).

    Flatter above 1 (RR-with-prior then keeps more labels in its top k), sharper below.

    Parameters
    ----------
    priors : numpy.ndarray
        (n, K) rows of probabilities.
    temperature : float
        The temperature, > 0.

    Returns
    -------
    numpy.ndarray
        (n, K) rows of probabilities; ``priors`` itself when ``temperature`` is 1.
    """
    if temperature == 1.0:
        return priors
    tempered = np.power(priors, 1.0 / temperature)
    return tempered / tempered.sum(axis=1, keepdims=True)


def release_evidence(prior: np.ndarray | None, likelihood: np.ndarray, floor: float = 1e-4) -> np.ndarray:
    """Per-class weight of what was released about an example, normalised.

    prior(y) * Pr[noisy label | y] (proportional to the posterior of its true label), or the channel
    alone when ``prior`` is None.

    The prior is floored at ``floor`` so that a class it ruled out is unlikely, not impossible.

    Parameters
    ----------
    prior : numpy.ndarray or None
        (n, K) public priors, or None.
    likelihood : numpy.ndarray
        (n, K) noise channel L[i, y] = Pr[release of example i | its label is y].
    floor : float, optional
        The smallest prior weight of a class (default 1e-4).

    Returns
    -------
    numpy.ndarray
        (n, K) rows summing to 1.
    """
    weights = likelihood if prior is None else np.maximum(prior, floor) * likelihood
    return weights / weights.sum(axis=1, keepdims=True)
