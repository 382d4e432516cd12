"""Test metrics estimated from *released* labels, through their noise channel: no private label is read.

Where the labels of the rows a model is scored on are private (a table's held-out rows, the folds of a
search), they are scored on their release instead. A release by randomized response or RR-with-prior
has, for each row, a public channel L[i, y] = Pr[row i's released label z_i | its label is y]: RR over
a set S_i of k_i classes (keep probability p_i, each other class of S_i r_i; a label outside S_i
releases a uniform member of S_i). The weights

    W[i, y] = (1[z_i = y] - r_i) / (p_i - r_i)   for y in S_i,   0 outside,

have expectation 1[y = y_i] whenever the row's label y_i lies in S_i (:func:`channel_weights`). So for
any per-row function of the label, g_i (the indicator of a correct prediction, a log-loss, a squared
error), sum_y W[i, y] g_i(y) is an unbiased estimate of g_i(y_i), and the mean of these terms estimates
the metric. Under RR every label lies in S_i: the estimates are unbiased. Under RR-with-prior a label
outside S_i releases the same thing whatever it is, which no estimate can see past. A row released with
k_i = 1 says nothing: it contributes g_i at its released label.

**Ranges and intervals.** An unbiased estimate can leave its metric's range (an accuracy above 1 when
the true one is near 1 and the noise large). Each estimate is reported as the nearest value within the
range (consistent, as the unbiased estimate is), with the standard error of the unbiased one and a 95 %
interval: the normal interval of a mean, or Fieller's for the AUC's ratio, intersected with the range.
The intervals are for the metric on the rows' distribution; `tests/test_released_metrics.py` checks that
they cover it at their rate, rare positives included. Where an interval holds the value a guess would
score, the release cannot tell the model from chance at its epsilon: only a public test set can.

Everything here is post-processing of released labels and the model's predictions: it costs no privacy.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from statistics import NormalDist
from typing import Any, NamedTuple

import numpy as np
from sklearn.pipeline import Pipeline

from labeldp.boundary import RELEASE_ONCE_ROUTE, PrivateLabels, ReleasedLabels
from labeldp.errors import ConfigError

#: the coverage of every interval
LEVEL = 0.95
_Z = NormalDist().inv_cdf(0.5 + LEVEL / 2)
_FLOOR = 1e-15


class Estimate(NamedTuple):
    """A metric estimated from released labels: ``value`` within the metric's range (None where the
    release gives none), ``error`` the standard error, ``low``/``high`` its :data:`LEVEL` interval."""

    value: float | None
    error: float
    low: float
    high: float


def channel_weights(labels, likelihood) -> np.ndarray:
    """(n, K) weights W[i, y] whose expectation is 1[y = row i's label] (module docstring), from released
    ``labels`` (class positions) and their channel ``likelihood`` (randomized response or RR-with-prior).

    Post-processing of released labels: no private label is read, no privacy is spent.
    """
    labels = np.asarray(labels, dtype=np.int64)
    likelihood = np.asarray(likelihood, dtype=np.float64)
    n, num_classes = likelihood.shape
    if labels.shape != (n,):
        raise ConfigError(f"released labels must have one entry per channel row ({n}), got shape {labels.shape}")
    rows = np.arange(n)
    keep = likelihood[rows, labels]
    others = likelihood.copy()
    others[rows, labels] = np.inf
    other = others.min(axis=1)  # r_i: the lowest probability is another member of S_i
    in_set = np.isclose(likelihood, other[:, None], rtol=1e-9, atol=1e-12)
    in_set[rows, labels] = True
    k = in_set.sum(axis=1)
    outside = np.where(in_set, np.nan, likelihood)
    consistent = np.all(np.isnan(outside) | np.isclose(outside, 1.0 / k[:, None], rtol=1e-9, atol=1e-12), axis=1)
    if not consistent.all() or np.any(keep < other - 1e-12):
        raise ConfigError(
            "estimates from released labels need a randomized response or RR-with-prior channel; some rows have another"
        )
    hit = np.zeros((n, num_classes))
    hit[rows, labels] = 1.0
    informative = keep - other > 1e-12
    scale = np.where(informative, keep - other, 1.0)[:, None]
    weights = np.where(informative[:, None], (hit - np.where(informative, other, 0.0)[:, None]) / scale, hit)
    return np.where(in_set, weights, 0.0)


def mean_and_error(terms: np.ndarray) -> tuple[float, float]:
    """The mean of per-row terms and its standard error (infinite for one term)."""
    terms = np.asarray(terms, dtype=np.float64)
    error = float(terms.std(ddof=1) / math.sqrt(terms.size)) if terms.size > 1 else math.inf
    return float(terms.mean()), error


def points(lead: float, error: float) -> str:
    """An accuracy's paired lead over another's as printed: percentage points within [-100, 100] (the
    estimate the choices use is unbiased and uncut), +- one standard error."""
    return f"{100 * min(max(lead, -1.0), 1.0):+.2f} +- {100 * error:.2f} points"


def estimate_mean(terms: np.ndarray, low: float, high: float) -> Estimate:
    """The mean of per-row unbiased terms of a metric whose range is [``low``, ``high``]: the nearest
    value within it, the standard error, and the normal interval intersected with the range."""
    mean, error = mean_and_error(terms)
    return Estimate(
        min(max(mean, low), high), error, max(low, min(mean - _Z * error, high)), min(high, max(mean + _Z * error, low))
    )


def accuracy_terms(probabilities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per-row terms of the arg-max predictions' accuracy: W[i, arg-max_y p_i(y)]."""
    return weights[np.arange(len(weights)), np.asarray(probabilities).argmax(axis=1)]


def log_loss_terms(probabilities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per-row terms of the log-loss: -sum_y W[i, y] log p_i(y), the probabilities floored at 1e-15."""
    return -(weights * np.log(np.clip(probabilities, _FLOOR, 1.0))).sum(axis=1)


def brier_terms(probabilities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Two classes: per-row terms of the Brier score, (p_i - 1[y_i = 1])^2 with p_i = ``probabilities[i, 1]``."""
    positive = np.asarray(probabilities)[:, 1]
    return weights[:, 0] * positive**2 + weights[:, 1] * (1.0 - positive) ** 2


def squared_error_terms(probabilities: np.ndarray, weights: np.ndarray, label_values: np.ndarray) -> np.ndarray:
    """A regression on the grid ``label_values``: per-row terms of (prediction - value of y_i)^2, the
    prediction being the expected value under each predicted distribution over the grid."""
    predictions = np.asarray(probabilities, dtype=np.float64) @ label_values
    return (weights * (predictions[:, None] - label_values[None, :]) ** 2).sum(axis=1)


def _ranked(scores: np.ndarray, positive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row, its share of the AUC's numerator and denominator sums over pairs (each pair counted
    from both ends, ties half): with u the positives' weights and v = 1 - u, a_i = u_i (v below s_i)
    + v_i (u above s_i), b_i = u_i (sum v - v_i) + v_i (sum u - u_i)."""
    order = np.argsort(scores, kind="stable")
    s, u = np.asarray(scores)[order], positive[order]
    v = 1.0 - u
    starts, ends = np.searchsorted(s, s, side="left"), np.searchsorted(s, s, side="right")
    cu, cv = np.concatenate([[0.0], np.cumsum(u)]), np.concatenate([[0.0], np.cumsum(v)])
    below = cv[starts] + 0.5 * (cv[ends] - cv[starts] - v)
    above = cu[-1] - cu[ends] + 0.5 * (cu[ends] - cu[starts] - u)
    return u * below + v * above, u * (cv[-1] - v) + v * (cu[-1] - u)


def estimated_auc(scores: np.ndarray, weights: np.ndarray) -> Estimate:
    """The ROC AUC of ``scores`` on the clean labels behind a two-class release: the ratio A / B of the
    weighted sums over pairs (module docstring), consistent, with Fieller's interval for a ratio.

    The variances of A and B are the U-statistics' (four times the per-row shares' covariance over n).
    Where the release cannot bound B away from 0 (too few positives, or negatives, for this epsilon),
    the set Fieller's inequality allows is unbounded and the interval is all of [0, 1]; the estimate is
    None when B itself is not positive.
    """
    a, b = _ranked(np.asarray(scores, dtype=np.float64), weights[:, 1])
    n = len(a)
    if n < 2:
        return Estimate(None, math.inf, 0.0, 1.0)
    big_a, big_b = float(a.mean()), float(b.mean())
    (vaa, vab), (_, vbb) = 4.0 * np.cov(np.stack([a, b])) / n
    ratio = big_a / big_b if big_b > 0 else None
    error = math.sqrt(max(vaa - 2 * ratio * vab + ratio**2 * vbb, 0.0)) / big_b if ratio is not None else math.inf
    # (A - t B)^2 <= z^2 Var(A - t B), a quadratic q2 t^2 + q1 t + q0 <= 0 in t
    z2 = _Z**2
    q2, q1, q0 = big_b**2 - z2 * vbb, -2.0 * (big_a * big_b - z2 * vab), big_a**2 - z2 * vaa
    disc = q1 * q1 - 4.0 * q2 * q0
    if ratio is None or q2 <= 0 or disc < 0:  # no estimate, or the release cannot bound B away from 0
        return Estimate(None if ratio is None else min(max(ratio, 0.0), 1.0), error, 0.0, 1.0)
    root = math.sqrt(disc)
    low, high = (-q1 - root) / (2 * q2), (-q1 + root) / (2 * q2)
    return Estimate(min(max(ratio, 0.0), 1.0), error, min(max(low, 0.0), 1.0), min(max(high, 0.0), 1.0))


def _fields(name: str, estimate: Estimate, low: float, high: float, beyond_chance: bool = True) -> dict[str, Any]:
    """A run summary's fields of one estimate of a metric whose range is [``low``, ``high``]: the value,
    ``_se`` and ``_interval``; the value is None where the release cannot measure the metric (its estimate
    sits on its range's edge, or the release cannot tell the model from chance), the interval kept."""
    measured = estimate.value is not None and low < estimate.value < high and beyond_chance
    return {
        name: estimate.value if measured else None,
        f"{name}_se": estimate.error,
        f"{name}_interval": [estimate.low, estimate.high],
    }


def estimated_classification_metrics(probabilities: np.ndarray, labels, likelihood) -> dict[str, Any]:
    """``test_accuracy`` and ``test_log_loss`` (two classes: also ``test_auc`` and ``test_brier``)
    estimated from released ``labels`` (class positions) and their channel ``likelihood``, each with
    ``_se`` and its 95 % ``_interval`` (None where the release cannot measure it: :func:`_fields`);
    ``test_beyond_chance`` says whether the release tells the model
    from chance (two classes: the AUC's interval lies above 1/2; more: the accuracy's gain over a
    guess with the model's shares of predictions lies above 0), ``test_chance`` what was compared.

    Post-processing of released labels: no private label is read, no privacy is spent.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    weights = channel_weights(labels, likelihood)
    predicted = probabilities.argmax(axis=1)
    metrics = _fields(
        "test_log_loss", estimate_mean(log_loss_terms(probabilities, weights), 0.0, math.inf), 0, math.inf
    )
    if probabilities.shape[1] == 2:
        metrics |= _fields("test_brier", estimate_mean(brier_terms(probabilities, weights), 0.0, 1.0), 0.0, 1.0)
        auc = estimated_auc(probabilities[:, 1], weights)
        beyond, chance = auc.low > 0.5, f"AUC interval [{auc.low:.3f}, {auc.high:.3f}] against 0.5"
        metrics |= _fields("test_auc", auc, 0.0, 1.0, beyond)
    else:
        shares = np.bincount(predicted, minlength=weights.shape[1]) / len(predicted)
        gain = estimate_mean(accuracy_terms(probabilities, weights) - weights @ shares, -1.0, 1.0)
        beyond = gain.low > 0
        chance = f"accuracy gain over a guess [{gain.low:.3f}, {gain.high:.3f}] against 0"
    accuracy = estimate_mean(accuracy_terms(probabilities, weights), 0.0, 1.0)
    return (
        _fields("test_accuracy", accuracy, 0.0, 1.0, beyond)
        | metrics
        | {"test_beyond_chance": bool(beyond), "test_chance": chance}
    )


def estimated_regression_metrics(
    probabilities: np.ndarray, labels, likelihood, label_values: np.ndarray
) -> dict[str, Any]:
    """``test_mse`` and ``test_rmse`` on the grid ``label_values``, estimated from released ``labels``
    (grid positions) and their channel, with ``_se`` and 95 % ``_interval``s; ``test_beyond_chance``
    says whether the MSE's gain over predicting the labels' mean lies above 0.

    Post-processing of released labels: no private label is read, no privacy is spent.
    """
    values = np.asarray(label_values, np.float64)
    weights = channel_weights(labels, likelihood)
    spread = float(values[-1] - values[0]) ** 2
    errors = squared_error_terms(probabilities, weights, values)
    mse = estimate_mean(errors, 0.0, spread)
    assert mse.value is not None  # a mean always has an estimate
    guess = weights @ (float(np.mean(weights @ values)) - values) ** 2  # the squared error of the labels' mean
    gain = estimate_mean(guess - errors, -spread, spread)
    root_error = mse.error / (2 * math.sqrt(mse.value)) if mse.value > 0 else math.inf
    rmse = Estimate(math.sqrt(mse.value), root_error, math.sqrt(mse.low), math.sqrt(mse.high))
    chance = f"MSE gain over the labels' mean [{gain.low:.4g}, {gain.high:.4g}] against 0"
    beyond = bool(gain.low > 0)
    return (
        _fields("test_mse", mse, 0.0, spread, beyond)
        | _fields("test_rmse", rmse, 0.0, math.sqrt(spread), beyond)
        | {"test_beyond_chance": beyond, "test_chance": chance}
    )


def estimated_r2(predictions: np.ndarray, weights: np.ndarray, values: np.ndarray) -> Estimate:
    """R^2 of ``predictions`` on the values behind a release, from its (n, m) ``weights`` over the m public
    ``values`` a label may take (:func:`channel_weights`): one minus the estimated squared error over the
    estimated variance of the labels, within (-inf, 1]; its interval is the squared error's, the variance
    taken as estimated. None where the release estimates no positive variance."""
    predictions, values = np.asarray(predictions, dtype=np.float64), np.asarray(values, dtype=np.float64)
    errors = estimate_mean((weights * (predictions[:, None] - values[None, :]) ** 2).sum(axis=1), 0.0, math.inf)
    variance = float(np.mean(weights @ values**2) - np.mean(weights @ values) ** 2)
    if variance <= 0 or errors.value is None:
        return Estimate(None, math.inf, -math.inf, 1.0)
    r2 = lambda error: 1.0 - error / variance  # noqa: E731
    return Estimate(r2(errors.value), errors.error / variance, r2(errors.high), r2(errors.low))


def released_labels_for(estimator: Any, y: Any) -> ReleasedLabels:
    """The released labels to score ``estimator`` on for the rows ``y``: ``y`` itself when it holds
    released labels; for private labels, the release the estimator's fit (the last step's, in a
    Pipeline) made of them, which a search's folds share. Private labels are never read."""
    if isinstance(y, ReleasedLabels):
        return y
    if isinstance(y, PrivateLabels):
        final = estimator.steps[-1][1] if isinstance(estimator, Pipeline) else estimator
        key = getattr(final, "release_key_", None)
        released = y.shared_release(key) if key is not None else None
        if released is not None and not isinstance(released, ReleasedLabels):
            raise ConfigError(
                "the model's fit released counts in cells for part of these labels, not a label per row: there is "
                "no release to score it on. Score it on a public test set, or on labels released once"
            )
        if released is None:
            raise ConfigError(
                "scoring on private labels reads the release the model's fit made of them; this model "
                "was not fitted on these labels (or its release gives no labels to score on). Score on "
                "a public test set, or on labels released once. " + RELEASE_ONCE_ROUTE
            )
        return released[y.positions]
    raise ConfigError(
        "released labels are needed here (ReleasedLabels, a release of labeldp.privatize, or private "
        "labels the model's fit released), not a plain array"
    )


def clean_accuracy_terms(predictions, labels, likelihood) -> np.ndarray:
    """Per-row terms of the accuracy of ``predictions`` (class positions) on the clean labels behind
    released ``labels``: W[i, prediction_i] (module docstring). Under RR-with-prior a clean label outside
    its set S_i adds 1/k_i (prediction in S_i) or 0 to the expectation, the same for every candidate
    that predicts inside S_i."""
    predictions = np.asarray(predictions, dtype=np.int64)
    weights = channel_weights(labels, likelihood)
    if predictions.shape != (len(weights),):
        raise ConfigError(
            f"predictions must have one entry per likelihood row ({len(weights)}), got {predictions.shape}"
        )
    return weights[np.arange(len(weights)), predictions]


def clean_accuracy_estimate(predictions: np.ndarray, released: ReleasedLabels) -> float:
    """The accuracy of ``predictions`` on the clean labels behind ``released``, within [0, 1]
    (:func:`estimate_mean` of :func:`clean_accuracy_terms`)."""
    accuracy = estimate_mean(clean_accuracy_terms(predictions, released.labels, released.channel()), 0.0, 1.0)
    assert accuracy.value is not None  # a mean always has an estimate
    return accuracy.value


def released_log_likelihood(estimator: Any, X, released) -> float:
    """Mean log-probability the model gives to the *released* labels through their channel,
    log sum_y p(y | x_i) Pr[release i | y] (probabilities floored at 1e-12): a proper score of the
    released labels, so a scorer for tuning that rewards calibrated clean probabilities.
    ``released``: released labels, or private labels the model's fit released."""
    released = released_labels_for(estimator, released)
    return float(np.mean(released_log_likelihood_terms(estimator.predict_proba(X), released.channel())))


def released_log_likelihood_terms(probabilities: np.ndarray, likelihood: np.ndarray) -> np.ndarray:
    """Per row, log sum_y p_i(y) Pr[release i | y] (probabilities floored at 1e-12), from the (n, K) channel
    ``likelihood`` of each row's release."""
    return np.log(np.maximum((np.asarray(probabilities) * likelihood).sum(axis=1), 1e-12))


#: what :func:`released_scorer` estimates, the metric's range, and the sign scikit-learn's "larger is
#: better" gives it
SCORERS: dict[str, tuple[Callable[[np.ndarray, np.ndarray], Estimate], int]] = {
    "accuracy": (lambda p, w: estimate_mean(accuracy_terms(p, w), 0.0, 1.0), 1),
    "neg_log_loss": (lambda p, w: estimate_mean(log_loss_terms(p, w), 0.0, math.inf), -1),
    "neg_brier_score": (lambda p, w: estimate_mean(brier_terms(p, w), 0.0, 1.0), -1),
    "roc_auc": (lambda p, w: estimated_auc(p[:, 1], w), 1),
}


def released_scorer(metric: str = "accuracy", standard_error: bool = False) -> Callable[..., Any]:
    """A scikit-learn scorer of a fitted model on the *released* labels of the rows it is given: an
    estimate of ``metric`` (a key of :data:`SCORERS`) on their clean labels, within its range.

    ``y`` may be labels released once (:class:`~labeldp.boundary.ReleasedLabels`, a release of
    :func:`labeldp.privatize`) or :class:`~labeldp.boundary.PrivateLabels` the model's fit released
    (every fold of a search shares that release). With ``standard_error=True`` the scorer returns
    ``{metric: estimate, metric + "_se": its standard error}``, for ``cross_validate`` and
    ``GridSearchCV(..., refit=metric)``, whose results then hold both.
    """
    if metric not in SCORERS:
        raise ConfigError(f"released_scorer estimates {', '.join(SCORERS)}, not {metric!r}")
    estimate, sign = SCORERS[metric]

    def score(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> Any:
        if sample_weight is not None:
            raise ConfigError("released_scorer does not weight rows")
        released = released_labels_for(estimator, y)
        probabilities = np.asarray(estimator.predict_proba(X), dtype=np.float64)
        if metric in ("roc_auc", "neg_brier_score") and probabilities.shape[1] != 2:
            raise ConfigError(f"released_scorer({metric!r}) needs two classes, got {probabilities.shape[1]}")
        found = estimate(probabilities, channel_weights(released.labels, released.channel()))
        if found.value is None:
            raise ConfigError(f"the release gives no estimate of both classes among these {len(probabilities)} rows")
        value = sign * found.value
        return {metric: value, f"{metric}_se": found.error} if standard_error else value

    score.__name__ = f"released_{metric}"
    return score


__all__ = [
    "LEVEL",
    "SCORERS",
    "Estimate",
    "channel_weights",
    "clean_accuracy_estimate",
    "clean_accuracy_terms",
    "estimate_mean",
    "estimated_auc",
    "estimated_classification_metrics",
    "estimated_r2",
    "estimated_regression_metrics",
    "mean_and_error",
    "points",
    "released_labels_for",
    "released_log_likelihood",
    "released_log_likelihood_terms",
    "released_scorer",
]
