"""Released labels: what a learner trains on once the true labels have crossed the boundary.

:class:`ReleasedLabels` is the one released-labels type: the rows' released labels, their declared
classes, the ledger of the release, and the noise channel of each row, L[i, y] = Pr[row i's released
label | its label is class y], which the release's public parameters determine. It comes from a
release of a label column (:func:`~labeldp.boundary.column.privatize`, a release folder read by
:func:`~labeldp.boundary.release_folder.load_release`), from an estimator's release of private
labels, or from any :class:`~labeldp.boundary.release.Release` of labels. Everything in it is free to
use: training on it, tuning on it, scoring on it, any number of times, is post-processing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from labeldp._validation import check_priors
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.domain import class_array
from labeldp.errors import ConfigError
from labeldp.mechanisms import (
    randomized_response_likelihood,
    randomized_response_probabilities,
    rr_with_prior_likelihood,
    rr_with_prior_probabilities,
)
from labeldp.mechanisms.rr import prior_top_k

#: the mechanisms of a label column released once
RR = "randomized-response"
RR_WITH_PRIOR = "rr-with-prior"


@dataclass(frozen=True, eq=False)
class ReleasedLabels:
    """Labels released once, with what is needed to learn from them.

    Rows are selected like an array's (``released[rows]``: scikit-learn's cross-validation splits it
    with the features), and ``numpy.asarray(released)`` gives the released label values, which are
    public (a stratified split on them reads no private label).

    Parameters
    ----------
    labels : numpy.ndarray
        (n,) each row's released label, as a position in ``classes``.
    likelihood : numpy.ndarray or None
        (n, K) each row's noise channel, where it is known without the rows' priors (see :meth:`channel`).
    classes : sequence
        The declared label domain, in order.
    ledger : PrivacyLedger, optional
        The release's ledger.
    mechanism : str, optional
        ``"randomized-response"`` or ``"rr-with-prior"`` for a label column released once.
    epsilon : float, optional
        The mechanism's epsilon (the ledger's, from dp_accounting, is ``ledger.epsilon()``).
    ids : numpy.ndarray, optional
        (n,) the rows' identifiers.
    k : numpy.ndarray, optional
        (n,) RR-with-prior's k per row (the size of the prior's top set the label was released in).
    shared_prior : numpy.ndarray, optional
        (K,) the prior of every row, when one prior was shared.
    prior_columns : tuple of str, optional
        The prior's columns in the source table, when each row had its own.
    noise : str
        Where the noise came from.
    private : bool
        False for noise reproducible from an insecure seed (NOT PRIVATE).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``likelihood`` is given and is not (n, K).
    """

    labels: np.ndarray
    likelihood: np.ndarray | None
    classes: tuple
    ledger: PrivacyLedger | None = None
    mechanism: str | None = None
    epsilon: float | None = None
    ids: np.ndarray | None = None
    k: np.ndarray | None = None
    shared_prior: np.ndarray | None = None
    prior_columns: tuple[str, ...] | None = None
    noise: str = ""
    private: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", np.asarray(self.labels, dtype=np.int64))
        object.__setattr__(self, "classes", tuple(self.classes))
        if self.likelihood is not None:
            likelihood = np.asarray(self.likelihood, dtype=np.float64)
            if likelihood.shape != (self.labels.size, len(self.classes)):
                raise ConfigError(
                    f"likelihood must have shape ({self.labels.size}, {len(self.classes)}), got {likelihood.shape}"
                )
            object.__setattr__(self, "likelihood", likelihood)

    # -- an array of released labels ----------------------------------------------------------------
    @property
    def num_classes(self) -> int:
        """K, the size of the label domain.

        Returns
        -------
        int
            The number of declared classes.
        """
        return len(self.classes)

    @property
    def shape(self) -> tuple[int]:
        """The shape, as an array's.

        Returns
        -------
        tuple of int
            ``(n,)``.
        """
        return (self.labels.size,)

    def __len__(self) -> int:
        return self.labels.size

    @property
    def values(self) -> np.ndarray:
        """The released labels as class values (``classes[labels]``, in the classes' own dtype: int64 for
        integer classes, as :func:`~labeldp.boundary.domain.class_array` gives them).

        Returns
        -------
        numpy.ndarray
            (n,) the released labels' values.
        """
        return class_array(self.classes)[self.labels]

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.asarray(self.values, dtype=dtype)

    def __getitem__(self, rows: Any) -> ReleasedLabels:
        if isinstance(rows, tuple) and rows and all(part is Ellipsis for part in rows[1:]):
            rows = rows[0]  # released[rows, ...], as scikit-learn indexes arrays

        def taken(array: np.ndarray | None) -> np.ndarray | None:
            return None if array is None else array[rows]

        return dataclasses.replace(
            self, labels=self.labels[rows], likelihood=taken(self.likelihood), ids=taken(self.ids), k=taken(self.k)
        )

    # -- the noise channel ----------------------------------------------------------------------------
    def matrix(self) -> np.ndarray:
        """The (K, K) channel P[y, z] = Pr[release z | label y] shared by every row: RR's, or
        RR-with-prior's under a shared prior. Per-row priors have per-row channels: :meth:`channel`.

        Returns
        -------
        numpy.ndarray
            (K, K) float64.

        Raises
        ------
        labeldp.errors.ConfigError
            If the rows do not share one channel (RR-with-prior with a prior per row, or another mechanism).
        """
        if self.mechanism == RR:
            return randomized_response_probabilities(self.num_classes, self.epsilon)
        if self.mechanism == RR_WITH_PRIOR and self.shared_prior is not None:
            return rr_with_prior_probabilities(self.shared_prior[None, :], self.epsilon)[0]
        raise ConfigError("the rows do not share one channel: use channel()")

    def channel(self, priors: Any = None, rows: Any = None) -> np.ndarray:
        """L[i, y] = Pr[row i's released label | its label is class y], shape (m, K), for ``rows`` (an
        index or a slice; all by default).

        Parameters
        ----------
        priors : array-like, optional
            RR-with-prior with a prior per row: the (m, K) prior rows of these rows (the
            ``prior_columns`` of the source table, in this release's order); their k is checked
            against the released k. Not needed for RR, a shared prior, or a known ``likelihood``.
        rows : index or slice, optional
            The rows.

        Returns
        -------
        numpy.ndarray
            (m, K) float64.

        Raises
        ------
        ConfigError
            When the rows' priors are needed and not given, or do not give the released k.
        """
        selected = slice(None) if rows is None else rows
        labels = self.labels[selected]
        if priors is None and self.likelihood is not None:
            return self.likelihood[selected]
        if self.mechanism == RR:
            return randomized_response_likelihood(labels, self.num_classes, self.epsilon)
        if self.mechanism != RR_WITH_PRIOR:
            raise ConfigError("these released labels carry no channel")
        if priors is None:
            if self.shared_prior is None:
                raise ConfigError(
                    f"RR-with-prior's channel depends on each row's prior: pass the prior columns "
                    f"{list(self.prior_columns or ())} of these rows as priors (with_priors)"
                )
            priors = np.broadcast_to(self.shared_prior, (labels.size, self.num_classes))
        prior = check_priors(priors)
        if prior.shape != (labels.size, self.num_classes):
            raise ConfigError(f"priors must have shape ({labels.size}, {self.num_classes}), got {prior.shape}")
        if self.k is not None and not np.array_equal(prior_top_k(prior, self.epsilon)[0], self.k[selected]):
            raise ConfigError(
                "these priors give other k than the release's: not the priors of these rows, or not "
                "in this release's order"
            )
        return rr_with_prior_likelihood(labels, prior, self.epsilon)

    def with_priors(self, priors: Any) -> ReleasedLabels:
        """These labels with each row's channel computed from its prior (RR-with-prior with a prior per row).

        Parameters
        ----------
        priors : array_like
            (n, K) the rows' priors (the ``prior_columns`` of the source table, in this release's order).

        Returns
        -------
        ReleasedLabels
            A copy whose ``likelihood`` is :meth:`channel` of ``priors``.

        Raises
        ------
        labeldp.errors.ConfigError
            As :meth:`channel`: if the priors are not (n, K) distributions, or do not give the released k.
        """
        return dataclasses.replace(self, likelihood=self.channel(priors))

    @classmethod
    def from_release(cls, release: Any, classes: Sequence[Any], ledger: PrivacyLedger | None = None) -> ReleasedLabels:
        """The labels and channel of a :class:`~labeldp.boundary.release.Release` of labels.

        Parameters
        ----------
        release : Release
            A release whose ``labels`` and ``likelihood`` are given.
        classes : sequence
            The declared label domain, in order.
        ledger : PrivacyLedger or None, optional
            The release's ledger (default None).

        Returns
        -------
        ReleasedLabels
            The released labels, their channel, and the release's ``arrays["k"]`` where it has one.

        Raises
        ------
        labeldp.errors.ConfigError
            If the release holds no labels with a channel, or the channel does not have one column per class.
        """
        if release.labels is None or release.likelihood is None:
            raise ConfigError(f"this release holds no labels with a channel: {release.description}")
        return cls(release.labels, release.likelihood, classes, ledger, k=release.arrays.get("k"))

    @classmethod
    def from_noisy_source(
        cls,
        labels,
        *,
        classes: Sequence[Any],
        channel,
        stated_epsilon: float | None = None,
        ids=None,
        units=None,
    ) -> ReleasedLabels:
        """Labels randomized before labeldp saw them (event-level reports of a browser's or an operating
        system's measurement API), with the channel the source publishes: released labels any
        estimator can fit on, their ledger recording the source's guarantee
        (:func:`~labeldp.boundary.release.release_external_labels`; nothing is drawn here).

        Parameters
        ----------
        labels : array_like
            (n,) the reported labels, values of ``classes``.
        classes : sequence
            The label domain, in order (the channel's rows and columns).
        channel : array_like or str
            (K, K) M[y, z] = Pr[reported z | true y], or its words (``flip:0.1``, ``rr:1.5``, a JSON matrix;
            :func:`labeldp.mechanisms.parse_channel`).
        stated_epsilon : float or None, optional
            The epsilon the source states per label, at least its channel's (default: the channel's).
        ids : array_like or None, optional
            The rows' ids (default: positions).
        units : array_like or None, optional
            The privacy unit of each row (a user): the ledger then composes a unit's reports, and its
            epsilon is the worst unit's.

        Returns
        -------
        ReleasedLabels
            The reports, their channel and a ledger with one entry, tagged ``"source"``.

        Raises
        ------
        labeldp.errors.ConfigError
            For an invalid channel or stated epsilon.
        labeldp.errors.DataError
            If a report is not one of ``classes``.
        """
        from labeldp.boundary.domain import LabelDomain
        from labeldp.boundary.labels import PrivateLabels
        from labeldp.boundary.release import release_external_labels
        from labeldp.boundary.units import unit_codes
        from labeldp.mechanisms import parse_channel

        domain = LabelDomain(classes)
        matrix = parse_channel(channel, domain.size) if isinstance(channel, str) else channel
        reports = PrivateLabels.from_indices(domain.positions(labels, "the reported labels"), domain.size)
        ledger = PrivacyLedger(len(reports), units=None if units is None else unit_codes(units))
        release = release_external_labels(ledger, reports, np.arange(len(reports)), matrix, stated_epsilon, "source")
        return cls(
            release.labels,
            release.likelihood,
            domain.declared,
            ledger,
            mechanism="external",
            epsilon=ledger.epsilon(),
            ids=np.arange(len(reports)) if ids is None else np.asarray(ids),
        )


__all__ = ["RR", "RR_WITH_PRIOR", "ReleasedLabels"]
