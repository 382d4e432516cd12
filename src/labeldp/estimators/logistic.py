"""Logistic regression learnt from noisy label marginals: label DP with aggregate noise, not per-label noise.

For a multinomial logistic model over the indicators of public bins (numeric features cut at their
quantiles, categorical ones by category), the log-likelihood of the training rows is

    sum_i logsumexp_k(z_ik) - sum_k (beta_k . S_k + b_k N_k),   z_ik = b_k + sum_j beta_k[bin_j(x_i)],

and the labels enter it only through S_k, the number of rows of class k in every bin of every feature
(the label marginals), and N_k, the class totals. :class:`LabelDPLogisticRegression` releases the
marginals once with discrete Laplace noise (:func:`labeldp.boundary.release.release_label_marginals`),
projects each feature's noisy counts onto its bins' public sizes
(:func:`labeldp.priors.consistent_counts`) and maximises the penalised likelihood with them in place
of the true ones. The noise is added to sums over many rows, not to each label: on a table with B
features it is about B / epsilon per bin count with two classes (2B / epsilon with more) whatever
the number of rows, where randomized response flips a share 1 / (1 + e^epsilon) of all binary
labels. That makes it the method for rare positives and small budgets (an ads table at epsilon 1
keeps its conversions), at the price of a model that is additive in the features' bins.

Privacy: epsilon-label-DP per fit (replace-one-label neighbours), as ``ledger_`` records; the bins
come from the public inputs alone, and everything after the release (projection, fit, predictions)
is post-processing. Noise as elsewhere: fresh OS entropy by default, ChaCha20 with ``secure_rng``,
reproducible only with ``insecure_noise_seed`` (tests).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import scipy.sparse as sp
from scipy.optimize import minimize
from scipy.special import logsumexp, softmax
from sklearn.base import BaseEstimator, ClassifierMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted

from labeldp.accounting import PrivacyLedger, marginals_event
from labeldp.errors import ConfigError
from labeldp.priors import consistent_counts
from labeldp.boundary import PrivateLabels, fit_classes
from labeldp.randomness import NoiseSource
from labeldp.released_metrics import channel_weights
from labeldp.mechanisms.marginals import flat_bins
from labeldp.boundary import release_label_marginals

#: quantile bins per numeric feature
DEFAULT_BINS = 16
#: the ridge penalty on the bins' coefficients, in units of the summed log-likelihood: the noise on a
#: bin's count does not shrink with the number of rows, so neither does the penalty that tames it
DEFAULT_L2 = 100.0


class PublicBins(TransformerMixin, BaseEstimator):
    """Bins of public features, one integer per feature: numeric and boolean columns cut at the
    quantiles of the fitted rows (``n_bins`` bins at most; integer codes count as numbers: give a
    pandas ``category`` column to bin them by value), every other column (categorical, text) by its
    categories, compared as text. Bin 0 of every feature holds missing values and categories not seen in ``fit``.
    Computed from the inputs alone, never from labels.

    Attributes after ``fit``: ``columns_``, ``edges_`` (numeric columns' cut points),
    ``categories_`` (the other columns' categories), ``bins_per_feature_``.
    """

    def __init__(self, n_bins: int = DEFAULT_BINS):
        self.n_bins = n_bins

    def fit(self, X, y=None) -> PublicBins:
        if int(self.n_bins) != self.n_bins or self.n_bins < 2:
            raise ConfigError(f"n_bins must be an integer >= 2, got {self.n_bins}")
        frame = _frame(X)
        if frame.shape[1] == 0:
            raise ConfigError("the table has no feature columns")
        self.columns_, self.edges_, self.categories_ = list(frame.columns), {}, {}
        sizes = []
        for column in self.columns_:
            values = frame[column]
            if _numeric(values):
                finite = values.to_numpy(np.float64)
                finite = finite[np.isfinite(finite)]
                cuts = np.linspace(0.0, 1.0, int(self.n_bins) + 1)[1:-1]
                self.edges_[column] = np.unique(np.quantile(finite, cuts)) if finite.size else np.empty(0)
                sizes.append(self.edges_[column].size + 2)
            else:
                known = values.cat.categories if isinstance(values.dtype, pd.CategoricalDtype) else values.dropna().unique()
                self.categories_[column] = pd.Index(sorted(set(map(str, known))))  # 1 and "1" are one category
                sizes.append(self.categories_[column].size + 1)
        self.bins_per_feature_ = np.array(sizes, dtype=np.int64)
        return self

    def transform(self, X) -> np.ndarray:
        """(n, features) bin indices."""
        check_is_fitted(self, "bins_per_feature_")
        frame = _frame(X)
        missing = [column for column in self.columns_ if column not in frame.columns]
        if missing:
            raise ConfigError(f"the table lacks the fitted feature columns {missing}")
        codes = np.empty((len(frame), len(self.columns_)), dtype=np.int64)
        for j, column in enumerate(self.columns_):
            values = frame[column]
            if column in self.edges_:
                numbers = pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
                codes[:, j] = np.where(np.isfinite(numbers),
                                       1 + np.searchsorted(self.edges_[column], numbers, side="right"), 0)
            else:
                position = self.categories_[column].get_indexer(values.astype(object).map(str, na_action="ignore"))
                codes[:, j] = np.where(values.isna().to_numpy(), 0, position + 1)
        return codes


class LabelDPLogisticRegression(ClassifierMixin, BaseEstimator):
    """Multinomial logistic regression over public feature bins, fitted from noisy label marginals
    (see the module docstring): ``fit(X, y)`` releases the marginals of the private labels ``y``
    (``PrivateLabels(y, classes=...)``) once and spends ``epsilon`` on every row.

    Parameters:
        epsilon: the label-DP budget of one fit.
        classes: the label domain, in order (public: declared, never read off the labels).
        n_bins: quantile bins per numeric feature (:class:`PublicBins`).
        l2_regularization: the ridge penalty on the bins' coefficients (the intercepts are free).
        secure_rng, insecure_noise_seed: the noise source (see :class:`labeldp.randomness.NoiseSource`;
            the seed makes the noise reproducible and the fit NOT private: tests only).

    Attributes after ``fit``: ``classes_``, ``bins_`` (the fitted :class:`PublicBins`), ``counts_``
    (the released marginals after projection, one row per bin), ``coef_`` (bins x classes),
    ``intercept_``, ``ledger_``.
    """

    def __init__(self, *, epsilon: float = 1.0, classes=None, n_bins: int = DEFAULT_BINS,
                 l2_regularization: float = DEFAULT_L2, secure_rng: bool = False,
                 insecure_noise_seed: int | None = None):
        self.epsilon = epsilon
        self.classes = classes
        self.n_bins = n_bins
        self.l2_regularization = l2_regularization
        self.secure_rng = secure_rng
        self.insecure_noise_seed = insecure_noise_seed

    def fit(self, X, y) -> LabelDPLogisticRegression:
        """Release the label marginals of the private labels ``y`` (``PrivateLabels(y, classes=...)``)
        over the bins of the rows ``X``, and fit on them. The release is this fit's own (its bins come
        from these rows): a second fit on the same rows needs the labels' budget."""
        if hasattr(y, "likelihood") or hasattr(y, "channel"):
            raise ConfigError(f"{type(self).__name__} releases label marginals, not labels: fit it on the private "
                              "labels (it spends epsilon), or fit LabelDPClassifier on released labels")
        if not isinstance(y, PrivateLabels):
            raise ConfigError(f"{type(self).__name__}.fit takes private labels: fit(X, labeldp.PrivateLabels(y, "
                              "classes=[...])). A plain array is public to labeldp, and a fit on one could not know "
                              "whether those labels were released before")
        classes = self._classes(y)
        if not self.epsilon > 0 or not np.isfinite(self.epsilon):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if not self.l2_regularization > 0:
            raise ConfigError(f"l2_regularization must be > 0, got {self.l2_regularization}")
        bins = PublicBins(self.n_bins).fit(X)
        codes = bins.transform(X)
        if len(codes) != len(y):
            raise ConfigError(f"X has {len(codes)} rows but y has {len(y)} labels")
        num_classes, sizes = len(classes), bins.bins_per_feature_
        noise = NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)
        epsilon = float(self.epsilon)

        def draw(labels: PrivateLabels, ledger: PrivacyLedger):
            release = release_label_marginals(ledger, labels, np.arange(len(labels)), codes, sizes, num_classes,
                                              epsilon, noise.generator("histogram"), "marginals")
            return release, ledger

        release, self.ledger_ = y.release_new(marginals_event(epsilon, sizes.size, num_classes), draw)
        self.counts_ = project_marginals(release.arrays["counts"], codes, sizes)
        self.coef_, self.intercept_ = fit_from_marginals(codes, sizes, self.counts_, self.l2_regularization)
        self.classes_ = np.asarray(classes, dtype=object)
        self.bins_ = bins
        return self

    def _classes(self, labels: PrivateLabels) -> tuple:
        """The declared classes, or the labels' own (which must agree)."""
        if labels.is_numeric:
            raise ConfigError(f"{type(self).__name__} needs labels over classes: PrivateLabels(y, classes=[...])")
        classes = fit_classes(self.classes, labels.classes)
        if labels.num_classes != len(classes):
            raise ConfigError(f"the labels have {labels.num_classes} classes, the estimator {len(classes)}")
        return classes

    def decision_function(self, X) -> np.ndarray:
        """(n, classes) logits."""
        check_is_fitted(self, "coef_")
        return bin_indicators(self.bins_.transform(X), self.bins_.bins_per_feature_) @ self.coef_ + self.intercept_

    def predict_proba(self, X) -> np.ndarray:
        """Pr[label | x] under the fitted model, one column per class of ``classes_``."""
        return softmax(self.decision_function(X), axis=1)

    def predict(self, X) -> np.ndarray:
        return self.classes_[self.decision_function(X).argmax(axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy on a plain array (public test labels: exact), or estimated on released labels
        (``ReleasedLabels``) through their channel. Private labels cannot be scored: the fit released
        counts, not labels."""
        if isinstance(y, PrivateLabels):
            raise ConfigError(f"{type(self).__name__} released label counts, not labels: there is no released label "
                              "to score on. Score it on a public test set, or on labels released once "
                              "(labeldp.privatize) of rows it was not fitted on")
        if hasattr(y, "likelihood"):
            predictions = self.decision_function(X).argmax(axis=1)
            weights = channel_weights(y.labels, y.likelihood)
            return float(np.mean(weights[np.arange(len(weights)), predictions]))
        return super().score(X, y, sample_weight)


def project_marginals(counts: np.ndarray, bins: np.ndarray, bins_per_feature: np.ndarray) -> np.ndarray:
    """Noisy marginals made consistent with the public bin sizes: each bin's counts become the
    non-negative counts closest to them that sum to the bin's size (post-processing)."""
    sizes = np.bincount(flat_bins(bins, bins_per_feature).ravel(), minlength=int(bins_per_feature.sum()))
    return consistent_counts(counts, sizes)


def fit_from_marginals(bins: np.ndarray, bins_per_feature: np.ndarray, counts: np.ndarray, l2: float
                       ) -> tuple[np.ndarray, np.ndarray]:
    """The multinomial logistic model over bin indicators that maximises the rows' log-likelihood
    written with the marginals ``counts`` (bins x classes) in place of the labels, minus
    l2 / 2 |coef|^2. The class totals are each feature's counts summed, averaged over the features.
    Rows with the same bins are fitted once, weighted by their number. Returns (coef, intercept)."""
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
        value = weights @ normaliser - np.sum(coef * counts) - intercept @ totals + 0.5 * l2 * np.sum(coef ** 2)
        gradient = np.concatenate([(design.T @ expected - counts + l2 * coef).ravel(), expected.sum(0) - totals])
        return value, gradient

    start = np.zeros(num_bins * num_classes + num_classes)
    start[-num_classes:] = np.log(np.maximum(totals, 0.5) / weights.sum())
    result = minimize(objective, start, jac=True, method="L-BFGS-B", options={"maxiter": 5000})
    if not result.success:
        warnings.warn(f"the fit from the marginals did not converge: {result.message}", RuntimeWarning, stacklevel=3)
    return result.x[:-num_classes].reshape(num_bins, num_classes), result.x[-num_classes:]


def bin_indicators(bins: np.ndarray, bins_per_feature: np.ndarray) -> sp.csr_matrix:
    """The rows' bin indicators: one column per bin of every feature."""
    rows, features = bins.shape
    columns = flat_bins(bins, bins_per_feature).ravel()
    return sp.csr_matrix((np.ones(rows * features), (np.repeat(np.arange(rows), features), columns)),
                         shape=(rows, int(bins_per_feature.sum())))


def _frame(X) -> pd.DataFrame:
    if isinstance(X, pd.DataFrame):
        return X
    array = np.asarray(X)
    if array.ndim != 2:
        raise ConfigError(f"X must be a table or a 2-d array, got shape {array.shape}")
    return pd.DataFrame(array)


def _numeric(values: pd.Series) -> bool:
    """Numbers and booleans are cut at quantiles (a boolean's two values land in two bins, whether
    given later as True/False or 1/0); every other column is categorical."""
    return pd.api.types.is_numeric_dtype(values)
