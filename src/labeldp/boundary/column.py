"""A label column released once, in memory.

:func:`privatize` reads the true labels once, randomises them by RR or RR-with-prior block by block, and
records one entry over every row; everything computed from the
:class:`~labeldp.boundary.released.ReleasedLabels` afterwards (training, tuning, cross-validation) is
post-processing and free. Every row needs an id of its own: a duplicated id would release that row's
label twice, with independent noise, under a ledger showing one release, so it is refused, naming the id
(ids are public). On Spark or Dask, :mod:`labeldp.boundary.engines` releases a column with the same kernel.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from dp_accounting import dp_event

from labeldp._validation import check_epsilon, check_priors
from labeldp.accounting.events import randomized_response_event, rr_on_sets_event
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.domain import LabelDomain
from labeldp.boundary.labels import PrivateLabels, unseal
from labeldp.boundary.released import ReleasedLabels
from labeldp.boundary.units import bounded_rows
from labeldp.errors import ConfigError, DataError
from labeldp.mechanisms.keyed import keyed_randomized_response, keyed_rr_with_prior, row_words
from labeldp.randomness import NoiseSource
from labeldp.tables.folder_format import RR, RR_WITH_PRIOR, noise_text
from labeldp.tables.keys import refuse_duplicated, row_identities
from labeldp.tables.table_batches import DEFAULT_BATCH_ROWS

#: the noise stream of a label column's release (in the insecure mode, seeded from the insecure seed)
NOISE_STREAM = "table-release"


class KSpread:
    """RR-with-prior's k over the rows drawn so far: all its ledger event needs, k being a function of the
    row's public prior, never of its label.

    Attributes
    ----------
    range : list of int or None
        [smallest k, largest k] so far (None before any row).
    smallest_informative : int or None
        The smallest k >= 2 so far (None while there is none).
    """

    def __init__(self) -> None:
        self.range: list[int] | None = None
        self.smallest_informative: int | None = None  # the smallest k >= 2

    def add(self, k: np.ndarray) -> None:
        """Take in the k of a block of rows (at least one)."""
        low, high = int(k.min()), int(k.max())
        self.range = [low, high] if self.range is None else [min(low, self.range[0]), max(high, self.range[1])]
        informative = k[k >= 2]
        if informative.size:
            smallest = int(informative.min())
            self.smallest_informative = (
                smallest if self.smallest_informative is None else min(smallest, self.smallest_informative)
            )

    def event(self, epsilon: float) -> dp_event.DpEvent:
        """RR over the smallest k >= 2, which dominates every row
        (:func:`~labeldp.accounting.events.rr_on_sets_event`); no event if every k is 1, each released label
        being then its prior's top class.
        """
        return rr_on_sets_event(epsilon, self.smallest_informative or 1)

    def describe(self, num_classes: int, epsilon: float) -> str:
        """The ledger entry's description, saying so when every k is 1 and no privacy is spent."""
        assert self.range is not None, "describe() follows add()"
        text = f"RR-with-prior, K={num_classes}, epsilon={epsilon:g}, k in [{self.range[0]}, {self.range[1]}]"
        if self.smallest_informative is None:
            text += (
                ": k = 1 for every row, each released label is its prior's top class, so the release does not "
                "depend on any label (no privacy spent)"
            )
        return text


class Draws:
    """Draws block after block under one key, remembering what the ledger needs (the spread of k, which
    depends on the public priors only).

    Parameters
    ----------
    num_classes : int
        K, the number of classes.
    epsilon : float
        Each label's epsilon (checked by the caller).
    with_prior : bool
        RR-with-prior (True) or RR over the K classes (False).
    noise : NoiseSource
        The noise source; the draws come from its stream :data:`NOISE_STREAM`.

    Attributes
    ----------
    key : bytes
        The key every row's draw is a function of, with its id.
    k_spread : KSpread or None
        The spread of k drawn so far (None for RR).
    """

    def __init__(self, num_classes: int, epsilon: float, with_prior: bool, noise: NoiseSource):
        if not isinstance(noise, NoiseSource):
            raise ConfigError(f"noise must be a labeldp.randomness.NoiseSource, got {type(noise).__name__}")
        self.num_classes, self.epsilon = num_classes, epsilon
        self.key = noise.key(NOISE_STREAM)  # held here alone, never written
        self.k_spread = KSpread() if with_prior else None

    def draw(self, positions: np.ndarray, priors: np.ndarray | None, ids) -> tuple[np.ndarray, np.ndarray | None]:
        """Release one block of true class positions: RR, or RR-with-prior with the rows' ``priors``, each row's
        draw a function of the key and its id (:mod:`labeldp.mechanisms.keyed`: a block drawn again is the
        same release); returns the released positions and RR-with-prior's k (None for RR).

        Each label is epsilon-label-DP (RR-with-prior: when its prior does not depend on its own label) while
        the ids are distinct; nothing is recorded here: :meth:`ledger` records one entry over every row drawn.
        """
        words = row_words(self.key, row_identities(ids))
        if self.k_spread is None:
            return keyed_randomized_response(positions, self.num_classes, self.epsilon, words), None
        noisy, k = keyed_rr_with_prior(positions, priors, self.epsilon, words)
        self.k_spread.add(k)
        return noisy, k

    def ledger(self, rows: int, units: np.ndarray | None = None) -> PrivacyLedger:
        """The release's ledger once every block is drawn: one entry over all ``rows`` (``units``: each row's
        privacy unit; None: each row its own).
        """
        return release_ledger(rows, self.epsilon, self.num_classes, self.k_spread, units)


def release_ledger(
    rows: int, epsilon: float, num_classes: int, k_spread: KSpread | None, units: np.ndarray | None = None
) -> PrivacyLedger:
    """A new ledger of ``rows`` rows with one entry tagged ``"release"``: RR over the K classes, or
    RR-with-prior's event (``k_spread``).
    """
    ledger = PrivacyLedger(rows, units=units)
    if k_spread is None:
        event, description = (
            randomized_response_event(epsilon, num_classes),
            f"randomized response, K={num_classes}, epsilon={epsilon:g}",
        )
    else:
        event, description = k_spread.event(epsilon), k_spread.describe(num_classes, epsilon)
    ledger.record(event, np.broadcast_to(True, rows), description, "release")  # every row: one value
    return ledger


def prior_spec(num_classes: int, prior_columns, prior) -> tuple[tuple[str, ...] | None, np.ndarray | None]:
    """RR-with-prior's prior as given to a release: a table's K ``prior_columns`` in the classes' order, one
    shared (K,) ``prior``, or neither (RR); returns (columns, shared).
    """
    if prior_columns is not None and prior is not None:
        raise ConfigError("give the prior either as prior columns (one per class) or as one shared prior, not both")
    if prior_columns is not None:
        columns = (prior_columns,) if isinstance(prior_columns, str) else tuple(prior_columns)
        if len(columns) != num_classes or len(set(columns)) != num_classes:
            raise ConfigError(
                f"prior columns must be {num_classes} distinct columns, one per class in the classes' "
                f"order; got {list(columns)}"
            )
        return columns, None
    if prior is not None:
        shared = np.asarray(prior, dtype=np.float64)
        if shared.shape != (num_classes,):
            raise ConfigError(
                f"a shared prior must have one probability per class ({num_classes}), got shape {shared.shape}"
            )
        return None, check_priors(shared[None, :])[0]
    return None, None


def privatize(
    labels,
    *,
    classes: Sequence[Any],
    epsilon: float,
    priors=None,
    ids=None,
    noise: NoiseSource = NoiseSource(),
    batch_rows: int = DEFAULT_BATCH_ROWS,
    units=None,
    max_rows_per_unit: int | None = None,
    seed: int = 0,
    dataset_name: str | None = None,
) -> ReleasedLabels:
    """Release ``labels`` once, by RR or RR-with-prior: each label epsilon-label-DP (RR-with-prior: when the
    priors do not depend on the rows' own labels), recorded as one entry over every row.

    ``labels`` are :class:`~labeldp.boundary.labels.PrivateLabels`, which also record the release on their
    own ledger and are refused if their rows were released before (unless their budget allows it), or class
    values, read here and nowhere else. With an insecure seed the release is NOT PRIVATE, and says so.
    Every argument is checked before anything is drawn; a label outside ``classes`` is neither named nor
    counted.

    Parameters
    ----------
    classes : sequence
        The label domain, in order: public, declared, never read off the labels.
    priors : array_like or pandas.DataFrame or None, optional
        None for RR; for RR-with-prior a (K,) prior shared by every row or (n, K) rows, each a distribution
        over ``classes`` that depends on neither the row's own label nor, with ``units``, any label of its unit.
    ids : array_like or None, optional
        One distinct id per label, kept beside the release (default: the Series' index, or the positions).
    batch_rows : int, optional
        Rows drawn at a time; with an insecure seed, :func:`privatize_table` with the same ``batch_rows``
        draws the same labels.
    units, max_rows_per_unit, seed : optional
        Each row's public privacy unit (e.g. a user id; label arrays only), the most rows of a unit kept, and
        the public seed choosing them without reading a label
        (:func:`~labeldp.boundary.units.bound_contributions`). Epsilon is then each unit's: a unit's kept rows
        get epsilon / c each, c the most rows a unit keeps; the release holds the kept rows only (its ``ids``).
    dataset_name : str or None, optional
        Label values' dataset: the release joins its ledger across runs, as ``PrivateLabels(labels, classes,
        dataset=dataset_name)``'s do (``docs/dataset-ledger.md``); without units.

    Returns
    -------
    ReleasedLabels
        The released labels, their ids, k (RR-with-prior), ledger, and channel except with a prior per row
        (:meth:`~labeldp.boundary.released.ReleasedLabels.with_priors`).
    """
    domain = LabelDomain(classes)
    eps = check_epsilon(epsilon)
    if dataset_name is not None:
        if isinstance(labels, PrivateLabels) or units is not None:
            raise ConfigError(
                "dataset_name names label values' dataset, without units: private labels are named where they are "
                "wrapped, PrivateLabels(labels, classes, dataset=NAME); a table's units by privatize_table"
            )
        named = PrivateLabels(labels, domain.declared, dataset=dataset_name)
        row_ids = _row_ids(labels, ids, len(labels))
        return privatize(
            named, classes=classes, epsilon=eps, priors=priors, ids=row_ids, noise=noise, batch_rows=batch_rows
        )
    if units is not None or max_rows_per_unit is not None:
        return _privatize_units(labels, domain, eps, priors, ids, noise, batch_rows, units, max_rows_per_unit, seed)
    if not isinstance(labels, PrivateLabels):
        return _privatize_positions(
            _wrapped(labels, domain),
            domain,
            eps,
            priors,
            _row_ids(labels, ids, len(labels)),
            noise,
            batch_rows,
        )
    if (
        labels.is_numeric
        or labels.num_classes != domain.size
        or (labels.classes is not None and not domain.same_as(labels.classes))
    ):
        raise ConfigError(f"the private labels' classes are not {list(domain.declared)}")
    row_ids = _row_ids(None, ids, len(labels))
    bound = randomized_response_event(eps, domain.size if priors is None else 2)  # RR over 2 dominates any k >= 2

    def draw(view: PrivateLabels, ledger: PrivacyLedger) -> ReleasedLabels:
        release = _privatize_positions(view, domain, eps, priors, row_ids, noise, batch_rows)
        assert release.ledger is not None  # the draws' ledger
        for entry in release.ledger.entries:
            ledger.record(entry.event, entry.members, entry.description, entry.tag)
        return release

    return labels.release_new(bound, draw)


def _privatize_units(
    labels, domain: LabelDomain, eps: float, priors, ids, noise, batch_rows: int, units, max_rows: int | None, seed: int
) -> ReleasedLabels:
    """:func:`privatize` with privacy units: the rows kept, each released with epsilon / c."""
    if units is None or max_rows is None:
        raise ConfigError("privacy units need both units (one per row) and max_rows_per_unit (the most rows kept)")
    if isinstance(labels, PrivateLabels):
        raise ConfigError("privacy units are given with the labels as values: pass the label array, not PrivateLabels")
    private = _wrapped(labels, domain)
    row_ids = _row_ids(labels, ids, len(private))
    if np.shape(units) != (len(private),):
        raise ConfigError(f"units must hold one value per label ({len(private)}), got shape {np.shape(units)}")
    kept, kept_units, most_rows = bounded_rows(units, max_rows, seed)
    per_row = eps / most_rows
    if priors is not None and np.ndim(priors) == 2:
        priors = priors.iloc[kept] if isinstance(priors, pd.DataFrame) else np.asarray(priors)[kept]
    return _privatize_positions(private[kept], domain, per_row, priors, row_ids[kept], noise, batch_rows, kept_units)


def _wrapped(labels, domain: LabelDomain) -> PrivateLabels:
    """A user's class values as private labels over ``domain``, at the line that reads them."""
    return PrivateLabels.from_indices(domain.positions(labels, "the labels"), domain.size, domain.declared)


def _privatize_positions(
    labels: PrivateLabels,
    domain: LabelDomain,
    eps: float,
    priors,
    ids: np.ndarray,
    noise: NoiseSource,
    batch_rows: int,
    units: np.ndarray | None = None,
) -> ReleasedLabels:
    """:func:`privatize` on private labels (the kept rows, with ``units``): read here, drawn block by block."""
    positions = unseal(labels)
    rows = positions.size
    shared, per_row = None, None
    if priors is not None:
        array = np.asarray(priors.to_numpy() if isinstance(priors, pd.DataFrame) else priors, dtype=np.float64)
        if array.ndim == 1:
            shared = prior_spec(domain.size, None, array)[1]
        else:
            per_row = check_priors(array)
            if per_row.shape != (rows, domain.size):
                raise ConfigError(
                    f"priors must have shape ({rows}, {domain.size}) (rows, classes), got {per_row.shape}"
                )
    block = check_batch_rows(batch_rows)
    draws = Draws(domain.size, eps, priors is not None, noise)
    noisy = np.empty(rows, dtype=np.int64)
    k = np.empty(rows, dtype=np.int64) if priors is not None else None
    for start in range(0, rows, block):
        stop = min(start + block, rows)
        prior = (
            per_row[start:stop]
            if per_row is not None
            else (np.broadcast_to(shared, (stop - start, domain.size)) if shared is not None else None)
        )
        noisy[start:stop], drawn_k = draws.draw(positions[start:stop], prior, ids[start:stop])
        if k is not None and drawn_k is not None:  # both with a prior, neither without
            k[start:stop] = drawn_k
    mechanism = RR_WITH_PRIOR if priors is not None else RR
    released = ReleasedLabels(
        noisy,
        None,
        domain.declared,
        draws.ledger(rows, units),
        mechanism=mechanism,
        epsilon=eps,
        ids=ids,
        k=k,
        shared_prior=shared,
        noise=noise_text(noise),
        private=noise.private,
    )
    # the channel where it needs no per-row prior (RR, a shared prior): kept, for the estimators
    return released if per_row is not None else dataclasses.replace(released, likelihood=released.channel())


def _row_ids(labels, ids, rows: int) -> np.ndarray:
    """The released rows' ids (``ids``, else the Series' index, else positions), a duplicate refused."""
    if ids is None:
        if not isinstance(labels, pd.Series):
            return np.arange(rows)
        if not labels.index.is_unique:
            raise DataError(
                "the labels' index, which would be their ids, has duplicated values: pass ids=, one "
                "distinct id per label; nothing was released"
            )
        return labels.index.to_numpy()
    array = np.asarray(ids)
    if array.shape != (rows,):
        raise ConfigError(f"ids must have one value per label ({rows}), got shape {array.shape}")
    refuse_duplicated(array, "ids")
    return array


def check_batch_rows(batch_rows: int) -> int:
    """``batch_rows`` as an int, refused unless a positive integer (a bool is refused)."""
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, (int, np.integer)) or batch_rows < 1:
        raise ConfigError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    return int(batch_rows)


__all__ = ["privatize"]
