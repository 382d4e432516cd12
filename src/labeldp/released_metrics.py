"""Test metrics estimated from *released* labels, through their noise channel: no private label is read.

Where the labels of the rows a model is scored on are private (a table's held-out rows, the folds of a
search), they are scored on their release instead. A release by randomized response or RR-with-prior
has, for each row, a public channel L[i, y] = Pr[row i's released label z_i | its label is y]: RR over
a set S_i of k_i classes (keep probability p_i, each other class of S_i r_i; a label outside S_i
releases a uniform member of S_i). The weights

    W[i, y] = (1[z_i = y] - r_i) / (p_i - r_i)   for y in S_i,   0 outside,

have expectation 1[y = y_i] whenever the row's label y_i lies in S_i (:func:`channel_weights`). So for
any per-row function of the label, g_i (the indicator of a correct prediction, a log-loss, a squared
error), the term sum_y W[i, y] g_i(y) is an unbiased estimate of g_i(y_i), and the mean of the terms
estimates the metric, with the standard error of a mean. Under RR every label lies in S_i = all
classes: the estimates are unbiased. Under RR-with-prior a label outside S_i releases the same thing
whatever it is, which no estimate can see past. A row released with k_i = 1 says nothing: it
contributes g_i at its released label.

The ROC AUC is a ratio of sums over pairs: with u_i = W[i, 1] (an unbiased estimate of 1[y_i = 1]),
sum_{i != j} u_i (1 - u_j) 1[s_i > s_j] over sum_{i != j} u_i (1 - u_j) estimates it (consistent, not
unbiased), with a jackknife standard error over groups of rows.

Everything here is post-processing of released labels and the model's predictions: it costs no
privacy. The estimates are noisy (their standard errors say how much) and are not clipped to the
metric's range: an estimate above 1 is an honest one.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from sklearn.pipeline import Pipeline

from labeldp.boundary import RELEASE_ONCE_ROUTE, PrivateLabels, ReleasedLabels
from labeldp.errors import ConfigError

#: groups of rows of the AUC's jackknife
JACKKNIFE_GROUPS = 20
_FLOOR = 1e-15


def channel_weights(labels, likelihood) -> np.ndarray:
    """(n, K) weights W[i, y] whose expectation is 1[y = row i's label] (see the module docstring),
    from released ``labels`` and their channel ``likelihood`` (randomized response or RR-with-prior).

    Post-processing of released labels: no private label is read, no privacy is spent.

    Parameters
    ----------
    labels : array_like of int
        (n,) the released labels, as class positions.
    likelihood : array_like
        (n, K) their noise channel L[i, y] = Pr[row i's released label | its label is y].

    Returns
    -------
    numpy.ndarray
        (n, K) float64 weights W, 0 outside each row's set S_i; a row with k_i = 1 gets the
        indicator of its released label.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``labels`` does not have one entry per row of ``likelihood``, or a row's channel is neither
        randomized response nor RR-with-prior.
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
    """The mean of per-row terms and its standard error.

    Parameters
    ----------
    terms : array_like
        (n,) per-row terms.

    Returns
    -------
    mean : float
        Their mean.
    error : float
        The standard error of the mean (sample standard deviation / sqrt(n)); infinite for one term.
    """
    terms = np.asarray(terms, dtype=np.float64)
    error = float(terms.std(ddof=1) / math.sqrt(terms.size)) if terms.size > 1 else math.inf
    return float(terms.mean()), error


def accuracy_terms(probabilities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per-row terms whose mean estimates the accuracy of the arg-max predictions: W[i, arg-max_y p_i(y)].

    Parameters
    ----------
    probabilities : numpy.ndarray
        (n, K) the predicted class probabilities.
    weights : numpy.ndarray
        (n, K) the weights of :func:`channel_weights`.

    Returns
    -------
    numpy.ndarray
        (n,) the terms.
    """
    return weights[np.arange(len(weights)), np.asarray(probabilities).argmax(axis=1)]


def log_loss_terms(probabilities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per-row terms whose mean estimates the log-loss: -sum_y W[i, y] log p_i(y), the probabilities
    floored at 1e-15.

    Parameters
    ----------
    probabilities : numpy.ndarray
        (n, K) the predicted class probabilities.
    weights : numpy.ndarray
        (n, K) the weights of :func:`channel_weights`.

    Returns
    -------
    numpy.ndarray
        (n,) the terms.
    """
    return -(weights * np.log(np.clip(probabilities, _FLOOR, 1.0))).sum(axis=1)


def brier_terms(probabilities: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Two classes: (p_i - 1[y_i = 1])^2 with p_i the predicted probability of the second class.

    Per-row terms whose mean estimates the Brier score.

    Parameters
    ----------
    probabilities : numpy.ndarray
        (n, 2) the predicted class probabilities.
    weights : numpy.ndarray
        (n, 2) the weights of :func:`channel_weights`.

    Returns
    -------
    numpy.ndarray
        (n,) the terms.
    """
    positive = np.asarray(probabilities)[:, 1]
    return weights[:, 0] * positive**2 + weights[:, 1] * (1.0 - positive) ** 2


def squared_error_terms(probabilities: np.ndarray, weights: np.ndarray, label_values: np.ndarray) -> np.ndarray:
    """A regression on a grid: (prediction - value of y_i)^2, the prediction being the expected value.

    Per-row terms whose mean estimates the mean squared error.

    Parameters
    ----------
    probabilities : numpy.ndarray
        (n, G) the predicted distributions over the grid.
    weights : numpy.ndarray
        (n, G) the weights of :func:`channel_weights` (labels are grid positions).
    label_values : numpy.ndarray
        (G,) float64, the public grid of label values.

    Returns
    -------
    numpy.ndarray
        (n,) the terms.
    """
    predictions = np.asarray(probabilities, dtype=np.float64) @ label_values
    return (weights * (predictions[:, None] - label_values[None, :]) ** 2).sum(axis=1)


def estimated_auc(scores: np.ndarray, weights: np.ndarray) -> float:
    """The ROC AUC of ``scores`` on the clean labels behind a two-class release (module docstring).

    Parameters
    ----------
    scores : numpy.ndarray
        (n,) the model's scores of the second class (ties count half).
    weights : numpy.ndarray
        (n, 2) the weights of :func:`channel_weights`.

    Returns
    -------
    float
        The estimated AUC (consistent, not unbiased; not clipped to [0, 1]).

    Raises
    ------
    labeldp.errors.ConfigError
        If the release gives no estimate of both classes among these rows (the estimate's denominator
        is not positive).
    """
    positive = weights[:, 1]
    negative = 1.0 - positive
    order = np.argsort(scores, kind="stable")
    s, u, v = np.asarray(scores)[order], positive[order], negative[order]
    # for each row, the positives' weight strictly above its score and at its score (ties count half)
    starts = np.searchsorted(s, s, side="left")
    ends = np.searchsorted(s, s, side="right")
    suffix = np.concatenate([np.cumsum(u[::-1])[::-1], [0.0]])
    above = suffix[ends]
    tied = suffix[starts] - suffix[ends] - u  # other rows at the same score
    numerator = float(np.sum(v * (above + 0.5 * tied)))
    denominator = float(u.sum() * v.sum() - np.sum(u * v))
    if denominator <= 0:
        raise ConfigError("the release gives no estimate of both classes among these rows: no AUC")
    return numerator / denominator


def _jackknife(statistic: Callable[[np.ndarray], float], n: int, groups: int = JACKKNIFE_GROUPS) -> float:
    """The grouped jackknife's standard error of ``statistic(rows)`` (rows in a fixed interleaved order)."""
    groups = min(groups, n)
    if groups < 2:
        return math.inf
    assignment = np.arange(n) % groups
    leave_out = np.array([statistic(np.flatnonzero(assignment != g)) for g in range(groups)])
    return float(math.sqrt((groups - 1) / groups * np.sum((leave_out - leave_out.mean()) ** 2)))


def estimated_classification_metrics(probabilities: np.ndarray, labels, likelihood) -> dict[str, float]:
    """``test_accuracy`` and ``test_log_loss`` (for two classes also ``test_auc`` and ``test_brier``),
    each estimated from released ``labels`` and their channel ``likelihood``, with ``..._se``, its
    standard error (the names of :func:`labeldp.evaluation.classification_metrics`).

    Post-processing of released labels: no private label is read, no privacy is spent.

    Parameters
    ----------
    probabilities : numpy.ndarray
        (n, K) the predicted class probabilities.
    labels : array_like of int
        (n,) the released labels, as class positions.
    likelihood : array_like
        (n, K) their noise channel.

    Returns
    -------
    dict
        Metric name -> estimate, and ``name_se`` -> its standard error (the AUC's by a grouped
        jackknife); ``test_auc`` and ``test_auc_se`` are None when the release gives no estimate of
        both classes.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``labels`` and ``likelihood`` disagree in length, or a row's channel is neither randomized
        response nor RR-with-prior.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    weights = channel_weights(labels, likelihood)
    metrics: dict[str, float] = {}
    for name, terms in (
        ("test_accuracy", accuracy_terms(probabilities, weights)),
        ("test_log_loss", log_loss_terms(probabilities, weights)),
    ):
        metrics[name], metrics[f"{name}_se"] = mean_and_error(terms)
    if probabilities.shape[1] == 2:
        metrics["test_brier"], metrics["test_brier_se"] = mean_and_error(brier_terms(probabilities, weights))
        scores = probabilities[:, 1]
        try:
            metrics["test_auc"] = estimated_auc(scores, weights)
            metrics["test_auc_se"] = _jackknife(lambda rows: estimated_auc(scores[rows], weights[rows]), len(scores))
        except ConfigError:
            metrics["test_auc"] = metrics["test_auc_se"] = None
    return metrics


def estimated_regression_metrics(
    probabilities: np.ndarray, labels, likelihood, label_values: np.ndarray
) -> dict[str, float]:
    """``test_mse`` and ``test_rmse`` (the square root of the MSE's estimate, clipped at 0) on the grid
    ``label_values``, estimated from released ``labels`` (grid positions) and their channel, with
    ``test_mse_se``.

    Post-processing of released labels: no private label is read, no privacy is spent.

    Parameters
    ----------
    probabilities : numpy.ndarray
        (n, G) the predicted distributions over the grid.
    labels : array_like of int
        (n,) the released labels, as grid positions.
    likelihood : array_like
        (n, G) their noise channel.
    label_values : numpy.ndarray
        (G,) the public grid of label values.

    Returns
    -------
    dict
        ``{"test_mse": float, "test_mse_se": float, "test_rmse": float}``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``labels`` and ``likelihood`` disagree in length, or a row's channel is neither randomized
        response nor RR-with-prior.
    """
    weights = channel_weights(labels, likelihood)
    mse, error = mean_and_error(squared_error_terms(probabilities, weights, np.asarray(label_values, np.float64)))
    return {"test_mse": mse, "test_mse_se": error, "test_rmse": math.sqrt(max(mse, 0.0))}


def released_labels_for(estimator: Any, y: Any) -> ReleasedLabels:
    """The released labels to score ``estimator`` on for the rows ``y``: ``y`` itself when it holds
    released labels; for private labels, the release the estimator's fit made of them (a search's
    folds share it). Private labels are never read.

    Parameters
    ----------
    estimator : estimator or sklearn.pipeline.Pipeline
        A fitted model; for private labels, one whose fit (the last step's, in a Pipeline) released them.
    y : ReleasedLabels or PrivateLabels
        Labels released once, or private labels the model's fit released.

    Returns
    -------
    ReleasedLabels
        The released labels of the rows of ``y``.

    Raises
    ------
    ConfigError
        For a plain array, or private labels of which the model's fit made no release.
    """
    if isinstance(y, ReleasedLabels):
        return y
    if isinstance(y, PrivateLabels):
        final = estimator.steps[-1][1] if isinstance(estimator, Pipeline) else estimator
        key = getattr(final, "release_key_", None)
        released = y.shared_release(key) if key is not None else None
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
    """Per-example channel-corrected indicators t_i whose mean estimates the accuracy of
    ``predictions`` on the clean labels behind released ``labels`` with noise channel ``likelihood``
    (L[i, y] = Pr[release i | clean label y]; randomized response, RR-with-prior, or true labels):
    t_i = W[i, pred_i] with the weights of :func:`channel_weights`.

    Each row of an RR-with-prior release is randomized response over the example's top-k set S_i
    (keep probability p_i, any other member of S_i with probability r_i; a clean label outside S_i
    releases a uniform member of S_i, probability 1/k_i), all read off the row. With
    t_i = (1[z_i = pred_i] - r_i) / (p_i - r_i) when pred_i lies in S_i and 0 otherwise,
    E[t_i] = 1[y_i = pred_i] whenever the clean label y_i lies in S_i: the estimate is unbiased for
    randomized response (S_i is every class) and for RR-with-prior whenever the clean labels lie in
    their top-k sets. A clean label outside S_i releases the same distribution whatever it is, so no
    estimate can tell it apart: such an example adds 1/k_i (pred_i in S_i) or 0 to the expectation
    instead of 1[y_i = pred_i], the same for every candidate that predicts inside S_i.

    Parameters
    ----------
    predictions : array-like
        (n,) the predicted classes, as positions in the label domain.
    labels : array-like
        (n,) the released labels, as positions in the label domain.
    likelihood : array-like
        (n, K) the noise channel L of the released labels.

    Returns
    -------
    numpy.ndarray
        (n,) the terms t_i.

    Raises
    ------
    ConfigError
        If the shapes disagree, or a row's channel is neither randomized response nor RR-with-prior.
    """
    predictions = np.asarray(predictions, dtype=np.int64)
    weights = channel_weights(labels, likelihood)
    if predictions.shape != (len(weights),):
        raise ConfigError(
            f"predictions must have one entry per likelihood row ({len(weights)}), got {predictions.shape}"
        )
    return weights[np.arange(len(weights)), predictions]


def clean_accuracy_estimate(predictions: np.ndarray, released: ReleasedLabels) -> float:
    """Estimate of the accuracy of ``predictions`` on the clean labels behind a release, from its noise
    channel: with randomized response (keep probability p, K classes) the agreement a with the released
    labels has expectation p acc + (1 - p) / (K - 1) (1 - acc), so acc = (a - r) / (p - r),
    r = (1 - p) / (K - 1); per-example channels (RR-with-prior) are corrected row by row
    (:func:`clean_accuracy_terms`, which says when it is unbiased).

    Parameters
    ----------
    predictions : numpy.ndarray
        (n,) the predicted classes, as positions in the release's classes.
    released : ReleasedLabels
        The release of the same n rows.

    Returns
    -------
    float
        The estimated accuracy (not clipped to [0, 1]).

    Raises
    ------
    ConfigError
        If the shapes disagree, or the release's channel is not known without the rows' priors.
    """
    return float(np.mean(clean_accuracy_terms(predictions, released.labels, released.channel())))


def released_log_likelihood(estimator: Any, X, released) -> float:
    """Mean log-probability the model gives to the *released* labels through their channel,
    log sum_y p(y | x_i) Pr[release i | y]: a proper score of the released labels, so a scorer for
    tuning on a release (``GridSearchCV(..., scoring=released_log_likelihood)``) that rewards
    calibrated clean probabilities, where accuracy only looks at the arg-max. ``released``: released
    labels, or private labels the model's fit released (their release is used).

    Parameters
    ----------
    estimator : estimator
        A fitted model with ``predict_proba`` (a probability per class of the release, in its order).
    X : array-like or pandas.DataFrame
        The public inputs of the rows.
    released : ReleasedLabels or PrivateLabels
        Their released labels, or private labels the model's fit released.

    Returns
    -------
    float
        The mean log-probability (probabilities floored at 1e-12).

    Raises
    ------
    ConfigError
        For a plain array, or private labels of which the model's fit made no release.
    """
    released = released_labels_for(estimator, released)
    probabilities = estimator.predict_proba(X)
    return float(np.mean(np.log(np.maximum((probabilities * released.channel()).sum(axis=1), 1e-12))))


#: what :func:`released_scorer` can estimate, and whether larger is better
SCORERS: dict[str, tuple[Callable[[np.ndarray, np.ndarray], float], bool]] = {
    "accuracy": (lambda p, w: float(np.mean(accuracy_terms(p, w))), True),
    "neg_log_loss": (lambda p, w: -float(np.mean(log_loss_terms(p, w))), True),
    "neg_brier_score": (lambda p, w: -float(np.mean(brier_terms(p, w))), True),
    "roc_auc": (lambda p, w: estimated_auc(p[:, 1], w), True),
}


def released_scorer(metric: str = "accuracy") -> Callable[..., float]:
    """A scikit-learn scorer (``scoring=`` of ``GridSearchCV``, ``cross_val_score``...) that scores a
    fitted model on the *released* labels of the rows it is given, through their channel (module
    docstring): ``accuracy``, ``neg_log_loss``, and for two classes ``roc_auc`` and
    ``neg_brier_score``, each an estimate of the metric on the clean labels.

    ``y`` may be labels released once (:class:`labeldp.boundary.ReleasedLabels`, or a release of
    :func:`labeldp.privatize`), or :class:`~labeldp.boundary.PrivateLabels` that the model's
    fit released (every fold of a search on them shares that release): their released labels are
    used, never the private ones.

    Parameters
    ----------
    metric : str, optional
        A key of :data:`SCORERS`: ``"accuracy"`` (default), ``"neg_log_loss"``, ``"neg_brier_score"`` or
        ``"roc_auc"``.

    Returns
    -------
    callable
        ``score(estimator, X, y, sample_weight=None) -> float``, named ``released_<metric>``. It raises
        :class:`~labeldp.errors.ConfigError` for a ``sample_weight``, for ``y`` neither released labels
        nor private labels the model's fit released, for ``roc_auc`` or ``neg_brier_score`` with other
        than two classes, and (``roc_auc``) when the release gives no estimate of both classes.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``metric`` is not one of :data:`SCORERS`.
    """
    if metric not in SCORERS:
        raise ConfigError(f"released_scorer estimates {', '.join(SCORERS)}, not {metric!r}")
    estimate, _ = SCORERS[metric]

    def score(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
        if sample_weight is not None:
            raise ConfigError("released_scorer does not weight rows")
        released = released_labels_for(estimator, y)
        probabilities = np.asarray(estimator.predict_proba(X), dtype=np.float64)
        weights = channel_weights(released.labels, released.channel())
        if metric in ("roc_auc", "neg_brier_score") and probabilities.shape[1] != 2:
            raise ConfigError(f"released_scorer({metric!r}) needs two classes, got {probabilities.shape[1]}")
        return estimate(probabilities, weights)

    score.__name__ = f"released_{metric}"
    return score


__all__ = [
    "SCORERS",
    "channel_weights",
    "clean_accuracy_estimate",
    "clean_accuracy_terms",
    "estimated_auc",
    "estimated_classification_metrics",
    "estimated_regression_metrics",
    "mean_and_error",
    "released_labels_for",
    "released_log_likelihood",
    "released_scorer",
]
