"""Learning from noisy label marginals: a multinomial logistic regression over the indicators of public
bins, fitted from the label counts in every bin of every feature instead of from labels.

For such a model the log-likelihood of the training rows is

    sum_i logsumexp_k(z_ik) - sum_k (beta_k . S_k + b_k N_k),   z_ik = b_k + sum_j beta_k[bin_j(x_i)],

and the labels enter it only through S_k, the number of rows of class k in every bin of every feature
(the label marginals), and N_k, the class totals. A release of the marginals
(:func:`labeldp.boundary.release.release_label_marginals`) is therefore all the fit needs: the counts
are projected onto the bins' public sizes (:func:`project_marginals`) and the penalised likelihood is
maximised with them in place of the true ones (:func:`fit_from_marginals`). Both
:class:`~labeldp.estimators.LabelDPLogisticRegression` and ``labeldp train --method marginals`` fit so.

Privacy: everything here is post-processing of a release and of public bins (cut by :func:`quantile_edges`
from public inputs alone); it reads no label.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import logsumexp

from labeldp.mechanisms.marginals import flat_bins
from labeldp.priors import consistent_counts


def quantile_edges(values: np.ndarray, n_bins: int) -> np.ndarray:
    """The cut points of a numeric feature: its quantiles at 1/n_bins, ..., (n_bins-1)/n_bins over the
    finite values given (public inputs), repeated cuts merged. A value v falls in bin
    ``1 + searchsorted(edges, v, side="right")``; bin 0 is left for missing values.

    Parameters
    ----------
    values : numpy.ndarray
        (n,) the feature's values (missing ones as NaN, ignored).
    n_bins : int
        The most bins of the feature, besides bin 0.

    Returns
    -------
    numpy.ndarray
        The sorted, distinct cut points (at most ``n_bins - 1``; none without a finite value).
    """
    finite = np.asarray(values)
    finite = finite[np.isfinite(finite)]
    cuts = np.linspace(0.0, 1.0, int(n_bins) + 1)[1:-1]
    return np.unique(np.quantile(finite, cuts)) if finite.size else np.empty(0)


def bin_indicators(bins: np.ndarray, bins_per_feature: np.ndarray) -> sp.csr_matrix:
    """The rows' bin indicators: one column per bin of every feature.

    Parameters
    ----------
    bins : numpy.ndarray
        (n, features) bin indices, as :meth:`labeldp.estimators.PublicBins.transform` gives them.
    bins_per_feature : numpy.ndarray
        (features,) the number of bins of each feature.

    Returns
    -------
    scipy.sparse.csr_matrix
        (n, sum(bins_per_feature)) ones at each row's bins, feature 0's bins first.
    """
    rows, features = bins.shape
    columns = flat_bins(bins, bins_per_feature).ravel()
    return sp.csr_matrix(
        (np.ones(rows * features), (np.repeat(np.arange(rows), features), columns)),
        shape=(rows, int(bins_per_feature.sum())),
    )


def project_marginals(counts: np.ndarray, bins: np.ndarray, bins_per_feature: np.ndarray) -> np.ndarray:
    """Noisy marginals made consistent with the public bin sizes: each bin's counts become the
    non-negative counts closest to them that sum to the bin's size (post-processing).

    Parameters
    ----------
    counts : numpy.ndarray
        (bins, classes) the noisy marginals, feature 0's bins first.
    bins : numpy.ndarray
        (n, features) the rows' bin indices (public).
    bins_per_feature : numpy.ndarray
        (features,) the number of bins of each feature.

    Returns
    -------
    numpy.ndarray
        (bins, classes) the projected counts (:func:`labeldp.priors.consistent_counts`).
    """
    sizes = np.bincount(flat_bins(bins, bins_per_feature).ravel(), minlength=int(bins_per_feature.sum()))
    return consistent_counts(counts, sizes)


def fit_from_marginals(
    bins: np.ndarray, bins_per_feature: np.ndarray, counts: np.ndarray, l2: float
) -> tuple[np.ndarray, np.ndarray]:
    """The multinomial logistic model over bin indicators that maximises the rows' log-likelihood
    written with the marginals ``counts`` (bins x classes) in place of the labels, minus
    l2 / 2 |coef|^2. The class totals are each feature's counts summed, averaged over the features.
    Rows with the same bins are fitted once, weighted by their number.

    Parameters
    ----------
    bins : numpy.ndarray
        (n, features) the rows' bin indices (public).
    bins_per_feature : numpy.ndarray
        (features,) the number of bins of each feature.
    counts : numpy.ndarray
        (bins, classes) the label marginals, feature 0's bins first.
    l2 : float
        The ridge penalty on the coefficients (the intercepts are free).

    Returns
    -------
    coef : numpy.ndarray
        (bins, classes) the coefficients of the bins' indicators.
    intercept : numpy.ndarray
        (classes,) the intercepts.

    Warns
    -----
    RuntimeWarning
        If L-BFGS-B did not converge.
    """
    unique, weights = np.unique(bins, axis=0, return_counts=True)
    design = bin_indicators(unique, bins_per_feature)
    num_bins, num_classes = counts.shape
    feature_of_bin = np.repeat(np.arange(bins_per_feature.size), bins_per_feature)
    totals = np.stack([np.bincount(feature_of_bin, weights=counts[:, k]) for k in range(num_classes)], 1).mean(0)

    def objective(flat: np.ndarray) -> tuple[float, np.ndarray]:
        coef, intercept = flat[:-num_classes].reshape(num_bins, num_classes), flat[-num_classes:]
        logits = design @ coef + intercept
        normaliser = logsumexp(logits, axis=1)
        expected = np.exp(logits - normaliser[:, None]) * weights[:, None]
        value = weights @ normaliser - np.sum(coef * counts) - intercept @ totals + 0.5 * l2 * np.sum(coef**2)
        gradient = np.concatenate([(design.T @ expected - counts + l2 * coef).ravel(), expected.sum(0) - totals])
        return value, gradient

    start = np.zeros(num_bins * num_classes + num_classes)
    start[-num_classes:] = np.log(np.maximum(totals, 0.5) / weights.sum())
    result = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000})
    if not result.success:
        warnings.warn(f"the fit from the marginals did not converge: {result.message}", RuntimeWarning, stacklevel=3)
    return result.x[:-num_classes].reshape(num_bins, num_classes), result.x[-num_classes:]


__all__ = ["bin_indicators", "fit_from_marginals", "project_marginals", "quantile_edges"]
