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

It takes no privacy unit yet: its release counts rows of :class:`~labeldp.boundary.PrivateLabels`,
whose ledger and budget count rows. Per user, release the marginals at the boundary
(:func:`~labeldp.boundary.release.release_label_marginals` on a
``PrivacyLedger(n, units=...)``, noise calibrated to the most rows a unit has) or use
``labeldp train --method marginals --privacy-unit COLUMN``.

Privacy: epsilon-label-DP per fit (replace-one-label neighbours), as ``ledger_`` records; the bins
come from the public inputs alone, and everything after the release (projection, fit, predictions)
is post-processing. Noise as elsewhere: fresh OS entropy by default, ChaCha20 with ``secure_rng``,
reproducible only with ``insecure_noise_seed`` (tests).
"""

from __future__ import annotations

import os

import numpy as np
from scipy.special import softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils import Tags
from sklearn.utils.validation import check_is_fitted

from labeldp.accounting import PrivacyLedger, marginals_event
from labeldp.boundary import PrivateLabels, Release, ReleasedLabels, release_label_marginals
from labeldp.config.marginals_config import DEFAULT_L2
from labeldp.errors import ConfigError
from labeldp.estimators._common import check_rows, checked_inputs, estimator_classes, fit_labels, public_accuracy
from labeldp.estimators.public_bins import DEFAULT_BINS, PublicBins, bin_indicators
from labeldp.randomness import NoiseSource
from labeldp.released_metrics import channel_weights
from labeldp.runtime import on_free_cores
from labeldp.training.from_marginals import fit_from_marginals, project_marginals


class LabelDPLogisticRegression(ClassifierMixin, BaseEstimator):
    """Multinomial logistic regression over public feature bins, fitted from noisy label marginals
    (see the module docstring): ``fit(X, y)`` releases the marginals of the private labels ``y``
    (``PrivateLabels(y, classes=...)``) once and spends ``epsilon`` on every row.

    Parameters
    ----------
    epsilon : float
        The label-DP budget of one fit.
    classes : sequence, optional
        The label domain, in order (public: declared, never read off the labels).
    n_bins : int
        Quantile bins per numeric feature (:class:`~labeldp.estimators.public_bins.PublicBins`).
    l2_regularization : float
        The ridge penalty on the bins' coefficients (the intercepts are free).
    secure_rng : bool
        The noise source: ChaCha20 (see :class:`labeldp.randomness.NoiseSource`), else fresh OS entropy.
    insecure_noise_seed : int, optional
        Makes the noise reproducible and the fit NOT private: tests only.

    Attributes
    ----------
    classes_ : numpy.ndarray
        The label domain, in order, in the classes' own dtype (int64 for integers, an object array for text).
    n_features_in_ : int
        The number of input columns.
    feature_names_in_ : numpy.ndarray
        The input columns' names, when ``X`` was a table with text column names.
    bins_ : PublicBins
        The fitted bins of the features.
    counts_ : numpy.ndarray
        The released marginals after projection, one row per bin (bins x classes).
    coef_ : numpy.ndarray
        (bins, classes) the coefficients of the bins' indicators.
    intercept_ : numpy.ndarray
        (classes,) the intercepts.
    ledger_ : PrivacyLedger
        The release's, per row of the labels.
    """

    def __init__(
        self,
        *,
        epsilon: float = 1.0,
        classes=None,
        n_bins: int = DEFAULT_BINS,
        l2_regularization: float = DEFAULT_L2,
        secure_rng: bool = False,
        insecure_noise_seed: int | None = None,
    ):
        self.epsilon = epsilon
        self.classes = classes
        self.n_bins = n_bins
        self.l2_regularization = l2_regularization
        self.secure_rng = secure_rng
        self.insecure_noise_seed = insecure_noise_seed

    @on_free_cores
    def fit(self, X, y) -> LabelDPLogisticRegression:
        """Release the label marginals of the private labels ``y`` (``PrivateLabels(y, classes=...)``)
        over the bins of the rows ``X``, and fit on them. The release is this fit's own (its bins come
        from these rows): a second fit on the same rows needs the labels' budget.

        Parameters
        ----------
        X : pandas.DataFrame, array-like or sparse matrix
            The public inputs, one row per label (a sparse matrix is binned column by column, its
            implicit zeros counted as values).
        y : PrivateLabels
            The true labels, wrapped with their classes. A plain array or released labels (in any form)
            are refused.

        Returns
        -------
        LabelDPLogisticRegression
            This estimator, fitted.

        Raises
        ------
        ConfigError
            For released labels, a plain array or None, numeric labels or classes that are not whole numbers
            ("Unknown label type: continuous"), bad settings or features, or another number of rows than
            ``X`` (before any release).
        ValueError
            For inputs scikit-learn refuses (not 2-d, complex, no rows), before any release.
        PrivateLabelAccessError
            For another release of rows released already, without a :class:`~labeldp.boundary.LabelBudget`.
        BudgetError
            For a release that would pass the labels' :class:`~labeldp.boundary.LabelBudget`.
        """
        X = checked_inputs(self, X, reset=True)
        if isinstance(y, (ReleasedLabels, Release, str, os.PathLike)):
            raise ConfigError(
                f"{type(self).__name__} releases label marginals, not labels: fit it on the private "
                "labels (it spends epsilon), or fit LabelDPClassifier on released labels"
            )
        y = fit_labels(y, self, self.classes)  # private labels; a plain array or None is refused
        classes = estimator_classes(self, y)
        check_rows(X, y)
        if not self.epsilon > 0 or not np.isfinite(self.epsilon):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if not self.l2_regularization > 0:
            raise ConfigError(f"l2_regularization must be > 0, got {self.l2_regularization}")
        bins = PublicBins(self.n_bins).fit(X)
        codes = bins.transform(X)
        num_classes, sizes = len(classes), bins.bins_per_feature_
        noise = NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)
        epsilon = float(self.epsilon)

        def draw(labels: PrivateLabels, ledger: PrivacyLedger):
            release = release_label_marginals(
                ledger,
                labels,
                np.arange(len(labels)),
                codes,
                sizes,
                num_classes,
                epsilon,
                noise.generator("histogram"),
                "marginals",
            )
            return release, ledger

        release, self.ledger_ = y.release_new(marginals_event(epsilon, sizes.size, num_classes), draw)
        self.counts_ = project_marginals(release.arrays["counts"], codes, sizes)
        self.coef_, self.intercept_ = fit_from_marginals(codes, sizes, self.counts_, self.l2_regularization)
        self.classes_ = classes
        self.bins_ = bins
        return self

    def __sklearn_tags__(self) -> Tags:
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True  # a missing value has a bin of its own
        tags.input_tags.sparse = True  # binned column by column
        tags.input_tags.string = True  # text columns are binned by category
        tags.non_deterministic = self.insecure_noise_seed is None
        tags.classifier_tags.poor_score = True  # noisy counts: poorer than a logistic regression on the labels
        return tags

    def _logits(self, X) -> np.ndarray:
        """(n, classes) the model's logits."""
        check_is_fitted(self, "coef_")
        codes = self.bins_.transform(checked_inputs(self, X, reset=False))
        return bin_indicators(codes, self.bins_.bins_per_feature_) @ self.coef_ + self.intercept_

    @on_free_cores
    def decision_function(self, X) -> np.ndarray:
        """The model's logits; with two classes, as scikit-learn's binary classifiers give them, the
        second class's logit less the first's (positive where the second class is predicted).

        Parameters
        ----------
        X : pandas.DataFrame, array-like or sparse matrix
            Public inputs with the fitted feature columns.

        Returns
        -------
        numpy.ndarray
            (n, classes) logits, or (n,) with two classes.
        """
        logits = self._logits(X)
        return logits[:, 1] - logits[:, 0] if logits.shape[1] == 2 else logits

    @on_free_cores
    def predict_proba(self, X) -> np.ndarray:
        """Pr[label | x] under the fitted model, one column per class of ``classes_``.

        Parameters
        ----------
        X : pandas.DataFrame, array-like or sparse matrix
            Public inputs with the fitted feature columns.

        Returns
        -------
        numpy.ndarray
            (n, classes) probabilities.
        """
        return softmax(self._logits(X), axis=1)

    @on_free_cores
    def predict(self, X) -> np.ndarray:
        """The most probable label of each row.

        Parameters
        ----------
        X : pandas.DataFrame, array-like or sparse matrix
            Public inputs with the fitted feature columns.

        Returns
        -------
        numpy.ndarray
            (n,) class values of ``classes_``, in their dtype.
        """
        positions = self._logits(X).argmax(axis=1)  # NotFittedError before a fit
        return self.classes_[positions]

    @on_free_cores
    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy on a plain array (public test labels: exact, each label matched to the classes as
        text), or estimated on released labels (``ReleasedLabels``) through their channel. Private
        labels cannot be scored: the fit released counts, not labels.

        Parameters
        ----------
        X : pandas.DataFrame, array-like or sparse matrix
            Public inputs with the fitted feature columns.
        y : ReleasedLabels or array-like
            Labels released once, or public test labels.
        sample_weight : array-like, optional
            Row weights: public test labels only.

        Returns
        -------
        float
            The accuracy, or its estimate through the released labels' channel.

        Raises
        ------
        ConfigError
            For private labels.
        """
        if isinstance(y, PrivateLabels):
            raise ConfigError(
                f"{type(self).__name__} released label counts, not labels: there is no released label "
                "to score on. Score it on a public test set, or on labels released once "
                "(labeldp.privatize) of rows it was not fitted on"
            )
        predictions = self._logits(X).argmax(axis=1)
        if hasattr(y, "likelihood"):
            weights = channel_weights(y.labels, y.likelihood)
            return float(np.mean(weights[np.arange(len(weights)), predictions]))
        return public_accuracy(self.classes_, predictions, y, sample_weight)
