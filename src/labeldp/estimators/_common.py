"""Private helpers of the estimators of :mod:`labeldp.estimators`: what a fit takes, the key of a shared
release's noise, whether released labels share one randomized response channel, the wrapped estimator and
its weighted fit, and rows of a table or an array."""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.pipeline import Pipeline

from labeldp.boundary import PrivateLabels, ReleasedLabels
from labeldp.errors import ConfigError


def _fit_labels(y, estimator: BaseEstimator) -> PrivateLabels | ReleasedLabels:
    """What a fit takes: private labels (released by the fit) or released ones; a plain array is refused."""
    if isinstance(y, (PrivateLabels, ReleasedLabels)):
        return y
    name = type(estimator).__name__
    raise ConfigError(
        f"{name}.fit takes private labels or released ones, not a plain array: labeldp treats plain arrays as "
        "public, and a fit on one could not know whether those labels were released before (a search would release "
        f"them once per fold). Wrap the true labels once: {name}(...).fit(X, labeldp.PrivateLabels(y, classes=[...]))"
        " (every fit and fold on them then shares one release); or fit on labels released once "
        "(labeldp.privatize(y, classes=..., epsilon=...))."
    )


def _noise_key(secure_rng: bool, insecure_noise_seed: int | None) -> Hashable:
    """What a shared release's noise depends on: fresh entropy is as good as any other fresh entropy."""
    return (
        ("insecure", int(insecure_noise_seed))
        if insecure_noise_seed is not None
        else ("secure" if secure_rng else "fresh")
    )


def _shared_rr_channel(labels: np.ndarray, likelihood: np.ndarray) -> tuple[float, float] | None:
    """(keep, other) when every row's channel is one randomized response's, else None."""
    rows = np.arange(len(labels))
    keep = likelihood[rows, labels]
    other = (likelihood.sum(axis=1) - keep) / max(likelihood.shape[1] - 1, 1)
    if len(labels) and np.allclose(keep, keep[0]) and np.allclose(other, other[0]) and keep[0] > other[0]:
        if np.allclose(likelihood, np.where(np.eye(likelihood.shape[1], dtype=bool)[labels], keep[0], other[0])):
            return float(keep[0]), float(other[0])
    return None


def _base_estimator(estimator, default, random_state):
    """A fresh clone of the user's ``estimator`` (else ``default`` with native categorical support),
    with ``random_state`` where it takes one."""
    base = clone(estimator) if estimator is not None else default(categorical_features="from_dtype")
    if "random_state" in base.get_params():
        base.set_params(random_state=random_state)
    return base


def _fit_weighted(model, X, y: np.ndarray, weights: np.ndarray | None):
    """``model.fit`` with sample weights (a Pipeline takes them for its last step); the fitted model."""
    if weights is None:
        return model.fit(X, y)
    if isinstance(model, Pipeline):
        return model.fit(X, y, **{f"{model.steps[-1][0]}__sample_weight": weights})
    return model.fit(X, y, sample_weight=weights)


def _take(X, rows):
    """The rows ``rows`` of a table or an array (None stays None)."""
    if X is None:
        return None
    return X.iloc[rows] if hasattr(X, "iloc") else np.asarray(X)[rows]


def _num_rows(X) -> int:
    """The number of rows of a table or an array."""
    return len(X) if hasattr(X, "__len__") else int(np.shape(X)[0])


def _stack(X, copies: int):
    """``copies`` copies of a table's or an array's rows, one after the other."""
    if hasattr(X, "iloc"):
        return pd.concat([X] * copies, ignore_index=True)
    return np.concatenate([np.asarray(X)] * copies)
