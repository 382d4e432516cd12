"""scikit-learn estimators that learn from labels released under label differential privacy.

:class:`LabelDPClassifier` wraps any scikit-learn classifier (by default histogram gradient boosting).
``fit(X, y)`` with *true* labels releases them once (randomized response, or RR-with-prior in later
stages with ``stages`` > 1, the prior being the wrapped classifier's ``predict_proba`` on the other
stages' releases), records the spend in ``ledger_`` and, when given, charges a shared
:class:`LabelBudget`, which refuses a fit that would take the rows past their cap: cross-validation on
true labels pays per fit and cannot silently multiply epsilon by the number of folds.
``fit(X, released)`` with :class:`ReleasedLabels` (labels released once, e.g. by ``labeldp
privatize``) spends nothing: tuning on a release (``GridSearchCV``, cross-validation) is
post-processing.

What the estimator predicts is the *clean* label: the released labels' noise channel is public. With
randomized response the wrapped classifier learns the released labels and ``predict_proba`` inverts
the channel (exact in expectation); with per-example channels (RR-with-prior) each example enters the
fit once per class, weighted by the posterior of that class given what was released, the prior being
the model's own estimate (expectation-maximisation). ``predict_proba`` is an estimate of
Pr[clean label | x]. ``score`` on released labels is an unbiased estimate of the accuracy
on the clean labels (randomized response: agreement with a released label is an affine function of
it).

:class:`LabelDPRegressor` does the same for a numeric label on a declared, public range and grid: it
releases the values once by RR-on-bins (Ghazi et al. 2023) under a noisy histogram prior over the
grid (or a prior the user gives, or the Laplace mechanism on the clipped value, the baseline) and
fits any scikit-learn regressor on the released values.

:class:`~labeldp.marginals.LabelDPLogisticRegression` (importable from here too) releases no labels
at all: noisy label counts per bin of every public feature, from which it fits a logistic
regression; for rare positives and small budgets.

Privacy: epsilon-label-DP per fit on true labels for the rows it reads (replace-one-label
neighbours), as ``ledger_`` computes; inputs are public. Noise as in runs: fresh OS entropy by
default, ChaCha20 with ``secure_rng``, never ``random_state``, which controls only the public parts
(the split into stages, the wrapped estimator's own randomness).
"""

from __future__ import annotations

import math

import numpy as np
from dp_accounting import dp_event
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

import pandas as pd

from labeldp.accounting import PrivacyLedger, randomized_response_event
from labeldp.accounting.events import histogram_event, laplace_value_event
from labeldp.data.regression import DEFAULT_GRID_SIZE, label_grid, snap_to_grid
from labeldp.data.table import declared_classes, label_indices
from labeldp.errors import BudgetError, ConfigError
from labeldp.marginals import LabelDPLogisticRegression  # noqa: F401  (re-exported: the estimator from noisy marginals)
from labeldp.mechanisms import optimal_bins
from labeldp.priors import histogram_priors
from labeldp.privatize import LabelRelease
from labeldp.randomness import NoiseSource
from labeldp.release import (release_laplace_value, release_noisy_histogram, release_randomized_response,
                             release_rr_on_bins, release_rr_with_prior)


class LabelBudget:
    """A cap on what fits on the same rows may spend together.

    Every fit on true labels charges its event here before it draws; the fits compose sequentially
    (each may read every row), and a fit that would take the composition past ``epsilon`` (at
    ``delta``) is refused with a :class:`~labeldp.errors.BudgetError` before anything is released.
    A budget is shared, never copied: ``sklearn.base.clone`` (which ``GridSearchCV`` and
    ``cross_val_score`` apply to an estimator and its parameters) keeps the same object.
    """

    def __init__(self, epsilon: float, delta: float = 0.0):
        if not epsilon > 0:
            raise ConfigError(f"the budget's epsilon must be > 0, got {epsilon}")
        self.epsilon, self.delta = float(epsilon), float(delta)
        self.ledger = PrivacyLedger(1)  # one member: the rows every fit may read

    @property
    def spent(self) -> float:
        return self.ledger.epsilon(self.delta)

    def __deepcopy__(self, memo) -> LabelBudget:
        return self

    def charge(self, event, description: str) -> None:
        trial = PrivacyLedger(1)
        for entry in self.ledger.entries:
            trial.record(entry.event, entry.members, entry.description, entry.tag)
        trial.record(event, np.array([True]), description)
        after = trial.epsilon(self.delta)
        if after > self.epsilon + 1e-9:
            raise BudgetError(f"this fit would spend epsilon {after - self.spent:.3g} more on rows that have spent "
                              f"{self.spent:.3g} of their budget {self.epsilon:g}: refused before any release. "
                              "Release the labels once (labeldp.privatize) and fit on the release as often as you "
                              "like")
        self.ledger.record(event, np.array([True]), description)


class ReleasedLabels:
    """Labels released once, with their noise channel: ``labels`` (n,) class indices into ``classes``,
    ``likelihood`` (n, K) with Pr[release i | class k], and the ``ledger`` of the release. Indexable by
    rows like an array (scikit-learn's cross-validation splits it with the features), and an array of
    the released labels to whoever asks for one (stratification on released labels is public)."""

    def __init__(self, labels, likelihood, classes, ledger: PrivacyLedger | None = None):
        self.labels = np.asarray(labels, dtype=np.int64)
        self.likelihood = np.asarray(likelihood, dtype=np.float64)
        self.classes = np.asarray(classes, dtype=object)
        self.ledger = ledger
        if self.likelihood.shape != (len(self.labels), len(self.classes)):
            raise ConfigError(f"likelihood must have shape ({len(self.labels)}, {len(self.classes)}), "
                              f"got {self.likelihood.shape}")

    @property
    def shape(self) -> tuple[int]:
        return (len(self.labels),)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, rows) -> ReleasedLabels:
        return ReleasedLabels(self.labels[rows], self.likelihood[rows], self.classes, self.ledger)

    @classmethod
    def from_release(cls, release: LabelRelease, priors=None) -> ReleasedLabels:
        """The labels of a release made by :func:`labeldp.privatize.privatize` or ``labeldp privatize``
        (``priors``: the rows' priors, when each had its own)."""
        return cls(release.labels, release.channel(priors), [str(c) for c in release.classes], release.ledger)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return np.asarray(self.classes[self.labels], dtype=dtype)


class LabelDPClassifier(ClassifierMixin, BaseEstimator):
    """A scikit-learn classifier trained on labels released under label DP (see the module docstring).

    Parameters:
        estimator: any classifier with ``fit(X, y, sample_weight=...)`` and ``predict_proba``
            (default: ``HistGradientBoostingClassifier``, native categorical support for pandas
            category columns).
        epsilon: the label-DP budget of one fit on true labels.
        classes: the label domain, in order (public: required with true labels; a release carries its
            own).
        stages: 1 (randomized response on every label) or more (the paper's LP-MST: stage t releases
            its labels by RR-with-prior under the model trained on the earlier stages).
        em_iterations: rounds of posterior weighting after the first fit (default: none when every row
            shares one randomized response channel, which is inverted exactly; else 2).
        budget: a :class:`LabelBudget` shared by fits on the same rows, or None.
        secure_rng, insecure_noise_seed: the noise source (see :class:`labeldp.randomness.NoiseSource`;
            the seed makes the noise reproducible and the fit NOT private: tests only).
        random_state: the public randomness (stages, the wrapped estimator's seed).
    """

    def __init__(self, estimator=None, *, epsilon: float = 1.0, classes=None, stages: int = 1,
                 em_iterations: int | None = None, budget: LabelBudget | None = None, secure_rng: bool = False,
                 insecure_noise_seed: int | None = None, random_state: int | None = None):
        self.estimator = estimator
        self.epsilon = epsilon
        self.classes = classes
        self.stages = stages
        self.em_iterations = em_iterations
        self.budget = budget
        self.secure_rng = secure_rng
        self.insecure_noise_seed = insecure_noise_seed
        self.random_state = random_state

    # -- fitting ------------------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None) -> LabelDPClassifier:
        """Fit on true labels (released here, and charged) or on released labels (free)."""
        if isinstance(y, LabelRelease):
            y = ReleasedLabels.from_release(y)
        if isinstance(y, ReleasedLabels):
            self.classes_, self.ledger_ = y.classes, y.ledger
            self._fit_released(X, y.labels, y.likelihood, sample_weight)
            return self
        true = self._check(y)
        self.classes_ = np.asarray(self.classes, dtype=object)
        labels, likelihood = self._release(X, true, sample_weight)
        self._fit_released(X, labels, likelihood, sample_weight)
        return self

    def _check(self, y) -> np.ndarray:
        classes = declared_classes(self.classes)
        if not self.epsilon > 0:
            raise ConfigError(f"epsilon must be > 0, got {self.epsilon}")
        if int(self.stages) != self.stages or self.stages < 1:
            raise ConfigError(f"stages must be a positive integer, got {self.stages}")
        return label_indices(pd.Series(np.asarray(y, dtype=object)), classes, "labels")

    def _release(self, X, true: np.ndarray, sample_weight) -> tuple[np.ndarray, np.ndarray]:
        """Release the true labels (RR, then RR-with-prior per stage): the released labels and their
        (n, K) noise channel."""
        n, num_classes = len(true), len(self.classes)
        noise = NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)
        ledger = PrivacyLedger(n)  # both check their arguments: before the charge
        if self.budget is not None:  # every row is read once at epsilon: RR over K dominates RR-with-prior
            self.budget.charge(randomized_response_event(self.epsilon, num_classes),
                               f"{type(self).__name__}.fit, epsilon {self.epsilon:g}")
        parts = np.array_split(np.random.default_rng(self.random_state).permutation(n), self.stages)
        labels, likelihood = np.empty(n, dtype=np.int64), np.empty((n, num_classes))
        for stage, members in enumerate(parts, start=1):
            members, rng = np.sort(members), noise.generator("label-release", stage)
            if stage == 1:
                release = release_randomized_response(ledger, true[members], members, num_classes, self.epsilon, rng,
                                                      f"stage{stage}")
            else:
                done = np.sort(np.concatenate(parts[:stage - 1]))
                self._fit_released(_rows(X, done), labels[done], likelihood[done], _rows(sample_weight, done))
                release = release_rr_with_prior(ledger, true[members], members, self.predict_proba(_rows(X, members)),
                                                self.epsilon, rng, f"stage{stage}")
            labels[members], likelihood[members] = release.labels, release.likelihood
        self.ledger_ = ledger
        return labels, likelihood

    def _fit_released(self, X, labels: np.ndarray, likelihood: np.ndarray, sample_weight) -> None:
        """Learn Pr[clean label | x] from released labels. When every row shares one randomized
        response channel, the classifier learns the released labels and ``predict_proba`` inverts the
        channel, which is exact in expectation. Otherwise (RR-with-prior's per-example channels), or
        with ``em_iterations``, rounds of expectation-maximisation follow: each example enters once per
        class, weighted by the posterior of the class given its release, prior(class | x) x
        Pr[release | class], the prior being the model's last estimate."""
        self.estimator_ = _fit_weighted(self._base(), X, labels, sample_weight)
        self.channel_ = _shared_rr_channel(labels, likelihood)
        rounds = self.em_iterations if self.em_iterations is not None else (0 if self.channel_ else 2)
        n, num_classes = likelihood.shape
        stacked_X, stacked_y = _stack(X, num_classes), np.repeat(np.arange(num_classes), n)
        extra = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
        for _ in range(rounds):
            posterior = np.clip(self.predict_proba(X), 1e-6, 1.0) * likelihood
            weights = (posterior / posterior.sum(axis=1, keepdims=True) * extra[:, None]).T.ravel()
            keep = weights > 1e-12
            self.estimator_ = _fit_weighted(self._base(), _rows(stacked_X, keep), stacked_y[keep], weights[keep])
            self.channel_ = None  # the weighted fit learns the clean labels itself

    def _base(self):
        return _base_estimator(self.estimator, HistGradientBoostingClassifier, self.random_state)

    # -- predicting ---------------------------------------------------------------------------------
    def predict_proba(self, X) -> np.ndarray:
        """An estimate of Pr[clean label | x], one column per class of ``classes_``."""
        check_is_fitted(self, "estimator_")
        raw = self.estimator_.predict_proba(X)
        probabilities = np.zeros((raw.shape[0], len(self.classes_)))
        probabilities[:, self.estimator_.classes_.astype(int)] = raw
        if self.channel_ is not None:  # Pr[released k | x] = keep p_k + other (1 - p_k), solved for p_k
            keep, other = self.channel_
            probabilities = np.clip((probabilities - other) / (keep - other), 0.0, None)
            probabilities /= np.maximum(probabilities.sum(axis=1, keepdims=True), 1e-12)
        return probabilities

    def predict(self, X) -> np.ndarray:
        return self.classes_[self.predict_proba(X).argmax(axis=1)]

    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy on ``y``: true labels (a public test set), or released labels, on which it is an
        unbiased estimate of the accuracy on their clean labels (randomized response only)."""
        if not isinstance(y, ReleasedLabels):
            return super().score(X, y, sample_weight)
        return clean_accuracy_estimate(self.predict_proba(X).argmax(axis=1), y)


class LabelDPRegressor(RegressorMixin, BaseEstimator):
    """A scikit-learn regressor trained on numeric labels released under label DP.

    The label domain is public and declared: a range ``label_range = (low, high)`` and a grid in it
    (``grid`` evenly spaced points, or the grid's values), never read off the labels. ``fit(X, y)``
    clips each true value to the range and snaps it to the nearest grid point (a fixed function of
    that value alone), then releases it once:

    - ``mechanism="rr-on-bins"`` (default): RR-on-bins (Ghazi et al., "Regression with Label
      Differential Privacy", ICLR 2023) under one prior over the grid: a noisy histogram of the labels
      bought with ``prior_epsilon`` out of epsilon (``prior="histogram"``), a uniform prior, or a
      (G,) array the user gives (public: it must not be computed from these labels; it costs
      nothing). The optimal bins of that prior and the rest of epsilon cut the grid into d intervals,
      each released as its value by RR over the d values.
    - ``mechanism="laplace"``: the Laplace mechanism on the clipped value, exact on the lattice of an
      evenly spaced grid (the usual baseline; noise of scale (high - low) / epsilon).

    The wrapped regressor is fitted on the released values, or with ``debias`` (default) on targets
    that undo RR-on-bins' shrinkage. For any values g(1..d) of the bins, a release in bin r has
    E[g(r) | y] = (p - q) g(b(y)) + q sum(g), where b(y) is y's bin, p the probability of keeping it
    and q that of each other bin; so the target (g(r) - q sum(g)) / (p - q) has expectation g(b(y)).
    With g(b) = m(b), the prior's mean of the label inside bin b (not the bin's released value, which
    the optimal map shrinks towards the prior's mean), the regressor estimates E[m(b(y)) | x]: the
    best prediction of y that the bins allow. The targets are noisier (by 1 / (p - q)), so a learner
    that averages over many rows suits them. Predictions are clipped to the range. With
    ``debias=False`` the targets are the released values (the paper's training).

    Parameters:
        estimator: any regressor with ``fit(X, y, sample_weight=...)`` and ``predict`` (default:
            ``HistGradientBoostingRegressor``, native categorical support for pandas category columns).
        epsilon: the label-DP budget of one fit.
        label_range: ``(low, high)``, public; required unless ``grid`` gives the grid's values.
        grid: the number of evenly spaced grid points in ``label_range`` (default 50), or the grid's
            strictly increasing values.
        mechanism: ``"rr-on-bins"`` or ``"laplace"``.
        prior: ``"histogram"``, ``"uniform"`` or a (G,) array over the grid (RR-on-bins only).
        prior_epsilon: the histogram's share of epsilon (default epsilon / 10).
        debias: fit on targets that undo RR-on-bins' shrinkage (see above), else on the released values.
        budget: a :class:`LabelBudget` shared by fits on the same rows, or None.
        secure_rng, insecure_noise_seed: the noise source (the seed makes the noise reproducible and
            the fit NOT private: tests only).
        random_state: the wrapped estimator's seed (public).

    Attributes after ``fit``: ``grid_``, ``ledger_`` (epsilon per row), ``released_`` (the released
    values), ``prior_`` (the prior row, RR-on-bins), ``bin_values_`` (the d bin values), ``estimator_``.
    """

    def __init__(self, estimator=None, *, epsilon: float = 1.0, label_range=None, grid=DEFAULT_GRID_SIZE,
                 mechanism: str = "rr-on-bins", prior="histogram", prior_epsilon: float | None = None,
                 debias: bool = True, budget: LabelBudget | None = None, secure_rng: bool = False,
                 insecure_noise_seed: int | None = None, random_state: int | None = None):
        self.estimator = estimator
        self.epsilon = epsilon
        self.label_range = label_range
        self.grid = grid
        self.mechanism = mechanism
        self.prior = prior
        self.prior_epsilon = prior_epsilon
        self.debias = debias
        self.budget = budget
        self.secure_rng = secure_rng
        self.insecure_noise_seed = insecure_noise_seed
        self.random_state = random_state

    # -- the declared domain and the plan -------------------------------------------------------------
    def _grid(self) -> np.ndarray:
        if np.ndim(self.grid) == 0:
            if self.label_range is None or len(self.label_range) != 2:
                raise ConfigError("fitting on true values needs the label domain: label_range=(low, high) (public, "
                                  "declared, never read off the labels)")
            return label_grid(self.label_range[0], self.label_range[1], self.grid)
        values = np.asarray(self.grid, dtype=np.float64)
        if values.ndim != 1 or values.size < 2 or not np.all(np.isfinite(values)) or not np.all(np.diff(values) > 0):
            raise ConfigError("grid must be a number of points or at least 2 strictly increasing finite values")
        if self.label_range is not None and (values[0] != self.label_range[0] or values[-1] != self.label_range[1]):
            raise ConfigError(f"the grid runs from {values[0]:g} to {values[-1]:g}, not over label_range "
                              f"{tuple(self.label_range)}")
        return values

    def _plan(self, grid: np.ndarray) -> tuple[float, np.ndarray | None]:
        """The histogram's epsilon (0 without one) and the given prior row, checked before any spend."""
        if not self.epsilon > 0 or not np.isfinite(self.epsilon):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if self.mechanism == "laplace":
            from labeldp.mechanisms import grid_step
            grid_step(grid)
            return 0.0, None
        if self.mechanism != "rr-on-bins":
            raise ConfigError(f"mechanism must be 'rr-on-bins' or 'laplace', got {self.mechanism!r}")
        if isinstance(self.prior, str):
            if self.prior == "uniform":
                return 0.0, np.full(grid.size, 1.0 / grid.size)
            if self.prior != "histogram":
                raise ConfigError(f"prior must be 'histogram', 'uniform' or an array over the grid, got {self.prior!r}")
            share = self.epsilon / 10 if self.prior_epsilon is None else float(self.prior_epsilon)
            if not 0 < share < self.epsilon:
                raise ConfigError(f"prior_epsilon must lie in (0, epsilon = {self.epsilon:g}), got {share:g}")
            return share, None
        row = np.asarray(self.prior, dtype=np.float64)
        if row.shape != grid.shape or not np.all(np.isfinite(row)) or np.any(row < 0) or not row.sum() > 0:
            raise ConfigError(f"a given prior must be {grid.size} non-negative weights over the grid, not all zero")
        return 0.0, row / row.sum()

    def _event(self, grid: np.ndarray, share: float) -> dp_event.DpEvent:
        """What one fit may spend on every row (dominating the actual release)."""
        if self.mechanism == "laplace":
            return laplace_value_event(self.epsilon, grid.size - 1)
        rest = randomized_response_event(self.epsilon - share, 2)  # RR over 2 bins dominates any d >= 2
        return dp_event.ComposedDpEvent([histogram_event(share), rest]) if share > 0 else rest

    # -- fitting ------------------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None) -> LabelDPRegressor:
        """Release the true values ``y`` once (charged to ``budget``) and fit on the released values."""
        grid = self._grid()
        share, given = self._plan(grid)
        true = snap_to_grid(np.asarray(y, dtype=np.float64), grid, "labels")
        if len(true) != (len(X) if hasattr(X, "__len__") else np.shape(X)[0]):
            raise ConfigError(f"X has {len(X)} rows but y has {len(true)} values")
        noise = NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)
        ledger, members = PrivacyLedger(true.size), np.arange(true.size)  # both checked before the charge
        if self.budget is not None:
            self.budget.charge(self._event(grid, share), f"{type(self).__name__}.fit, epsilon {self.epsilon:g}")
        self.grid_, self.prior_, self.bin_values_ = grid, None, None
        if self.mechanism == "laplace":
            release = release_laplace_value(ledger, true, members, grid, self.epsilon,
                                            noise.generator("label-release", 1), "labels")
            targets = release.arrays["values"]
        else:
            prior = given
            if prior is None:
                histogram = release_noisy_histogram(ledger, true, members, np.zeros(true.size, dtype=np.int64), 1,
                                                    grid.size, share, noise.generator("histogram"), "prior")
                prior = histogram_priors(histogram.arrays["counts"], [true.size])[0]
            rest = self.epsilon - share
            release = release_rr_on_bins(ledger, true, members, grid, prior, rest,
                                         noise.generator("label-release", 1), "labels")
            maps = optimal_bins(prior, grid, rest)  # public: the prior's map, the one the release used
            d = int(maps.d[0])
            self.prior_, self.bin_values_ = prior, maps.values[0, :d].copy()
            targets = release.arrays["values"]
            if self.debias and d >= 2:
                means = _bin_means(prior, grid, maps.bin_of[0], d)
                keep_minus_other = -math.expm1(-rest) / (1.0 + (d - 1) * math.exp(-rest))  # p - q
                other = math.exp(-rest) / (1.0 + (d - 1) * math.exp(-rest))  # q
                targets = (means[release.labels] - other * means.sum()) / keep_minus_other
        self.ledger_, self.released_ = ledger, release.arrays["values"]
        self.estimator_ = _fit_weighted(self._base(), X, targets, sample_weight)
        return self

    def _base(self):
        return _base_estimator(self.estimator, HistGradientBoostingRegressor, self.random_state)

    def predict(self, X) -> np.ndarray:
        """The regressor's predictions, clipped to the declared range."""
        check_is_fitted(self, "estimator_")
        return np.clip(np.asarray(self.estimator_.predict(X), dtype=np.float64), self.grid_[0], self.grid_[-1])


def _bin_means(prior: np.ndarray, grid: np.ndarray, bin_of: np.ndarray, d: int) -> np.ndarray:
    """E[y | y in bin b] under ``prior`` for each of the d bins of a map (a bin the prior gives no mass:
    the mean of its grid points). Public: a function of the prior and the grid."""
    mass = np.bincount(bin_of, weights=prior, minlength=d)
    first = np.bincount(bin_of, weights=prior * grid, minlength=d)
    plain = np.bincount(bin_of, weights=grid, minlength=d) / np.bincount(bin_of, minlength=d)
    return np.where(mass > 0, first / np.where(mass > 0, mass, 1.0), plain)


def released_log_likelihood(estimator: LabelDPClassifier, X, released: ReleasedLabels) -> float:
    """Mean log-probability the model gives to the *released* labels through their channel,
    log sum_y p(y | x_i) Pr[release i | y]: a proper score of the released labels, so a scorer for
    tuning on a release (``GridSearchCV(..., scoring=released_log_likelihood)``) that rewards
    calibrated clean probabilities, where accuracy only looks at the arg-max."""
    if isinstance(released, LabelRelease):
        released = ReleasedLabels.from_release(released)
    probabilities = estimator.predict_proba(X)
    return float(np.mean(np.log(np.maximum((probabilities * released.likelihood).sum(axis=1), 1e-12))))


def clean_accuracy_terms(predictions, labels, likelihood) -> np.ndarray:
    """Per-example channel-corrected indicators t_i whose mean estimates the accuracy of
    ``predictions`` on the clean labels behind released ``labels`` with noise channel ``likelihood``
    (L[i, y] = Pr[release i | clean label y]; randomized response, RR-with-prior, or true labels).

    Each row of an RR-with-prior release is randomized response over the example's top-k set S_i
    (keep probability p_i, any other member of S_i with probability r_i; a clean label outside S_i
    releases a uniform member of S_i, probability 1/k_i), all read off the row. With
    t_i = (1[z_i = pred_i] - r_i) / (p_i - r_i) when pred_i lies in S_i and 0 otherwise,
    E[t_i] = 1[y_i = pred_i] whenever the clean label y_i lies in S_i: the estimate is unbiased for
    randomized response (S_i is every class) and for RR-with-prior whenever the clean labels lie in
    their top-k sets. A clean label outside S_i releases the same distribution whatever it is, so no
    estimate can tell it apart: such an example adds 1/k_i (pred_i in S_i) or 0 to the expectation
    instead of 1[y_i = pred_i], the same for every candidate that predicts inside S_i.
    """
    labels = np.asarray(labels, dtype=np.int64)
    likelihood = np.asarray(likelihood, dtype=np.float64)
    predictions = np.asarray(predictions, dtype=np.int64)
    n, num_classes = likelihood.shape
    if labels.shape != (n,) or predictions.shape != (n,):
        raise ConfigError(f"predictions and labels must have one entry per likelihood row ({n}), got "
                          f"{predictions.shape} and {labels.shape}")
    rows = np.arange(n)
    keep = likelihood[rows, labels]
    others = likelihood.copy()
    others[rows, labels] = np.inf
    other = others.min(axis=1)  # r_i: the lowest probability is another member of S_i
    in_set = np.isclose(likelihood, other[:, None], rtol=1e-9, atol=1e-12)
    in_set[rows, labels] = True
    k = in_set.sum(axis=1)
    outside = np.where(in_set, np.nan, likelihood)
    # every row: keep >= 1/k >= other, the outside entries all 1/k
    consistent = np.all(np.isnan(outside) | np.isclose(outside, 1.0 / k[:, None], rtol=1e-9, atol=1e-12), axis=1)
    if not consistent.all() or np.any(keep < other - 1e-12):
        raise ConfigError("the clean-accuracy estimate needs a randomized response or RR-with-prior channel "
                          f"(row {int(np.flatnonzero(~consistent | (keep < other - 1e-12))[0])} is neither)")
    hit = (predictions == labels).astype(np.float64)
    informative = keep - other > 1e-12
    terms = np.where(informative, (hit - other) / np.where(informative, keep - other, 1.0), hit)
    return np.where(in_set[rows, predictions], terms, 0.0)


def clean_accuracy_estimate(predictions: np.ndarray, released: ReleasedLabels) -> float:
    """Estimate of the accuracy of ``predictions`` on the clean labels behind a release, from its noise
    channel: with randomized response (keep probability p, K classes) the agreement a with the released
    labels has expectation p acc + (1 - p) / (K - 1) (1 - acc), so acc = (a - r) / (p - r),
    r = (1 - p) / (K - 1); per-example channels (RR-with-prior) are corrected row by row
    (:func:`clean_accuracy_terms`, which says when it is unbiased)."""
    return float(np.mean(clean_accuracy_terms(predictions, released.labels, released.likelihood)))


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


def _rows(X, rows):
    if X is None:
        return None
    return X.iloc[rows] if hasattr(X, "iloc") else np.asarray(X)[rows]


def _stack(X, copies: int):
    return pd.concat([X] * copies, ignore_index=True) if hasattr(X, "iloc") else np.concatenate([np.asarray(X)] * copies)
