"""Released labels: what a learner trains on once the true labels have crossed the boundary.

:class:`ReleasedLabels` comes from :func:`~labeldp.boundary.column.privatize`, a release folder
(:func:`load_release`), an estimator's release, or any :class:`~labeldp.boundary.release.Release` of labels.
Everything in it is free to use: training, tuning and scoring on it, any number of times, is
post-processing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labeldp._validation import check_priors
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.domain import LabelDomain, class_array
from labeldp.errors import ConfigError
from labeldp.mechanisms import (
    randomized_response_likelihood,
    randomized_response_probabilities,
    rr_with_prior_likelihood,
    rr_with_prior_probabilities,
)
from labeldp.mechanisms.rr import prior_top_k
from labeldp.tables.folder_format import LABELS_FILE, RR, RR_WITH_PRIOR, read_release


@dataclass(frozen=True, eq=False)
class ReleasedLabels:
    """Labels released once, with what is needed to learn from them.

    Rows are selected like an array's (``released[rows]``, as cross-validation splits it), and
    ``numpy.asarray(released)`` gives the released values, which are public (a stratified split on them
    reads no private label).

    Parameters
    ----------
    labels : numpy.ndarray
        (n,) each row's released label, as a position in ``classes``.
    likelihood : numpy.ndarray or None
        (n, K) each row's noise channel, L[i, y] = Pr[row i's release | its label is y], where it is known
        without the rows' priors (see :meth:`channel`).
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
        (n,) RR-with-prior's k: the size of the prior's top set each label was released in.
    shared_prior : numpy.ndarray, optional
        (K,) the prior of every row, when one prior was shared.
    prior_columns : tuple of str, optional
        The prior's columns in the source table, when each row had its own.
    noise : str
        Where the noise came from.
    private : bool
        False for noise reproducible from an insecure seed (NOT PRIVATE).
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
        """K, the number of declared classes."""
        return len(self.classes)

    @property
    def shape(self) -> tuple[int]:
        """``(n,)``, as an array's."""
        return (self.labels.size,)

    def __len__(self) -> int:
        return self.labels.size

    @property
    def values(self) -> np.ndarray:
        """The released labels as class values, in the classes' own dtype
        (:func:`~labeldp.boundary.domain.class_array`).
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
    def _mechanism_epsilon(self) -> float:
        """The epsilon RR or RR-with-prior drew these labels at, which their channel depends on."""
        if self.epsilon is None:
            raise ConfigError(f"these released labels ({self.mechanism}) record no epsilon: their channel is unknown")
        return self.epsilon

    def matrix(self) -> np.ndarray:
        """The (K, K) channel P[y, z] = Pr[release z | label y] every row shares: RR's, or RR-with-prior's under a
        shared prior; a prior per row has per-row channels (:meth:`channel`).
        """
        if self.mechanism == RR:
            return randomized_response_probabilities(self.num_classes, self._mechanism_epsilon())
        if self.mechanism == RR_WITH_PRIOR and self.shared_prior is not None:
            return rr_with_prior_probabilities(self.shared_prior[None, :], self._mechanism_epsilon())[0]
        raise ConfigError("the rows do not share one channel: use channel()")

    def channel(self, priors: Any = None, rows: Any = None) -> np.ndarray:
        """(m, K) L[i, y] = Pr[row i's released label | its label is y] for ``rows`` (all by default).

        With a prior per row (RR-with-prior), ``priors`` are the rows' (m, K) prior rows, in this release's
        order; their k is checked against the released k. Not needed for RR, a shared prior or a known
        ``likelihood``.
        """
        selected = slice(None) if rows is None else rows
        labels = self.labels[selected]
        if priors is None and self.likelihood is not None:
            return self.likelihood[selected]
        if self.mechanism == RR:
            return randomized_response_likelihood(labels, self.num_classes, self._mechanism_epsilon())
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
        epsilon = self._mechanism_epsilon()
        if self.k is not None and not np.array_equal(prior_top_k(prior, epsilon)[0], self.k[selected]):
            raise ConfigError(
                "these priors give other k than the release's: not the priors of these rows, or not "
                "in this release's order"
            )
        return rr_with_prior_likelihood(labels, prior, epsilon)

    def with_priors(self, priors: Any) -> ReleasedLabels:
        """A copy whose ``likelihood`` is :meth:`channel` of the rows' (n, K) ``priors`` (RR-with-prior with a prior
        per row).
        """
        return dataclasses.replace(self, likelihood=self.channel(priors))

    @classmethod
    def from_release(cls, release: Any, classes: Sequence[Any], ledger: PrivacyLedger | None = None) -> ReleasedLabels:
        """The labels, channel and ``arrays["k"]`` of a :class:`~labeldp.boundary.release.Release` of labels."""
        if release.labels is None or release.likelihood is None:
            raise ConfigError(f"this release holds no labels with a channel: {release.description}")
        return cls(release.labels, release.likelihood, tuple(classes), ledger, k=release.arrays.get("k"))

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
        """Labels randomized before labeldp saw them (reports of a measurement API), with the ``channel`` the
        source publishes; nothing is drawn.

        The ledger (one entry, tagged ``"source"``) records the source's guarantee, as
        :func:`~labeldp.boundary.release.release_external_labels` does. ``channel`` is (K, K) M[y, z] =
        Pr[reported z | true y] or its words (``flip:0.1``, ``rr:1.5``, a JSON matrix:
        :func:`labeldp.mechanisms.parse_channel`); ``stated_epsilon`` is at least the channel's own; with
        ``units`` the ledger composes each unit's reports.
        """
        from labeldp.boundary.labels import PrivateLabels
        from labeldp.boundary.release import release_external_labels
        from labeldp.boundary.units import unit_codes
        from labeldp.mechanisms import parse_channel

        domain = LabelDomain(classes)
        matrix = parse_channel(channel, domain.size) if isinstance(channel, str) else channel
        reports = PrivateLabels.from_indices(domain.positions(labels, "the reported labels"), domain.size)
        ledger = PrivacyLedger(len(reports), units=None if units is None else unit_codes(units))
        release = release_external_labels(ledger, reports, np.arange(len(reports)), matrix, stated_epsilon, "source")
        assert release.labels is not None  # a release of labels
        return cls(
            release.labels,
            release.likelihood,
            domain.declared,
            ledger,
            mechanism="external",
            epsilon=ledger.epsilon(),
            ids=np.arange(len(reports)) if ids is None else np.asarray(ids),
        )


def load_release(path) -> ReleasedLabels:
    """The release folder ``path`` as :class:`ReleasedLabels`, read whole into memory; costs no privacy.

    Its channel is kept where it needs no per-row prior or was written. For releases larger than memory,
    read ``labels.parquet`` in batches, and :func:`~labeldp.tables.folder_format.read_sidecar`. Raises
    :class:`~labeldp.errors.DataError` if the folder is damaged, edited, or its files disagree.
    """
    folder = Path(path)
    sidecar, ledger, table = read_release(folder)
    rows = sidecar["rows"]
    domain = LabelDomain(sidecar["classes"])
    names = sidecar["columns"]
    labels = np.empty(rows, dtype=np.int64)
    offset = 0
    for chunk in table.column(names["released_label"]).chunks:  # a row group at a time
        labels[offset : offset + len(chunk)] = domain.arrow_positions(chunk, f"{folder / LABELS_FILE}")
        offset += len(chunk)
    k = table.column(names["k"]).to_numpy().astype(np.int64) if names.get("k") else None
    likelihood = (
        np.stack([table.column(name).to_numpy() for name in names["channel"]], axis=1) if names.get("channel") else None
    )
    prior = sidecar.get("prior") or {}
    released = ReleasedLabels(
        labels,
        likelihood,
        tuple(sidecar["classes"]),
        ledger,
        mechanism=sidecar["mechanism"],
        epsilon=float(sidecar["epsilon"]),
        ids=table.column(names["id"]).to_numpy(),
        k=k,
        shared_prior=np.asarray(prior["shared"]) if "shared" in prior else None,
        prior_columns=tuple(prior["columns"]) if "columns" in prior else None,
        noise=sidecar["noise"]["description"],
        private=bool(sidecar["noise"]["private"]),
    )
    if likelihood is None and "columns" not in prior:  # the channel needs no per-row prior: kept, for the estimators
        released = dataclasses.replace(released, likelihood=released.channel())
    return released


__all__ = ["ReleasedLabels", "load_release"]
