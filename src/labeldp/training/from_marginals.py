"""Learning from noisy label marginals: a multinomial logistic regression over public bins' indicators.

For such a model the rows' log-likelihood is

    sum_i logsumexp_k(z_ik) - sum_k (beta_k . S_k + b_k N_k),   z_ik = b_k + sum_j beta_k[bin_j(x_i)],

so the labels enter only through S_k, the rows of class k in every bin of every feature, and the class
totals N_k. A release of those marginals (:func:`labeldp.boundary.release.release_label_marginals`),
projected onto the bins' public sizes, is all the fit needs. Post-processing of a release and of
public bins: nothing here reads a label.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import logsumexp

from labeldp.mechanisms.label_marginals import flat_bins
from labeldp.priors import consistent_counts


def quantile_edges(values: np.ndarray, n_bins: int) -> np.ndarray:
    """The distinct cut points of a numeric feature at its quantiles 1/n_bins, ..., (n_bins-1)/n_bins.

    Over the finite values (NaN ignored). A value v falls in bin ``1 + searchsorted(edges, v, side="right")``;
    bin 0 is left for missing values.
    """
    finite = np.asarray(values)
    finite = finite[np.isfinite(finite)]
    cuts = np.linspace(0.0, 1.0, int(n_bins) + 1)[1:-1]
    return np.unique(np.quantile(finite, cuts)) if finite.size else np.empty(0)


def bin_indicators(bins: np.ndarray, bins_per_feature: np.ndarray) -> sp.csr_matrix:
    """The rows' (n, sum(bins_per_feature)) sparse bin indicators, feature 0's bins first."""
    rows, features = bins.shape
    columns = flat_bins(bins, bins_per_feature).ravel()
    return sp.csr_matrix(
        (np.ones(rows * features), (np.repeat(np.arange(rows), features), columns)),
        shape=(rows, int(bins_per_feature.sum())),
    )


def project_marginals(counts: np.ndarray, bins: np.ndarray, bins_per_feature: np.ndarray) -> np.ndarray:
    """Noisy marginals made consistent with the public bin sizes (:func:`labeldp.priors.consistent_counts`)."""
    sizes = np.bincount(flat_bins(bins, bins_per_feature).ravel(), minlength=int(bins_per_feature.sum()))
    return consistent_counts(counts, sizes)


def fit_from_marginals(
    bins: np.ndarray, bins_per_feature: np.ndarray, counts: np.ndarray, l2: float
) -> tuple[np.ndarray, np.ndarray]:
    """``(coef, intercept)`` maximising the likelihood written with the marginals ``counts``, minus l2 / 2 |coef|^2.

    The class totals are each feature's counts summed, averaged over the features; rows with the same
    bins are fitted once, weighted. Warns (RuntimeWarning) if L-BFGS-B did not converge.
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
