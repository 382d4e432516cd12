"""LabelDPRegressor: any scikit-learn regressor trained on numeric labels released under label DP.

:class:`LabelDPRegressor` does for a numeric label on a declared, public range and grid what
:class:`~labeldp.estimators.LabelDPClassifier` does for classes: it releases the values once by RR-on-bins
(Ghazi et al. 2023) under a noisy histogram prior over the grid (or a prior the user gives, or the Laplace
mechanism on the clipped value, the baseline) and fits any scikit-learn regressor on the released values. Its
release is shared like the classifier's: every fit and fold on the same private values with the same release
settings trains on the one release. It also fits, for free, on values released once as labels over a grid of
numbers (randomized response over the grid's values: :func:`labeldp.privatize` with the grid as classes, or a
release folder of ``labeldp privatize``), which scikit-learn's own scorers can then score.

Privacy: epsilon-label-DP for the rows of the private values (replace-one-label neighbours), as ``ledger_``
computes; inputs are public. Noise: fresh OS entropy by default, ChaCha20 with ``secure_rng``, never
``random_state``, which controls only the wrapped estimator's own randomness (public).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from dp_accounting import dp_event
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.utils import Tags
from sklearn.utils.validation import check_is_fitted

from labeldp.accounting import PrivacyLedger, randomized_response_event
from labeldp.accounting.events import histogram_event, laplace_value_event
from labeldp.boundary import (
    PrivateLabels,
    Release,
    ReleasedLabels,
    release_laplace_value,
    release_noisy_histogram,
    release_rr_on_bins,
)
from labeldp.config.run_config import DEFAULT_PRIOR_SHARE
from labeldp.data.grid import DEFAULT_GRID_SIZE, label_grid
from labeldp.errors import ConfigError
from labeldp.estimators._common import (
    base_estimator,
    check_rows,
    checked_inputs,
    checked_weights,
    fit_labels,
    fit_weighted,
    noise_key,
    probe,
    wrapper_tags,
)
from labeldp.mechanisms import optimal_bins
from labeldp.priors import histogram_priors
from labeldp.randomness import NoiseSource
from labeldp.released_metrics import channel_weights, estimated_r2
from labeldp.runtime import on_free_cores


class LabelDPRegressor(RegressorMixin, BaseEstimator):
    """A scikit-learn regressor trained on numeric labels released under label DP.

    The label domain is public and declared: a range ``label_range = (low, high)`` and a grid in it
    (``grid`` evenly spaced points, or the grid's values), never read off the labels. ``fit(X, y)``,
    ``y`` the private values (``PrivateLabels(values)``), clips each true value to the range and snaps
    it to the nearest grid point (a fixed function of that value alone), then releases it once:

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

    On values released once as labels over classes that are the grid's values (in increasing order),
    the fit spends nothing; the grid is the release's classes (a declared range or grid must be the
    same), and the debiased target of row i is sum_y W[i, y] y, with the weights of
    :func:`~labeldp.released_metrics.channel_weights`, whose expectation is the row's clean value
    (randomized response over the values; RR-with-prior where the value lies in the row's top set).

    Parameters
    ----------
    estimator : regressor, optional
        Any regressor with ``fit(X, y, sample_weight=...)`` and ``predict`` (default:
        ``HistGradientBoostingRegressor``, native categorical support for pandas category columns).
    epsilon : float
        The label-DP budget of the release.
    label_range : tuple of float, optional
        ``(low, high)``, public; required unless ``grid`` gives the grid's values.
    grid : int or array-like
        The number of evenly spaced grid points in ``label_range`` (default 50), or the grid's strictly
        increasing values.
    mechanism : str
        ``"rr-on-bins"`` or ``"laplace"``.
    prior : str or array-like
        ``"histogram"``, ``"uniform"`` or a (G,) array over the grid (RR-on-bins only).
    prior_epsilon : float, optional
        The histogram's share of epsilon (default: ``DEFAULT_PRIOR_SHARE`` of it, a tenth).
    debias : bool
        Fit on targets that undo RR-on-bins' shrinkage (see above), else on the released values.
    secure_rng : bool
        The noise source: ChaCha20 (see :class:`labeldp.randomness.NoiseSource`), else fresh OS entropy.
    insecure_noise_seed : int, optional
        Makes the noise reproducible and the fit NOT private: tests only.
    random_state : int, optional
        The wrapped estimator's seed (public).

    Attributes
    ----------
    grid_ : numpy.ndarray
        The grid's values.
    n_features_in_ : int
        The number of input columns.
    feature_names_in_ : numpy.ndarray
        The input columns' names, when ``X`` was a table with text column names.
    ledger_ : PrivacyLedger
        The release's, per row of the labels (None for released labels that carry no ledger).
    released_ : numpy.ndarray
        The released values of the fit's rows.
    prior_ : numpy.ndarray or None
        The prior row (RR-on-bins).
    bin_values_ : numpy.ndarray or None
        The d bin values (RR-on-bins).
    release_key_ : tuple or None
        Which release of the private values it trained on; None on released labels.
    estimator_ : regressor
        The fitted clone of ``estimator``.
    """

    def __init__(
        self,
        estimator=None,
        *,
        epsilon: float = 1.0,
        label_range=None,
        grid=DEFAULT_GRID_SIZE,
        mechanism: str = "rr-on-bins",
        prior="histogram",
        prior_epsilon: float | None = None,
        debias: bool = True,
        secure_rng: bool = False,
        insecure_noise_seed: int | None = None,
        random_state: int | None = None,
    ):
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
                raise ConfigError(
                    "fitting on true values needs the label domain: label_range=(low, high) (public, "
                    "declared, never read off the labels)"
                )
            return label_grid(self.label_range[0], self.label_range[1], self.grid)
        values = np.asarray(self.grid, dtype=np.float64)
        if values.ndim != 1 or values.size < 2 or not np.all(np.isfinite(values)) or not np.all(np.diff(values) > 0):
            raise ConfigError("grid must be a number of points or at least 2 strictly increasing finite values")
        if self.label_range is not None and (values[0] != self.label_range[0] or values[-1] != self.label_range[1]):
            raise ConfigError(
                f"the grid runs from {values[0]:g} to {values[-1]:g}, not over label_range {tuple(self.label_range)}"
            )
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
            share = self.epsilon * DEFAULT_PRIOR_SHARE if self.prior_epsilon is None else float(self.prior_epsilon)
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
    @on_free_cores
    def fit(self, X, y, sample_weight=None) -> LabelDPRegressor:
        """Release the private values ``y`` once (shared by every fit on them with the same release
        settings: mechanism, epsilon, grid, prior, noise) and fit on the released values; or fit on
        values released once (free).

        Parameters
        ----------
        X : array-like, sparse matrix or pandas.DataFrame
            The public inputs, one row per value.
        y : PrivateLabels, ReleasedLabels, Release, str or os.PathLike
            The true values, wrapped without classes (``PrivateLabels(values)``); or values released
            once as labels over the grid's values: :class:`ReleasedLabels`, a
            :class:`~labeldp.boundary.Release` of labels (grid positions of the declared grid), or the
            path of a release folder written by ``labeldp privatize``. A plain array is refused.
        sample_weight : array-like, optional
            Public weights of the rows (non-negative, not all zero).

        Returns
        -------
        LabelDPRegressor
            This estimator, fitted.

        Raises
        ------
        ConfigError
            For a plain array or None, private labels over classes, released labels whose classes are not
            the grid's values, an undeclared range, a bad grid, prior or mechanism, or another number of
            rows than ``X`` (before any release).
        ValueError
            For inputs scikit-learn refuses (not 2-d, complex, no rows), before any release.
        PrivateLabelAccessError
            For another release of rows released already, without a :class:`~labeldp.boundary.LabelBudget`.
        BudgetError
            For a release that would pass the labels' :class:`~labeldp.boundary.LabelBudget`.
        """
        X = checked_inputs(self, X, reset=True)
        weights = checked_weights(sample_weight, X)
        wrapped = "labeldp.PrivateLabels(values): private numeric labels, no classes"
        labels = fit_labels(y, self, tuple(self._grid()) if isinstance(y, Release) else None, wrapped)
        check_rows(X, labels)
        if isinstance(labels, ReleasedLabels):
            self._fit_released(X, labels, weights)
            return self
        if not labels.is_numeric:
            raise ConfigError(
                "LabelDPRegressor.fit takes private numeric labels: fit(X, labeldp.PrivateLabels(y)) (no classes: "
                "numbers), or values released once as labels over the grid's values"
            )
        grid = self._grid()
        share, given = self._plan(grid)
        probe(self._base(X), X, grid)  # before the release: inputs it cannot take
        released = self._release_once(labels.on_grid(grid), grid, share, given)
        rows = labels.positions
        self.grid_, self.ledger_ = grid, released["ledger"]
        self.released_ = released["values"][rows]
        self.prior_, self.bin_values_ = released.get("prior"), released.get("bin_values")
        targets = released["debiased" if self.debias and "debiased" in released else "values"][rows]
        self.estimator_ = fit_weighted(self._base(X), X, targets, weights)
        return self

    def _fit_released(self, X, labels: ReleasedLabels, weights: np.ndarray | None) -> None:
        """Fit on values released once as labels over the grid's values (class docstring)."""
        grid = self._released_grid(labels.classes)
        self.grid_, self.ledger_ = grid, labels.ledger
        self.release_key_: tuple[Any, ...] | None = None
        self.prior_ = self.bin_values_ = None
        self.released_ = grid[labels.labels]
        targets = channel_weights(labels.labels, labels.channel()) @ grid if self.debias else self.released_
        self.estimator_ = fit_weighted(self._base(X), X, targets, weights)

    def _released_grid(self, classes: tuple) -> np.ndarray:
        """The grid of released labels: their classes, numbers in increasing order (a declared range or
        grid must give the same values)."""
        try:
            values = np.asarray(classes, dtype=np.float64)
        except (TypeError, ValueError):
            raise ConfigError(
                f"LabelDPRegressor fits released labels whose classes are the grid's values, not {list(classes)}"
            ) from None
        if not np.all(np.isfinite(values)) or not np.all(np.diff(values) > 0):
            raise ConfigError(f"released labels' classes must be increasing numbers (a grid), got {list(classes)}")
        if self.label_range is not None or np.ndim(self.grid) != 0:
            declared = self._grid()
            if declared.shape != values.shape or not np.allclose(declared, values):
                raise ConfigError(
                    f"the released labels' classes {list(classes)} are not the declared grid {declared.tolist()}"
                )
        return values

    def _release_once(
        self, labels: PrivateLabels, grid: np.ndarray, share: float, given: np.ndarray | None
    ) -> dict[str, Any]:
        """The release of every row's value, drawn the first time a fit with these settings asks:
        its ``values``, ``ledger``, and for RR-on-bins the ``prior``, the ``bin_values`` and the
        ``debiased`` targets (class docstring)."""
        epsilon = float(self.epsilon)
        noise = NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)
        prior_key = None if given is None else tuple(np.round(given, 12))
        key = (
            self.mechanism,
            epsilon,
            tuple(grid),
            share,
            prior_key,
            noise_key(self.secure_rng, self.insecure_noise_seed),
        )

        def draw(everything: PrivateLabels, ledger: PrivacyLedger) -> dict[str, Any]:
            members = np.arange(len(everything))
            if self.mechanism == "laplace":
                release = release_laplace_value(
                    ledger, everything, members, grid, epsilon, noise.generator("label-release", 1), "labels"
                )
                return {"values": release.arrays["values"], "ledger": ledger}
            prior = given
            if prior is None:
                histogram = release_noisy_histogram(
                    ledger,
                    everything,
                    members,
                    np.zeros(members.size, dtype=np.int64),
                    1,
                    grid.size,
                    share,
                    noise.generator("histogram"),
                    "prior",
                )
                prior = histogram_priors(histogram.arrays["counts"], np.array([members.size]))[0]
            rest = epsilon - share
            release = release_rr_on_bins(
                ledger, everything, members, grid, prior, rest, noise.generator("label-release", 1), "labels"
            )
            maps = optimal_bins(prior, grid, rest)  # public: the prior's map, the one the release used
            d = int(maps.d[0])
            out = {
                "values": release.arrays["values"],
                "ledger": ledger,
                "prior": prior,
                "bin_values": maps.values[0, :d].copy(),
                "bins": release.labels,  # each row's released bin, RR over the d bins at epsilon ``rest``
                "epsilon": rest,
            }
            if d >= 2:
                means = _bin_means(prior, grid, maps.bin_of[0], d)
                keep_minus_other = -math.expm1(-rest) / (1.0 + (d - 1) * math.exp(-rest))  # p - q
                other = math.exp(-rest) / (1.0 + (d - 1) * math.exp(-rest))  # q
                out["debiased"] = (means[release.labels] - other * means.sum()) / keep_minus_other
            return out

        self.release_key_ = key
        return labels.release_once(key, self._event(grid, share), draw)

    def _base(self, X=None):
        return base_estimator(self.estimator, HistGradientBoostingRegressor, self.random_state, X)

    def __sklearn_tags__(self) -> Tags:
        wrapped = self.estimator if self.estimator is not None else HistGradientBoostingRegressor()
        return wrapper_tags(super().__sklearn_tags__(), wrapped, self.insecure_noise_seed)

    def score(self, X, y, sample_weight=None) -> float:
        """R^2: on a plain array, which labeldp takes as public test values, the exact one; on released labels
        (or private labels, through the release the fit made of them) an estimate of it on their values,
        unbiased in its squared error and its variance (:func:`~labeldp.released_metrics.estimated_r2`),
        where RR-on-bins released bins: against each label's bin's value (a release cannot see inside a bin).

        Raises
        ------
        ConfigError
            For row weights with released labels, private labels the fit did not release, a Laplace release
            or one that estimates no variance.
        """
        if not isinstance(y, (PrivateLabels, ReleasedLabels)):
            return super().score(X, y, sample_weight)
        if sample_weight is not None:
            raise ConfigError("the R^2 estimated from released labels does not weight rows")
        values, weights = self._released_weights(y)
        found = estimated_r2(self.predict(X), weights, values)
        if found.value is None:
            raise ConfigError("the release estimates no spread of these labels: R^2 needs a public test set here")
        return found.value

    def _released_weights(self, y) -> tuple[np.ndarray, np.ndarray]:
        """The values a released label stands for and each row's unbiased weights over them."""
        check_is_fitted(self, "estimator_")
        if isinstance(y, ReleasedLabels):
            return self.grid_, channel_weights(y.labels, y.channel())
        key = getattr(self, "release_key_", None)
        shared = y.shared_release(key) if key is not None else None
        if shared is None or "bins" not in shared:
            kind = "released by the Laplace mechanism (no channel to weigh)" if shared is not None else "not released"
            raise ConfigError(
                f"LabelDPRegressor.score on private labels reads the release its fit made of them; these were {kind} "
                "by this model's fit. Score on a public test set, or on values released once (labeldp.privatize)"
            )
        values, d = shared["bin_values"], len(shared["bin_values"])
        other = math.exp(-shared["epsilon"]) / (1.0 + (d - 1) * math.exp(-shared["epsilon"]))
        bins = np.asarray(shared["bins"])[y.positions]
        likelihood = np.where(np.arange(d)[None, :] == bins[:, None], 1.0 - (d - 1) * other, other)
        return values, channel_weights(bins, likelihood)

    @on_free_cores
    def predict(self, X) -> np.ndarray:
        """The regressor's predictions, clipped to the declared range.

        Parameters
        ----------
        X : array-like, sparse matrix or pandas.DataFrame
            The public inputs.

        Returns
        -------
        numpy.ndarray
            (n,) predictions in ``[grid_[0], grid_[-1]]``.
        """
        check_is_fitted(self, "estimator_")
        predicted = self.estimator_.predict(checked_inputs(self, X, reset=False))
        return np.clip(np.asarray(predicted, dtype=np.float64), self.grid_[0], self.grid_[-1])


def _bin_means(prior: np.ndarray, grid: np.ndarray, bin_of: np.ndarray, d: int) -> np.ndarray:
    """E[y | y in bin b] under ``prior`` for each of the d bins of a map (a bin the prior gives no mass:
    the mean of its grid points). Public: a function of the prior and the grid."""
    mass = np.bincount(bin_of, weights=prior, minlength=d)
    first = np.bincount(bin_of, weights=prior * grid, minlength=d)
    plain = np.bincount(bin_of, weights=grid, minlength=d) / np.bincount(bin_of, minlength=d)
    return np.where(mass > 0, first / np.where(mass > 0, mass, 1.0), plain)
