"""LabelDPClassifier: any scikit-learn classifier trained on labels released under label DP.

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
  :class:`~labeldp.boundary.LabelBudget`. With ``second_stage="counts"`` the second stage releases noisy
  label counts per cell of rows the first model scores alike (:mod:`labeldp.priors.cells`), not a label per row.
- labels released once: :class:`~labeldp.boundary.ReleasedLabels` (a release of
  :func:`labeldp.privatize`), a :class:`~labeldp.boundary.Release` of the boundary's ``release_*``
  functions (over the declared ``classes``), or the path of a release folder written by
  ``labeldp privatize`` (read by :func:`~labeldp.boundary.load_release`): the fit spends nothing.

``score(X, y)`` and :func:`~labeldp.released_metrics.released_scorer` score on released labels
through their noise channel (an unbiased estimate of the accuracy on the clean labels); given
private labels, they use the release the fit made of them, and never the private labels. A plain
array given to ``score`` is taken as public test labels, each matched to the classes as text (``1``
and ``"1"`` are one class). ``classes_`` and the predictions are in the classes' own dtype (int64 for
integer classes), so scikit-learn's scorers work on public and on released labels; given private
labels, they fail loudly (:class:`~labeldp.boundary.PrivateLabelAccessError`).

What the estimator predicts is the *clean* label: the released labels' noise channel is public. With
randomized response the wrapped classifier learns the released labels and ``predict_proba`` inverts
the channel (exact in expectation); with per-example channels (RR-with-prior) each example enters the
fit once per class, weighted by the posterior of that class given what was released, the prior being
the model's own estimate (expectation-maximisation). ``predict_proba`` is an estimate of
Pr[clean label | x].

**Privacy units** (a user's many rows protected together) are taken by the release, not by ``fit``:
release once per user with ``released = labeldp.privatize(y, classes=..., epsilon=..., units=users,
max_rows_per_unit=m)`` (at most m rows of a user kept, chosen by the public seed, each label at
epsilon / c), then fit on the rows it holds, ``fit(X.loc[released.ids], released)`` (``ids`` are the
kept rows' ids: the ids given, a Series' index, or the positions); ``ledger_`` is then the release's,
whose epsilon is each user's. ``fit`` takes no ``units``: private labels share one release across every fit, fold and
stage, each a set of rows, and their ledger and budget count rows, not units.

Privacy: epsilon-label-DP for the rows of the private labels (replace-one-label neighbours), as
``ledger_`` computes; inputs are public. Noise as in runs: fresh OS entropy by default, ChaCha20 with
``secure_rng``, never ``random_state``, which controls only the public parts (the split into stages,
the wrapped estimator's own randomness).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.utils import Tags
from sklearn.utils.validation import check_is_fitted

from labeldp.accounting import PrivacyLedger, randomized_response_event
from labeldp.boundary import RELEASE_ONCE_ROUTE, PrivateLabels, ReleasedLabels
from labeldp.errors import ConfigError
from labeldp.estimators._common import (
    base_estimator,
    check_rows,
    checked_inputs,
    checked_weights,
    estimator_classes,
    fit_labels,
    fit_weighted,
    noise_key,
    probe,
    public_accuracy,
    shared_rr_channel,
    stack_rows,
    take_rows,
    wrapper_tags,
)
from labeldp.estimators.public_bins import PublicBins, as_table, bin_indicators
from labeldp.methods.stage_release import cell_soft_labels, release_cell_counts, release_stage_labels
from labeldp.priors import FIRST_SHARE, cells_of
from labeldp.randomness import NoiseSource
from labeldp.released_metrics import clean_accuracy_estimate, released_labels_for
from labeldp.runtime import on_free_cores
from labeldp.training.fit_trees import EM_ROUNDS, TREE_SETTINGS


class LabelDPClassifier(ClassifierMixin, BaseEstimator):
    """A scikit-learn classifier trained on labels released under label DP (see the module docstring).

    Parameters
    ----------
    estimator : classifier, optional
        Any classifier with ``fit(X, y, sample_weight=...)`` and ``predict_proba`` (default:
        ``HistGradientBoostingClassifier`` with small, regularised trees,
        :data:`~labeldp.training.fit_trees.TREE_SETTINGS`, native categorical support for pandas category columns).
    epsilon : float
        The label-DP budget of the release of private labels.
    classes : sequence, optional
        The label domain, in order (public; optional: private labels and releases carry their own,
        which must then be these; required to fit on a :class:`~labeldp.boundary.Release`).
    stages : int
        1 (randomized response on every label, shared by every fit on the same labels) or more (the
        paper's LP-MST: stage t releases its labels by RR-with-prior under the model trained on the
        earlier stages; the fit's own release, on every row of the labels).
    second_stage : {"rr-with-prior", "counts"}
        With ``stages=2``, the second stage's release: RR-with-prior, or noisy label counts per cell (the
        first stage then holds a share ``labeldp.priors.FIRST_SHARE`` of the rows). Counts win on tables
        where per-label noise costs most (docs/results.md); ``score`` then needs public or released labels.
    cell_rows : int
        With ``second_stage="counts"``: the fewest rows in a cell.
    em_iterations : int, optional
        Rounds of posterior weighting after the first fit (default: one where every row shares one randomized
        response channel, inverted in the first fit, whose probabilities the round frees from the inversion's
        clipping at 0; else 2).
    secure_rng : bool
        The noise source: ChaCha20 (see :class:`labeldp.randomness.NoiseSource`), else fresh OS entropy.
    insecure_noise_seed : int, optional
        Makes the noise reproducible and the fit NOT private: tests only.
    random_state : int, optional
        The public randomness (stages, the wrapped estimator's seed).

    Attributes
    ----------
    classes_ : numpy.ndarray
        The label domain, in order, in the classes' own dtype (int64 for integers, an object array for text).
    n_features_in_ : int
        The number of input columns.
    feature_names_in_ : numpy.ndarray
        The input columns' names, when ``X`` was a table with text column names.
    ledger_ : PrivacyLedger
        The release's, per row of the labels (None for released labels that carry no ledger).
    release_key_ : tuple or None
        Which release of the private labels it trained on; None on released labels.
    estimator_ : classifier
        The fitted clone of ``estimator``.
    channel_ : tuple of float or None
        (keep, other) of the randomized response that ``predict_proba`` inverts; None after a weighted fit.
    """

    def __init__(
        self,
        estimator=None,
        *,
        epsilon: float = 1.0,
        classes=None,
        stages: int = 1,
        second_stage: str = "rr-with-prior",
        cell_rows: int = 10,
        em_iterations: int | None = None,
        secure_rng: bool = False,
        insecure_noise_seed: int | None = None,
        random_state: int | None = None,
    ):
        self.estimator = estimator
        self.epsilon = epsilon
        self.classes = classes
        self.stages = stages
        self.second_stage = second_stage
        self.cell_rows = cell_rows
        self.em_iterations = em_iterations
        self.secure_rng = secure_rng
        self.insecure_noise_seed = insecure_noise_seed
        self.random_state = random_state

    # -- fitting ------------------------------------------------------------------------------------
    @on_free_cores
    def fit(self, X, y, sample_weight=None) -> LabelDPClassifier:
        """Fit on private labels (released here once, shared by every fit on them) or on released
        labels (free).

        Parameters
        ----------
        X : array-like, sparse matrix or pandas.DataFrame
            The public inputs, one row per label.
        y : PrivateLabels, ReleasedLabels, Release, str or os.PathLike
            The true labels, wrapped (released here, or the release every fit on them shares), or
            labels released once: :class:`ReleasedLabels`, a :class:`~labeldp.boundary.Release` of
            labels (over the declared ``classes``), or the path of a release folder written by
            ``labeldp privatize``. A plain array is refused.
        sample_weight : array-like, optional
            Public weights of the rows (non-negative, not all zero).

        Returns
        -------
        LabelDPClassifier
            This estimator, fitted.

        Raises
        ------
        ConfigError
            For a plain array or None, bad settings, numeric labels or classes that are not whole numbers
            ("Unknown label type: continuous"), or a mismatch of classes or rows (before any release).
        ValueError
            For inputs scikit-learn refuses (not 2-d, complex, no rows), before any release.
        PrivateLabelAccessError
            For another release of rows released already, without a :class:`~labeldp.boundary.LabelBudget`.
        BudgetError
            For a release that would pass the labels' :class:`~labeldp.boundary.LabelBudget`.
        """
        X = checked_inputs(self, X, reset=True)
        weights = checked_weights(sample_weight, X)
        labels = fit_labels(y, self, self.classes)
        self.classes_ = estimator_classes(self, labels)
        check_rows(X, labels)
        if isinstance(labels, ReleasedLabels):
            self.ledger_ = labels.ledger
            self.release_key_: tuple[Any, ...] | None = None
            self._fit_released(X, labels.labels, labels.channel(), weights)
            return self
        self._check(labels)
        probe(self._base(X), X, np.arange(len(self.classes_)))  # before the release: inputs it cannot take
        try:
            if self.stages == 1:
                released = self._release_once(labels)
            elif self.second_stage == "counts":
                soft, self.ledger_ = self._release_in_cells(X, labels, weights)
                self._fit_soft(X, soft, weights)
                return self
            else:
                released = self._release_in_stages(X, labels, weights)
        except BaseException:  # a fit between two releases failed: no model of an unfinished release stays
            for name in ("estimator_", "channel_", "ledger_"):
                self.__dict__.pop(name, None)
            raise
        self.ledger_ = released.ledger
        mine = released[labels.positions]
        self._fit_released(X, mine.labels, mine.channel(), weights)
        return self

    def _check(self, labels: PrivateLabels) -> None:
        if not self.epsilon > 0 or not np.isfinite(self.epsilon):
            raise ConfigError(f"epsilon must be a finite number > 0, got {self.epsilon}")
        if int(self.stages) != self.stages or self.stages < 1:
            raise ConfigError(f"stages must be a positive integer, got {self.stages}")
        if self.second_stage not in ("rr-with-prior", "counts"):
            raise ConfigError(f"second_stage must be 'rr-with-prior' or 'counts', got {self.second_stage!r}")
        if self.second_stage == "counts" and self.stages != 2:
            raise ConfigError(f"second_stage='counts' is the second of two stages: set stages=2, got {self.stages}")
        if int(self.cell_rows) != self.cell_rows or self.cell_rows < 1:
            raise ConfigError(f"cell_rows must be a positive integer, got {self.cell_rows}")
        if self.stages > 1 and not labels.covers_all:
            raise ConfigError(
                "a multi-stage fit releases every row of the labels in stages, each under the model trained on the "
                "stages before: it cannot be shared by the folds of a search or fitted on a part of the labels. Fit "
                "it on all of them, or search with stages=1 (one release shared by every fold). " + RELEASE_ONCE_ROUTE
            )

    def _noise(self) -> NoiseSource:
        return NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)

    def _release_once(self, labels: PrivateLabels) -> ReleasedLabels:
        """Randomized response on every row of the labels, drawn the first time any fit asks for it."""
        num_classes, epsilon, noise = len(self.classes_), float(self.epsilon), self._noise()
        key = ("randomized-response", epsilon, num_classes, noise_key(self.secure_rng, self.insecure_noise_seed))

        def draw(everything: PrivateLabels, ledger: PrivacyLedger) -> ReleasedLabels:
            release = release_stage_labels(
                ledger, everything, np.arange(len(everything)), num_classes, epsilon, noise, 1
            )
            assert release.labels is not None  # randomized response releases each label
            return ReleasedLabels(release.labels, release.likelihood, tuple(self.classes_), ledger)

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
                members, prior = np.sort(members), None
                if stage > 1:  # the prior of a model of the stages before: public
                    done = np.sort(np.concatenate(parts[: stage - 1]))
                    self._fit_released(
                        take_rows(X, done), released[done], likelihood[done], take_rows(sample_weight, done)
                    )
                    prior = self.predict_proba(take_rows(X, members))
                release = release_stage_labels(
                    ledger, everything[members], members, num_classes, epsilon, noise, stage, prior
                )
                assert release.labels is not None and release.likelihood is not None  # each label and its channel
                released[members], likelihood[members] = release.labels, release.likelihood
            return ReleasedLabels(released, likelihood, tuple(self.classes_), ledger)

        self.release_key_ = ("stages", object())  # nothing else asks for this release: it is never shared
        # RR over 2 classes dominates RR over any k >= 2 (and k = 1 releases nothing)
        return labels.release_once(self.release_key_, randomized_response_event(epsilon, 2), draw)

    def _release_in_cells(self, X, labels: PrivateLabels, sample_weight) -> tuple[np.ndarray, PrivacyLedger]:
        """Every row's (n, K) soft label and the ledger: RR on a share of the rows, a model fitted on them, then
        noisy label counts per cell of the other rows (:func:`~labeldp.priors.cells_of` over the public inputs
        and that model's scores). The soft labels are the first rows' posteriors under the model and the
        others' cell fractions. The release is this fit's own."""
        num_classes, epsilon, noise, n = len(self.classes_), float(self.epsilon), self._noise(), len(labels)
        order = np.random.default_rng(self.random_state).permutation(n)  # public, as every check below
        first, second = np.sort(order[: round(FIRST_SHARE * n)]), np.sort(order[round(FIRST_SHARE * n) :])
        if sample_weight is not None and not sample_weight[first].sum() > 0:
            raise ConfigError("the rows of the first stage all weigh zero: it would release labels it cannot learn")
        design = _tree_inputs(X)
        cells_of(take_rows(design, second), np.full((second.size, num_classes), 1.0), self.cell_rows, self.random_state)

        def draw(everything: PrivateLabels, ledger: PrivacyLedger) -> tuple[np.ndarray, PrivacyLedger]:
            release = release_stage_labels(ledger, everything[first], first, num_classes, epsilon, noise, 1)
            assert release.labels is not None and release.likelihood is not None  # each label and its channel
            self._fit_released(take_rows(X, first), release.labels, release.likelihood, take_rows(sample_weight, first))
            prior = self.predict_proba(X)
            cells = cells_of(take_rows(design, second), prior[second], self.cell_rows, self.random_state)
            counted = release_cell_counts(ledger, everything[second], second, cells, num_classes, epsilon, noise)
            soft = np.empty((n, num_classes))
            soft[first], soft[second] = cell_soft_labels(prior[first], release.likelihood, counted)
            return soft, ledger

        self.release_key_ = ("cells", object())  # never shared; scoring on the private labels is refused
        return labels.release_once(self.release_key_, randomized_response_event(epsilon, 2), draw)

    def _fit_soft(self, X, soft: np.ndarray, sample_weight) -> None:
        """Fit on (n, K) soft labels: each row once per class, weighted by its soft label."""
        n, num_classes = soft.shape
        extra = np.ones(n) if sample_weight is None else sample_weight
        weights = (soft * extra[:, None]).T.ravel()
        keep = weights > 1e-12
        stacked_X, stacked_y = stack_rows(X, num_classes), np.repeat(np.arange(num_classes), n)
        self.estimator_ = fit_weighted(self._base(X), take_rows(stacked_X, keep), stacked_y[keep], weights[keep])
        self.channel_: tuple[float, float] | None = None  # the weighted fit learns the clean labels itself

    def _fit_released(self, X, labels: np.ndarray, likelihood: np.ndarray, sample_weight) -> None:
        """Learn Pr[clean label | x] from released labels. When every row shares one randomized
        response channel, the classifier learns the released labels and ``predict_proba`` inverts the
        channel, which is exact in expectation. Otherwise (RR-with-prior's per-example channels), or
        with ``em_iterations``, rounds of expectation-maximisation follow: each example enters once per
        class, weighted by the posterior of the class given its release, prior(class | x) x
        Pr[release | class], the prior being the model's last estimate."""
        self.estimator_ = fit_weighted(self._base(X), X, labels, sample_weight)
        self.channel_ = shared_rr_channel(labels, likelihood)
        rounds = self.em_iterations if self.em_iterations is not None else (EM_ROUNDS if self.channel_ else 2)
        for _ in range(rounds):
            posterior = np.clip(self.predict_proba(X), 1e-6, 1.0) * likelihood
            self._fit_soft(X, posterior / posterior.sum(axis=1, keepdims=True), sample_weight)

    def _base(self, X=None):
        return base_estimator(self.estimator, functools.partial(HistGradientBoostingClassifier, **TREE_SETTINGS),
                              self.random_state, X)  # fmt: skip

    def __sklearn_tags__(self) -> Tags:
        wrapped = self.estimator if self.estimator is not None else HistGradientBoostingClassifier()
        return wrapper_tags(super().__sklearn_tags__(), wrapped, self.insecure_noise_seed)

    # -- predicting ---------------------------------------------------------------------------------
    @on_free_cores
    def predict_proba(self, X) -> np.ndarray:
        """An estimate of Pr[clean label | x], one column per class of ``classes_``.

        Parameters
        ----------
        X : array-like, sparse matrix or pandas.DataFrame
            The public inputs.

        Returns
        -------
        numpy.ndarray
            (n, classes) probabilities.
        """
        check_is_fitted(self, "estimator_")
        raw = self.estimator_.predict_proba(checked_inputs(self, X, reset=False))
        probabilities = np.zeros((raw.shape[0], len(self.classes_)))
        probabilities[:, self.estimator_.classes_.astype(int)] = raw
        if self.channel_ is not None:  # Pr[released k | x] = keep p_k + other (1 - p_k), solved for p_k
            keep, other = self.channel_
            probabilities = np.clip((probabilities - other) / (keep - other), 0.0, None)
            probabilities /= np.maximum(probabilities.sum(axis=1, keepdims=True), 1e-12)
        return probabilities

    @on_free_cores
    def predict(self, X) -> np.ndarray:
        """The most probable clean label of each row.

        Parameters
        ----------
        X : array-like, sparse matrix or pandas.DataFrame
            The public inputs.

        Returns
        -------
        numpy.ndarray
            (n,) class values of ``classes_``, in their dtype.
        """
        positions = self.predict_proba(X).argmax(axis=1)  # NotFittedError before a fit
        return self.classes_[positions]

    @on_free_cores
    def score(self, X, y, sample_weight=None) -> float:
        """Accuracy: on released labels (or on private labels, through the release the fit made of
        them), an unbiased estimate of the accuracy on their clean labels; on a plain array, which
        labeldp takes as public test labels, the exact accuracy (each label matched to the classes as
        text: ``1`` and ``"1"`` are one class; a label outside them counts as a wrong prediction).

        Parameters
        ----------
        X : array-like, sparse matrix or pandas.DataFrame
            The public inputs.
        y : ReleasedLabels, PrivateLabels or array-like
            Released labels, private labels this model's fit released, or public test labels.
        sample_weight : array-like, optional
            Row weights: public test labels only.

        Returns
        -------
        float
            The accuracy, or its estimate (:func:`~labeldp.released_metrics.clean_accuracy_estimate`).

        Raises
        ------
        ConfigError
            For row weights with released labels, or private labels the fit did not release.
        """
        if isinstance(y, (PrivateLabels, ReleasedLabels)):
            if sample_weight is not None:
                raise ConfigError("the accuracy estimated from released labels does not weight rows")
            released = released_labels_for(self, y)
            return clean_accuracy_estimate(self.predict_proba(X).argmax(axis=1), released)
        return public_accuracy(self.classes_, self.predict_proba(X).argmax(axis=1), y, sample_weight)


def _tree_inputs(X):
    """The public inputs as numbers a tree splits: numeric columns' ranks, every other column one-hot."""
    bins = PublicBins().fit(X)
    frame = as_table(X)
    numeric = np.array([column in bins.edges_ for column in bins.columns_])
    ranks = np.zeros((len(frame), 0))
    if numeric.any():  # a tree reads order only: ranks are finite where values may not be, a missing one lowest
        values = np.column_stack([pd.to_numeric(frame[c], errors="coerce").to_numpy(np.float64) for c in bins.edges_])
        ranks = np.column_stack([np.unique(column, return_inverse=True)[1] for column in values.T]).astype(np.float64)
        ranks[np.isnan(values)] = -1.0
    categories = bin_indicators(bins.transform(X)[:, ~numeric], bins.bins_per_feature_[~numeric])
    return sp.hstack([sp.csr_matrix(ranks), categories], format="csr")
