"""scikit-learn estimators that learn from labels released under label differential privacy.

:class:`LabelDPClassifier` wraps any scikit-learn classifier (by default histogram gradient boosting).
It fits on one of two things, never on a plain array of true labels (a plain array is public to
labeldp: a fit on it could not tell whether those labels were released before):

- :class:`~labeldp.boundary.PrivateLabels`, the true labels wrapped once
  (``PrivateLabels(y, classes=[...])``). The fit releases them by randomized response through the
  release boundary, recording the spend in ``ledger_``. Every fit, fold and candidate on the same
  labels shares that one release (``labels[rows]``, as scikit-learn's cross-validation takes them, are
  views of the same labels): a grid search or cross-validation on them spends epsilon once, and each
  fold's model trains on the released labels of its rows. With ``stages`` > 1 (the paper's LP-MST:
  stage t releases its labels by RR-with-prior under the model trained on the earlier stages) the
  release depends on the model, so it is the fit's own: a second one on the same rows needs a
  :class:`~labeldp.boundary.LabelBudget`.
- labels released once (:class:`ReleasedLabels`, or a release of :func:`labeldp.privatize`): the
  fit spends nothing.

``score(X, y)`` and :func:`~labeldp.released_metrics.released_scorer` score on released labels
through their noise channel (an unbiased estimate of the accuracy on the clean labels); given
private labels, they use the release the fit made of them, and never the private labels. A plain
array given to ``score`` is taken as public test labels.

What the estimator predicts is the *clean* label: the released labels' noise channel is public. With
randomized response the wrapped classifier learns the released labels and ``predict_proba`` inverts
the channel (exact in expectation); with per-example channels (RR-with-prior) each example enters the
fit once per class, weighted by the posterior of that class given what was released, the prior being
the model's own estimate (expectation-maximisation). ``predict_proba`` is an estimate of
Pr[clean label | x].

:class:`LabelDPRegressor` does the same for a numeric label on a declared, public range and grid: it
releases the values once by RR-on-bins (Ghazi et al. 2023) under a noisy histogram prior over the
grid (or a prior the user gives, or the Laplace mechanism on the clipped value, the baseline) and
fits any scikit-learn regressor on the released values. Its release is shared like the classifier's.

:class:`~labeldp.estimators.logistic.LabelDPLogisticRegression` (importable from here too) releases no labels
at all: noisy label counts per bin of every public feature, from which it fits a logistic
regression; for rare positives and small budgets.

Privacy: epsilon-label-DP for the rows of the private labels (replace-one-label neighbours), as
``ledger_`` computes; inputs are public. Noise as in runs: fresh OS entropy by default, ChaCha20 with
``secure_rng``, never ``random_state``, which controls only the public parts (the split into stages,
the wrapped estimator's own randomness).
"""

from __future__ import annotations

import math
from typing import Any, Hashable

import numpy as np
from dp_accounting import dp_event
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.pipeline import Pipeline
from sklearn.utils.validation import check_is_fitted

import pandas as pd

from labeldp.accounting import PrivacyLedger, randomized_response_event
from labeldp.accounting.events import histogram_event, laplace_value_event
from labeldp.data.regression import DEFAULT_GRID_SIZE, label_grid
from labeldp.errors import ConfigError
from labeldp.mechanisms import optimal_bins
from labeldp.priors import histogram_priors
from labeldp.boundary import RELEASE_ONCE_ROUTE, PrivateLabels, ReleasedLabels, fit_classes
from labeldp.randomness import NoiseSource
from labeldp.boundary import (release_laplace_value, release_noisy_histogram, release_randomized_response,
                             release_rr_on_bins, release_rr_with_prior)
from labeldp.released_metrics import clean_accuracy_estimate, released_labels_for


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
        "(labeldp.privatize(y, classes=..., epsilon=...)).")


def _noise_key(secure_rng: bool, insecure_noise_seed: int | None) -> Hashable:
    """What a shared release's noise depends on: fresh entropy is as good as any other fresh entropy."""
    return ("insecure", int(insecure_noise_seed)) if insecure_noise_seed is not None else ("secure" if secure_rng
                                                                                            else "fresh")


class LabelDPClassifier(ClassifierMixin, BaseEstimator):
    """A scikit-learn classifier trained on labels released under label DP (see the module docstring).

    Parameters:
        estimator: any classifier with ``fit(X, y, sample_weight=...)`` and ``predict_proba``
            (default: ``HistGradientBoostingClassifier``, native categorical support for pandas
            category columns).
        epsilon: the label-DP budget of the release of private labels.
        classes: the label domain, in order (public; optional: private labels and releases carry their
            own, which must then be these).
        stages: 1 (randomized response on every label, shared by every fit on the same labels) or
            more (the paper's LP-MST: stage t releases its labels by RR-with-prior under the model
            trained on the earlier stages; the fit's own release, on every row of the labels).
        em_iterations: rounds of posterior weighting after the first fit (default: none when every row
            shares one randomized response channel, which is inverted exactly; else 2).
        secure_rng, insecure_noise_seed: the noise source (see :class:`labeldp.randomness.NoiseSource`;
            the seed makes the noise reproducible and the fit NOT private: tests only).
        random_state: the public randomness (stages, the wrapped estimator's seed).

    Attributes after ``fit``: ``classes_``, ``ledger_`` (the release's, per row of the labels),
    ``release_key_`` (which release of the private labels it trained on; None on released labels),
    ``estimator_``.
    """

    def __init__(self, estimator=None, *, epsilon: float = 1.0, classes=None, stages: int = 1,
                 em_iterations: int | None = None, secure_rng: bool = False,
                 insecure_noise_seed: int | None = None, random_state: int | None = None):
        self.estimator = estimator
        self.epsilon = epsilon
        self.classes = classes
        self.stages = stages
        self.em_iterations = em_iterations
        self.secure_rng = secure_rng
        self.insecure_noise_seed = insecure_noise_seed
        self.random_state = random_state

    # -- fitting ------------------------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None) -> LabelDPClassifier:
        """Fit on private labels (released here once, shared by every fit on them) or on released
        labels (free)."""
        labels = _fit_labels(y, self)
        if isinstance(labels, ReleasedLabels):
            self.classes_, self.ledger_, self.release_key_ = self._classes(labels.classes), labels.ledger, None
            self._fit_released(X, labels.labels, labels.channel(), sample_weight)
            return self
        self.classes_ = self._classes(labels.classes)
        self._check(labels)
        if _num_rows(X) != len(labels):
            raise ConfigError(f"X has {_num_rows(X)} rows but y has {len(labels)} labels")
        if self.stages == 1:
            released = self._release_once(labels)
        else:
            released = self._release_in_stages(X, labels, sample_weight)
        self.ledger_ = released.ledger
        mine = released[labels.positions]
        self._fit_released(X, mine.labels, mine.channel(), sample_weight)
        return self

    def _classes(self, given) -> np.ndarray:
        """The label domain: the declared ``classes``, or those the labels carry (which must agree)."""
        return np.asarray(fit_classes(self.classes, given), dtype=object)

    def _check(self, labels: PrivateLabels) -> None:
        if not self.epsilon > 0 or not np.isfinite(self.epsilon):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if int(self.stages) != self.stages or self.stages < 1:
            raise ConfigError(f"stages must be a positive integer, got {self.stages}")
        if labels.is_numeric:
            raise ConfigError("LabelDPClassifier needs labels over classes: PrivateLabels(y, classes=[...])")
        if labels.num_classes != len(self.classes_):
            raise ConfigError(f"the labels have {labels.num_classes} classes, the estimator {len(self.classes_)}")
        if self.stages > 1 and not labels.covers_all:
            raise ConfigError(
                "a multi-stage fit releases every row of the labels in stages, each under the model trained on the "
                "stages before: it cannot be shared by the folds of a search or fitted on a part of the labels. Fit "
                "it on all of them, or search with stages=1 (one release shared by every fold). " + RELEASE_ONCE_ROUTE)

    def _noise(self) -> NoiseSource:
        return NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)

    def _release_once(self, labels: PrivateLabels) -> ReleasedLabels:
        """Randomized response on every row of the labels, drawn the first time any fit asks for it."""
        num_classes, epsilon, noise = len(self.classes_), float(self.epsilon), self._noise()
        key = ("randomized-response", epsilon, num_classes, _noise_key(self.secure_rng, self.insecure_noise_seed))

        def draw(everything: PrivateLabels, ledger: PrivacyLedger) -> ReleasedLabels:
            release = release_randomized_response(ledger, everything, np.arange(len(everything)), num_classes,
                                                  epsilon, noise.generator("label-release", 1), "stage1")
            return ReleasedLabels(release.labels, release.likelihood, self.classes_, ledger)

        self.release_key_ = key
        return labels.release_once(key, randomized_response_event(epsilon, num_classes), draw)

    def _release_in_stages(self, X, labels: PrivateLabels, sample_weight) -> ReleasedLabels:
        """LP-MST on every row: RR, then RR-with-prior per stage under the model of the stages before.
        The release is this fit's own (its key is new); it is kept with the labels for scoring."""
        num_classes, epsilon, noise = len(self.classes_), float(self.epsilon), self._noise()

        def draw(everything: PrivateLabels, ledger: PrivacyLedger) -> ReleasedLabels:
            n = len(everything)
            parts = np.array_split(np.random.default_rng(self.random_state).permutation(n), self.stages)
            released, likelihood = np.empty(n, dtype=np.int64), np.empty((n, num_classes))
            for stage, members in enumerate(parts, start=1):
                members, rng = np.sort(members), noise.generator("label-release", stage)
                if stage == 1:
                    release = release_randomized_response(ledger, everything[members], members, num_classes, epsilon,
                                                          rng, f"stage{stage}")
                else:
                    done = np.sort(np.concatenate(parts[:stage - 1]))
                    self._fit_released(_take(X, done), released[done], likelihood[done], _take(sample_weight, done))
                    release = release_rr_with_prior(ledger, everything[members], members,
                                                    self.predict_proba(_take(X, members)), epsilon, rng,
                                                    f"stage{stage}")
                released[members], likelihood[members] = release.labels, release.likelihood
            return ReleasedLabels(released, likelihood, self.classes_, ledger)

        self.release_key_ = ("stages", object())  # nothing else asks for this release: it is never shared
        # RR over 2 classes dominates RR over any k >= 2 (and k = 1 releases nothing)
        return labels.release_once(self.release_key_, randomized_response_event(epsilon, 2), draw)

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
            self.estimator_ = _fit_weighted(self._base(), _take(stacked_X, keep), stacked_y[keep], weights[keep])
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
        """Accuracy: on released labels (or on private labels, through the release the fit made of
        them), an unbiased estimate of the accuracy on their clean labels; on a plain array, which
        labeldp takes as public test labels, the exact accuracy."""
        if isinstance(y, (PrivateLabels, ReleasedLabels)):
            if sample_weight is not None:
                raise ConfigError("the accuracy estimated from released labels does not weight rows")
            released = released_labels_for(self, y)
            return clean_accuracy_estimate(self.predict_proba(X).argmax(axis=1), released)
        return super().score(X, y, sample_weight)


class LabelDPRegressor(RegressorMixin, BaseEstimator):
    """A scikit-learn regressor trained on numeric labels released under label DP.

    The label domain is public and declared: a range ``label_range = (low, high)`` and a grid in it
    (``grid`` evenly spaced points, or the grid's values), never read off the labels. ``fit(X, y)``,
    ``y`` the private values (``PrivateLabels(values)``), clips each true value to the range and snaps it to the nearest grid point (a fixed function of
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
        epsilon: the label-DP budget of the release.
        label_range: ``(low, high)``, public; required unless ``grid`` gives the grid's values.
        grid: the number of evenly spaced grid points in ``label_range`` (default 50), or the grid's
            strictly increasing values.
        mechanism: ``"rr-on-bins"`` or ``"laplace"``.
        prior: ``"histogram"``, ``"uniform"`` or a (G,) array over the grid (RR-on-bins only).
        prior_epsilon: the histogram's share of epsilon (default epsilon / 10).
        debias: fit on targets that undo RR-on-bins' shrinkage (see above), else on the released values.
        secure_rng, insecure_noise_seed: the noise source (the seed makes the noise reproducible and
            the fit NOT private: tests only).
        random_state: the wrapped estimator's seed (public).

    Attributes after ``fit``: ``grid_``, ``ledger_`` (the release's, per row of the labels), ``released_``
    (the released values of the fit's rows), ``prior_`` (the prior row, RR-on-bins), ``bin_values_``
    (the d bin values), ``release_key_``, ``estimator_``.
    """

    def __init__(self, estimator=None, *, epsilon: float = 1.0, label_range=None, grid=DEFAULT_GRID_SIZE,
                 mechanism: str = "rr-on-bins", prior="histogram", prior_epsilon: float | None = None,
                 debias: bool = True, secure_rng: bool = False, insecure_noise_seed: int | None = None,
                 random_state: int | None = None):
        self.estimator = estimator
        self.epsilon = epsilon
        self.label_range = label_range
        self.grid = grid
        self.mechanism = mechanism
        self.prior = prior
        self.prior_epsilon = prior_epsilon
        self.debias = debias
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
        """Release the private values ``y`` once (shared by every fit on them with the same release
        settings: mechanism, epsilon, grid, prior, noise) and fit on the released values."""
        if not isinstance(y, PrivateLabels) or not y.is_numeric:
            raise ConfigError("LabelDPRegressor.fit takes private numeric labels: fit(X, labeldp.PrivateLabels(y)) "
                              "(no classes: numbers). A plain array is public to labeldp, and a fit on it could not "
                              "know whether its values were released before (a search would release them once per "
                              "fold)")
        grid = self._grid()
        share, given = self._plan(grid)
        if _num_rows(X) != len(y):
            raise ConfigError(f"X has {_num_rows(X)} rows but y has {len(y)} values")
        released = self._release_once(y.on_grid(grid), grid, share, given)
        rows = y.positions
        self.grid_, self.ledger_ = grid, released["ledger"]
        self.released_ = released["values"][rows]
        self.prior_, self.bin_values_ = released.get("prior"), released.get("bin_values")
        targets = released["debiased" if self.debias and "debiased" in released else "values"][rows]
        self.estimator_ = _fit_weighted(self._base(), X, targets, sample_weight)
        return self

    def _release_once(self, labels: PrivateLabels, grid: np.ndarray, share: float,
                      given: np.ndarray | None) -> dict[str, Any]:
        """The release of every row's value, drawn the first time a fit with these settings asks:
        its ``values``, ``ledger``, and for RR-on-bins the ``prior``, the ``bin_values`` and the
        ``debiased`` targets (module docstring)."""
        epsilon, noise = float(self.epsilon), NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)
        prior_key = None if given is None else tuple(np.round(given, 12))
        key = (self.mechanism, epsilon, tuple(grid), share, prior_key,
               _noise_key(self.secure_rng, self.insecure_noise_seed))

        def draw(everything: PrivateLabels, ledger: PrivacyLedger) -> dict[str, Any]:
            members = np.arange(len(everything))
            if self.mechanism == "laplace":
                release = release_laplace_value(ledger, everything, members, grid, epsilon,
                                                noise.generator("label-release", 1), "labels")
                return {"values": release.arrays["values"], "ledger": ledger}
            prior = given
            if prior is None:
                histogram = release_noisy_histogram(ledger, everything, members, np.zeros(members.size, dtype=np.int64),
                                                    1, grid.size, share, noise.generator("histogram"), "prior")
                prior = histogram_priors(histogram.arrays["counts"], [members.size])[0]
            rest = epsilon - share
            release = release_rr_on_bins(ledger, everything, members, grid, prior, rest,
                                         noise.generator("label-release", 1), "labels")
            maps = optimal_bins(prior, grid, rest)  # public: the prior's map, the one the release used
            d = int(maps.d[0])
            out = {"values": release.arrays["values"], "ledger": ledger, "prior": prior,
                   "bin_values": maps.values[0, :d].copy()}
            if d >= 2:
                means = _bin_means(prior, grid, maps.bin_of[0], d)
                keep_minus_other = -math.expm1(-rest) / (1.0 + (d - 1) * math.exp(-rest))  # p - q
                other = math.exp(-rest) / (1.0 + (d - 1) * math.exp(-rest))  # q
                out["debiased"] = (means[release.labels] - other * means.sum()) / keep_minus_other
            return out

        self.release_key_ = key
        return labels.release_once(key, self._event(grid, share), draw)

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
    if X is None:
        return None
    return X.iloc[rows] if hasattr(X, "iloc") else np.asarray(X)[rows]


def _num_rows(X) -> int:
    return len(X) if hasattr(X, "__len__") else int(np.shape(X)[0])


def _stack(X, copies: int):
    return pd.concat([X] * copies, ignore_index=True) if hasattr(X, "iloc") else np.concatenate([np.asarray(X)] * copies)
