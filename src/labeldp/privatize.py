"""Release a label column once, in memory or out of core, so that any learner can train on it.

"Release once, then tune for free": the true labels are read here once, randomised by RR or
RR-with-prior (:mod:`labeldp.mechanisms`), and recorded on a :class:`~labeldp.accounting.PrivacyLedger`
as one entry over every row. Everything computed from the release afterwards (training any model,
tuning, cross-validation, any number of times) is post-processing and costs no more privacy.

- :func:`privatize` releases labels held in memory (numpy or pandas) and returns a :class:`LabelRelease`.
- :func:`privatize_table` streams a Parquet file, a Parquet dataset folder or a folder of Parquet and
  CSV files in blocks of ``batch_rows`` rows (one pass for the release, after a first pass over the
  label and id columns that checks every label against the declared classes and every id for
  duplicates) and writes a release folder:

  ``labels.parquet``
      one row per input row, in input order: the id column (copied), ``released_label`` (a value of
      the declared classes), ``k`` (RR-with-prior) and, on request, ``channel_0 .. channel_{K-1}``
      (the row's noise channel, below);
  ``release.json``
      the sidecar: classes, mechanism, epsilon, the prior's columns (or the shared prior), the noise
      channel (the K x K matrix where it is one), the noise source, the ledger's epsilon and entry;
  ``ledger.json``
      the :class:`~labeldp.accounting.PrivacyLedger` (members: row positions in ``labels.parquet``).

- :func:`load_release` reads a release folder back as a :class:`LabelRelease`.

**Label types.** Labels are matched to the declared classes as text (``1``, ``1.0`` and ``true`` are
one class), each file's labels in their own type: they are never cast to another file's type. A CSV
or TSV file's label column is read as text, as written: pyarrow would otherwise infer its type from
the first block's values, so that one private label could decide it (and a later label that does not
fit would fail the read, quoted in the error). ``released_label`` is written in one type that depends
on no label value: the label column's declared type when every file declares one (Parquet files; an
in-memory table or pyarrow dataset: its schema's; a DataFrame: its dtype's, a column of Python objects
being read as text), and string as soon as one file is CSV or TSV (the classes in ``release.json``
are then strings too). A pyarrow Dataset is read with its own schema: over CSV files, give its label
column the string type (``ConvertOptions(column_types=...)``). pyarrow's own message for a CSV file
it cannot read is withheld (it can quote a row, its label included).

**Each row once.** Every row must have an id of its own: a duplicated id (a stray copy of a part file,
or ``events.csv`` beside its Parquet conversion, in the folder) would release that row's label twice,
with independent noise, under a ledger that shows one release. The first pass refuses it
(:class:`~labeldp.errors.DataError`, naming one duplicated id: ids are public), keeping 8 bytes a row:
integer ids as int64, compared exactly, other ids as 64-bit hashes, where hashes collide compared
exactly by a further scan of the id column, so that a collision never refuses a valid table.
:func:`privatize` and :func:`table_ledger` refuse duplicated ids too (and :func:`privatize` a pandas
index with duplicates, when it stands for the ids).

The noise channel of row i is L[i, y] = Pr[the released label of row i | its true label is class y].
For RR it is the same for every row, :meth:`LabelRelease.matrix`; for RR-with-prior it depends on the
row's (public) prior and its released label: :meth:`LabelRelease.channel` recomputes it
(:func:`~labeldp.mechanisms.rr_with_prior_likelihood`) from the prior columns.

**Release once.** A release folder is never overwritten (:class:`~labeldp.errors.ReleaseExistsError`):
releasing the labels again would spend their budget a second time. The folder is written under a
hidden name (``.OUT.partial``, readable by its owner only) and renamed into place, complete, after its
files are flushed to disk; a lock (``.OUT.lock`` beside ``out``) keeps a second process out meanwhile.
The lock file is never removed (removing it while held would let two processes lock two files of the
same name, and both draw): empty, it stays beside the release, harmless. An error or an interrupt
removes the partial folder; a process killed outright leaves it behind, unreadable as a release (no
``release.json``, a Parquet file without its footer), and the next ``privatize_table`` to the same
``out`` deletes it unread before it draws.

**Noise** comes only from a :class:`~labeldp.randomness.NoiseSource`: fresh OS entropy by default,
ChaCha20 with ``secure=True``, or ``insecure_seed`` (tests only: the sidecar then says NOT PRIVATE).
What is written depends on the labels only through the mechanism's output: no count, histogram or
other statistic of the labels is computed or written, and the error for a label outside the classes
says neither which label nor how many.

A Spark or Dask job can apply the same mechanisms per partition instead (``examples/privatize_with_dask.py``):
the release is then one ledger entry over all rows, which :func:`table_ledger` records from the rows'
ids and, for RR-with-prior, their k (RR over the smallest k >= 2, which dominates every row).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.dataset as ds
import pyarrow.parquet as pq
from dp_accounting import dp_event

from labeldp import __version__
from labeldp._validation import canonical_label, check_epsilon, check_num_classes, check_priors
from labeldp.accounting.events import randomized_response_event
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.errors import ConfigError, DataError, MissingFileError, ReleaseExistsError, RunLockedError
from labeldp.files import write_json_atomic
from labeldp.mechanisms import (randomized_response, randomized_response_likelihood,
                                randomized_response_probabilities, rr_with_prior, rr_with_prior_likelihood,
                                rr_with_prior_probabilities)
from labeldp.mechanisms.rr import prior_top_k
from labeldp.private_labels import PrivateLabels, unseal
from labeldp.randomness import NoiseSource

FORMAT = "labeldp label release"
FORMAT_VERSION = 1
LABELS_FILE = "labels.parquet"
SIDECAR_FILE = "release.json"
LEDGER_FILE = "ledger.json"
#: the columns of ``labels.parquet`` besides the id column
RELEASED_COLUMN = "released_label"
K_COLUMN = "k"
CHANNEL_PREFIX = "channel_"
RR = "randomized-response"
RR_WITH_PRIOR = "rr-with-prior"
#: rows drawn (and written, as one Parquet row group) at a time; they set the memory the release
#: pass uses, about 60 bytes a row plus 8 a class for RR-with-prior's priors (the first pass keeps 8
#: bytes for every row of the table, to check that the ids are distinct)
DEFAULT_BATCH_ROWS = 1 << 20
#: the noise stream of a table release (in the insecure mode, seeded from the insecure seed)
NOISE_STREAM = "table-release"
_READ_ROWS = 1 << 16  # rows per batch read from a file
_COLLISIONS_PER_SCAN = 1 << 10  # colliding id hashes checked exactly per scan of the id column
_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".parq": "parquet", ".csv": "csv", ".tsv": "tsv"}


# ----------------------------------------------------------------------------------------------------
# The released object


@dataclass(frozen=True, eq=False)
class LabelRelease:
    """A label column released once: everything a learner needs, all of it free to use.

    Attributes:
        labels: (n,) int64, each row's released label as a position in ``classes``.
        classes: the declared label domain, in order (values in the label column's type).
        epsilon: the mechanism's epsilon (the ledger's, from dp_accounting, is ``ledger.epsilon()``).
        mechanism: ``"randomized-response"`` or ``"rr-with-prior"``.
        ledger: the privacy ledger: one entry over all n rows.
        ids: (n,) the rows' identifiers (positions, or the pandas index, when none were given).
        k: (n,) RR-with-prior's k per row (the size of the prior's top set the label was released in).
        shared_prior: (K,) the prior of every row, when one prior was shared.
        prior_columns: the prior's columns in the source table, when each row had its own.
        noise: where the noise came from; ``private`` is False for an insecure seed (NOT PRIVATE).
        likelihood: (n, K) the noise channel read from a release written with its channel columns.
    """

    labels: np.ndarray
    classes: tuple
    epsilon: float
    mechanism: str
    ledger: PrivacyLedger
    ids: np.ndarray
    k: np.ndarray | None = None
    shared_prior: np.ndarray | None = None
    prior_columns: tuple[str, ...] | None = None
    noise: str = ""
    private: bool = True
    likelihood: np.ndarray | None = None

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    @property
    def values(self) -> np.ndarray:
        """The released labels as class values (``classes[labels]``)."""
        return np.asarray(self.classes)[self.labels]

    def matrix(self) -> np.ndarray:
        """The (K, K) channel P[y, z] = Pr[release z | true label y], shared by every row: RR's, or
        RR-with-prior's under a shared prior. Per-row priors have per-row channels: :meth:`channel`."""
        if self.mechanism == RR:
            return randomized_response_probabilities(self.num_classes, self.epsilon)
        if self.shared_prior is not None:
            return rr_with_prior_probabilities(self.shared_prior[None, :], self.epsilon)[0]
        raise ConfigError("each row has its own prior, hence its own channel: use channel(priors)")

    def channel(self, priors=None, rows=None) -> np.ndarray:
        """L[i, y] = Pr[row i's released label | its true label is class y], shape (m, K), for the rows
        ``rows`` (an index or slice; all by default).

        RR and a shared prior need nothing more. Per-row priors need ``priors``: the (m, K) prior
        rows of those rows (the ``prior_columns`` of the source table, in this release's order);
        their k is checked against the released k. A release written with its channel columns
        returns them."""
        selected = slice(None) if rows is None else rows
        labels = self.labels[selected]
        if self.mechanism == RR:
            return randomized_response_likelihood(labels, self.num_classes, self.epsilon)
        if priors is None:
            if self.likelihood is not None:
                return self.likelihood[selected]
            if self.shared_prior is None:
                raise ConfigError(f"RR-with-prior's channel depends on each row's prior: pass the prior columns "
                                  f"{list(self.prior_columns or ())} of these rows as priors")
            priors = np.broadcast_to(self.shared_prior, (labels.size, self.num_classes))
        prior = check_priors(priors)
        if prior.shape != (labels.size, self.num_classes):
            raise ConfigError(f"priors must have shape ({labels.size}, {self.num_classes}), got {prior.shape}")
        if self.k is not None and not np.array_equal(prior_top_k(prior, self.epsilon)[0], self.k[selected]):
            raise ConfigError("these priors give other k than the release's: not the priors of these rows, or not "
                              "in this release's order")
        return rr_with_prior_likelihood(labels, prior, self.epsilon)


# ----------------------------------------------------------------------------------------------------
# The label domain


class _Domain:
    """The declared classes, matched to label values as text (``1``, ``1.0`` and ``true`` are one
    value, as for ``labeldp train --classes``)."""

    def __init__(self, classes: Iterable[Any]):
        if isinstance(classes, (str, bytes)) or classes is None:
            raise ConfigError("classes must be a sequence of label values (the public label domain, in order)")
        self.declared = tuple(_plain(value) for value in classes)
        spellings = [canonical_label(value) for value in self.declared]
        if len(spellings) < 2 or len(set(spellings)) != len(spellings):
            raise ConfigError(f"classes must be at least two distinct label values, got {list(self.declared)}")
        self.lookup = {spelling: position for position, spelling in enumerate(spellings)}

    @property
    def size(self) -> int:
        return len(self.declared)

    def positions(self, values: Sequence[Any], where: str) -> np.ndarray:
        """The class position of each (distinct) value; a value outside the classes is an error that
        names neither the value nor how many there are (both depend on private labels)."""
        positions = np.empty(len(values), dtype=np.int64)
        for index, value in enumerate(values):
            position = self.lookup.get(canonical_label(value))
            if position is None:
                raise DataError(f"{where} has labels outside the declared classes {list(self.declared)}; declare "
                                "every label value (--classes); nothing was released")
            positions[index] = position
        return positions

    def arrow_indices(self, column: pa.Array | pa.ChunkedArray, where: str) -> np.ndarray:
        """Class positions (int64) of an Arrow label column."""
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.null_count:
            raise DataError(f"{where} has missing labels; nothing was released")
        if pa.types.is_dictionary(column.type):
            column = column.cast(column.type.value_type)
        encoded = pc.dictionary_encode(column)
        positions = self.positions(encoded.dictionary.to_pylist(), where)
        return positions[encoded.indices.to_numpy(zero_copy_only=False)]

    def array_indices(self, labels, where: str) -> np.ndarray:
        """Class positions (int64) of labels held in memory (numpy, pandas, a list)."""
        series = labels if isinstance(labels, pd.Series) else pd.Series(np.asarray(labels, dtype=object)
                                                                         if np.ndim(labels) == 1 else labels)
        if series.ndim != 1 or len(series) == 0:
            raise ConfigError("labels must be a non-empty 1-d array or Series")
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        if (codes < 0).any():
            raise DataError(f"{where} has missing labels; nothing was released")
        return self.positions(list(uniques), where)[codes]

    def arrow_values(self, value_type: pa.DataType, column: str) -> pa.Array:
        """The classes as values of ``value_type``, the type ``released_label`` is written in."""
        values = []
        for declared in self.declared:
            spelling = canonical_label(declared)
            try:
                if pa.types.is_integer(value_type):
                    value = int(spelling)
                elif pa.types.is_floating(value_type):
                    value = float(spelling)
                elif pa.types.is_boolean(value_type):
                    value = {"1": True, "0": False}[spelling]
                elif pa.types.is_string(value_type) or pa.types.is_large_string(value_type):
                    value = str(declared)
                else:
                    raise ConfigError(f"label column {column!r} has type {value_type}: privatize releases integer, "
                                      "floating-point, boolean or string labels")
                values.append(value)
            except (ValueError, KeyError):
                raise ConfigError(f"class {declared!r} is not a value of label column {column!r} ({value_type})") from None
        try:
            return pa.array(values, type=value_type)
        except (pa.ArrowInvalid, OverflowError) as error:
            raise ConfigError(f"the classes do not fit label column {column!r} ({value_type}): {error}") from None


def _plain(value: Any) -> Any:
    """numpy scalars as Python values (for JSON)."""
    return value.item() if isinstance(value, np.generic) else value


# ----------------------------------------------------------------------------------------------------
# Drawing: the one place the true labels meet the noise


class _KSpread:
    """RR-with-prior's k over the rows drawn so far, all that its ledger event needs: k is a function
    of the row's (public) prior, never of its label."""

    def __init__(self) -> None:
        self.range: list[int] | None = None
        self.smallest_informative: int | None = None  # the smallest k >= 2

    def add(self, k: np.ndarray) -> None:
        low, high = int(k.min()), int(k.max())
        self.range = [low, high] if self.range is None else [min(low, self.range[0]), max(high, self.range[1])]
        informative = k[k >= 2]
        if informative.size:
            smallest = int(informative.min())
            self.smallest_informative = (smallest if self.smallest_informative is None
                                         else min(smallest, self.smallest_informative))

    def event(self, epsilon: float) -> dp_event.DpEvent:
        """RR over the smallest k >= 2, which dominates every row: RR's privacy loss at a fixed epsilon
        decreases in k (the accounting of :func:`labeldp.release.release_rr_with_prior`). Without a
        k >= 2 every released label is its prior's top class, a function of no label: no event."""
        return randomized_response_event(epsilon, self.smallest_informative or 1)

    def describe(self, num_classes: int, epsilon: float) -> str:
        text = f"RR-with-prior, K={num_classes}, epsilon={epsilon:g}, k in [{self.range[0]}, {self.range[1]}]"
        if self.smallest_informative is None:
            text += (": k = 1 for every row, each released label is its prior's top class, so the release does not "
                     "depend on any label (no privacy spent)")
        return text


class _Draws:
    """Draws block after block from one generator and remembers what the ledger needs (the spread of
    k, which depends on the public priors only)."""

    def __init__(self, num_classes: int, epsilon: float, with_prior: bool, noise: NoiseSource):
        if not isinstance(noise, NoiseSource):
            raise ConfigError(f"noise must be a labeldp.randomness.NoiseSource, got {type(noise).__name__}")
        self.num_classes, self.epsilon = num_classes, epsilon
        self.generator = noise.generator(NOISE_STREAM)
        self.k_spread = _KSpread() if with_prior else None

    def draw(self, positions: np.ndarray, priors: np.ndarray | None) -> tuple[np.ndarray, np.ndarray | None]:
        if self.k_spread is None:
            return randomized_response(positions, self.num_classes, self.epsilon, self.generator), None
        noisy, k = rr_with_prior(positions, priors, self.epsilon, self.generator)
        self.k_spread.add(k)
        return noisy, k

    def ledger(self, rows: int) -> PrivacyLedger:
        return _release_ledger(rows, self.epsilon, self.num_classes, self.k_spread)


def table_ledger(ids, epsilon: float, num_classes: int, k=None) -> PrivacyLedger:
    """The ledger of one label column released once: one entry over every row. Use it for a release
    drawn elsewhere, e.g. per partition in Spark or Dask, and build it before anything is drawn: it
    reads public data only, and refuses what would make the release a double spend.

    Args:
        ids: (n,) the rows' ids, one per released label. A duplicated id is refused
            (:class:`~labeldp.errors.DataError`): that row's label would be released twice, with
            independent noise, under a ledger that shows one release.
        epsilon: each label's privacy budget.
        num_classes: K, the number of declared classes.
        k: None for RR, recorded as RR over the K classes. For RR-with-prior, (n,) each row's k, as
            :func:`~labeldp.mechanisms.rr_with_prior` returns it (or
            :func:`~labeldp.mechanisms.prior_top_k` computes it from the priors, before drawing). The
            event is computed from it: RR over the smallest k >= 2, which dominates every row; when
            every k is 1 no released label depends on a label, and the entry says so (a no-op event).
    """
    eps = check_epsilon(epsilon)
    classes = check_num_classes(num_classes)
    identifiers = np.asarray(ids)
    if identifiers.ndim != 1 or identifiers.size == 0:
        raise ConfigError(f"ids must be a non-empty 1-d array (one id per row), got shape {identifiers.shape}")
    _refuse_duplicated(identifiers, "ids", after="")
    spread = None
    if k is not None:
        spread = _KSpread()
        spread.add(_check_k(k, identifiers.size, classes))
    return _release_ledger(identifiers.size, eps, classes, spread)


def _check_k(k, rows: int, num_classes: int) -> np.ndarray:
    array = np.asarray(k)
    if array.shape != (rows,) or not np.issubdtype(array.dtype, np.integer):
        raise ConfigError(f"k must hold one k per row ({rows} integers), got {array.dtype} of shape {array.shape}")
    if array.min() < 1 or array.max() > num_classes:
        raise ConfigError(f"each k must lie between 1 and {num_classes} (the number of classes)")
    return array


def _release_ledger(rows: int, epsilon: float, num_classes: int, k_spread: _KSpread | None) -> PrivacyLedger:
    """One entry over all ``rows`` rows: RR over the K classes, or RR-with-prior's event (``k_spread``)."""
    ledger = PrivacyLedger(rows)
    if k_spread is None:
        event, description = (randomized_response_event(epsilon, num_classes),
                              f"randomized response, K={num_classes}, epsilon={epsilon:g}")
    else:
        event, description = k_spread.event(epsilon), k_spread.describe(num_classes, epsilon)
    ledger.record(event, np.ones(rows, dtype=bool), description, "release")
    return ledger


def _refuse_duplicated(ids: np.ndarray, where: str, after: str = "; nothing was released") -> None:
    """Refuse ids held in memory (exact comparison) if one occurs twice."""
    index = pd.Index(ids)
    if not index.is_unique:
        raise _duplicated_ids_error(where, index[index.duplicated()][0], after)


def _duplicated_ids_error(where: str, example: Any, after: str = "; nothing was released") -> DataError:
    """The error for a duplicated id; it names that id (ids are public), never a label."""
    return DataError(
        f"{where} has duplicated values ({_plain(example)!r} at least twice): each row needs an id of its own, or its "
        "label would be released twice, with independent noise, under a ledger that shows one release. Rows read "
        "twice usually come from a stray copy of a file, or the same file in a second format (events.csv beside "
        f"events.parquet), in the table's folder: remove it{after}")


def _prior_spec(num_classes: int, prior_columns, prior) -> tuple[tuple[str, ...] | None, np.ndarray | None]:
    if prior_columns is not None and prior is not None:
        raise ConfigError("give the prior either as prior columns (one per class) or as one shared prior, not both")
    if prior_columns is not None:
        columns = (prior_columns,) if isinstance(prior_columns, str) else tuple(prior_columns)
        if len(columns) != num_classes or len(set(columns)) != num_classes:
            raise ConfigError(f"prior columns must be {num_classes} distinct columns, one per class in the classes' "
                              f"order; got {list(columns)}")
        return columns, None
    if prior is not None:
        shared = np.asarray(prior, dtype=np.float64)
        if shared.shape != (num_classes,):
            raise ConfigError(f"a shared prior must have one probability per class ({num_classes}), got shape {shared.shape}")
        return None, check_priors(shared[None, :])[0]
    return None, None


# ----------------------------------------------------------------------------------------------------
# In memory


def privatize(labels, *, classes: Sequence[Any], epsilon: float, priors=None, ids=None,
              noise: NoiseSource = NoiseSource(), batch_rows: int = DEFAULT_BATCH_ROWS) -> LabelRelease:
    """Release ``labels`` once, by RR or RR-with-prior: :class:`~labeldp.private_labels.PrivateLabels`,
    or the true labels as class values (numpy, pandas or a list), which are read here and nowhere else.

    Args:
        classes: the label domain, in order: public, declared, never read off the labels. A label
            outside it (or a missing one) is an error raised before anything is drawn.
        epsilon: each label's privacy budget.
        priors: None for RR; for RR-with-prior a (K,) prior shared by every row or (n, K) rows (an
            array or DataFrame), each a distribution over ``classes`` that does not depend on the
            row's own label (e.g. computed from public inputs, or a model trained on other rows).
        ids: row identifiers to keep beside the released labels (default: the Series' index, or the
            positions), one distinct id per label: a duplicated id (or index value) is refused.
        noise: the noise source (fresh OS entropy by default).
        batch_rows: rows drawn at a time; with an insecure seed, :func:`privatize_table` with the
            same ``batch_rows`` draws the same labels.

    Private labels record the release on their own ledger too, and are refused (before anything is
    drawn) if their rows were released before, unless their budget allows it.
    """
    domain = _Domain(classes)
    eps = check_epsilon(epsilon)
    if not isinstance(labels, PrivateLabels):
        return _privatize_positions(domain.array_indices(labels, "labels"), domain, eps, priors,
                                    _row_ids(labels, ids, len(labels)), noise, batch_rows)
    if labels.is_numeric or labels.num_classes != domain.size or (
            labels.classes is not None and list(map(canonical_label, labels.classes)) != list(domain.lookup)):
        raise ConfigError(f"the private labels' classes are not {list(domain.declared)}")
    row_ids = _row_ids(None, ids, len(labels))
    bound = randomized_response_event(eps, domain.size if priors is None else 2)  # RR over 2 dominates any k >= 2

    def draw(view: PrivateLabels, ledger: PrivacyLedger) -> LabelRelease:
        release = _privatize_positions(unseal(view), domain, eps, priors, row_ids, noise, batch_rows)
        for entry in release.ledger.entries:
            ledger.record(entry.event, entry.members, entry.description, entry.tag)
        return release

    return labels.release_new(bound, draw)


def _privatize_positions(positions: np.ndarray, domain: _Domain, eps: float, priors, ids: np.ndarray,
                         noise: NoiseSource, batch_rows: int) -> LabelRelease:
    """:func:`privatize` on the labels' class positions."""
    rows = positions.size
    shared, per_row = None, None
    if priors is not None:
        array = np.asarray(priors.to_numpy() if isinstance(priors, pd.DataFrame) else priors, dtype=np.float64)
        if array.ndim == 1:
            shared = _prior_spec(domain.size, None, array)[1]
        else:
            per_row = check_priors(array)
            if per_row.shape != (rows, domain.size):
                raise ConfigError(f"priors must have shape ({rows}, {domain.size}) (rows, classes), got {per_row.shape}")
    block = _check_batch_rows(batch_rows)
    draws = _Draws(domain.size, eps, priors is not None, noise)
    noisy = np.empty(rows, dtype=np.int64)
    k = np.empty(rows, dtype=np.int64) if priors is not None else None
    for start in range(0, rows, block):
        stop = min(start + block, rows)
        prior = per_row[start:stop] if per_row is not None else (
            np.broadcast_to(shared, (stop - start, domain.size)) if shared is not None else None)
        noisy[start:stop], drawn_k = draws.draw(positions[start:stop], prior)
        if k is not None:
            k[start:stop] = drawn_k
    return LabelRelease(noisy, domain.declared, eps, RR_WITH_PRIOR if priors is not None else RR, draws.ledger(rows),
                        ids, k, shared, None, _noise_text(noise), noise.private)


def _row_ids(labels, ids, rows: int) -> np.ndarray:
    """The released rows' ids: ``ids``, else the labels' pandas index, else their positions. Each row
    must have its own (a duplicated id is refused: that row would be released twice)."""
    if ids is None:
        if not isinstance(labels, pd.Series):
            return np.arange(rows)
        if not labels.index.is_unique:
            raise DataError("the labels' index, which would be their ids, has duplicated values: pass ids=, one "
                            "distinct id per label; nothing was released")
        return labels.index.to_numpy()
    array = np.asarray(ids)
    if array.shape != (rows,):
        raise ConfigError(f"ids must have one value per label ({rows}), got shape {array.shape}")
    _refuse_duplicated(array, "ids")
    return array


def _check_batch_rows(batch_rows: int) -> int:
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, (int, np.integer)) or batch_rows < 1:
        raise ConfigError(f"batch_rows must be a positive integer, got {batch_rows!r}")
    return int(batch_rows)


def _noise_text(noise: NoiseSource) -> str:
    if not noise.private:
        return (f"reproducible from insecure_noise_seed {noise.insecure_seed} in {SIDECAR_FILE}: NOT PRIVATE, anyone "
                "who reads it can regenerate the noise and recover the true labels")
    return noise.describe()


# ----------------------------------------------------------------------------------------------------
# Out of core: reading


def _datasets(source, label_column: str) -> tuple[list[ds.Dataset], str]:
    """The source as datasets to scan in order, and a description of it."""
    if isinstance(source, pd.DataFrame):
        return [ds.dataset(_frame_table(source, label_column))], "an in-memory table"
    if isinstance(source, pa.Table):
        return [ds.dataset(source)], "an in-memory table"
    if isinstance(source, ds.Dataset):
        return [source], "a pyarrow dataset"
    path = Path(source)
    if not path.exists():
        raise MissingFileError(f"table {path} does not exist")
    if path.is_file():
        files = [path]
    else:
        # Hidden and underscore names (.crc, _SUCCESS, _metadata) are not data, as for pyarrow and Spark.
        files = sorted(f for f in path.rglob("*")
                       if f.is_file() and not any(part.startswith((".", "_")) for part in f.relative_to(path).parts))
        if not files:
            raise DataError(f"folder {path} holds no data files")
    return [_open(f, label_column) for f in files], str(path)


def _frame_table(frame: pd.DataFrame, label_column: str) -> pa.Table:
    """A DataFrame as an Arrow table. A label column of Python objects becomes text first: Arrow
    would infer its type from the labels, and quote the first label that does not fit it."""
    if label_column in frame.columns and frame[label_column].dtype == object:
        frame = frame.assign(**{label_column: frame[label_column].astype("string")})
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise DataError("the DataFrame cannot be converted to an Arrow table: a column of mixed Python objects? "
                        "(pyarrow's message is withheld: it may quote a value)") from None


def _open(path: Path, label_column: str) -> ds.Dataset:
    file_format = _file_format(path, label_column)
    with _reading(str(path), isinstance(file_format, ds.CsvFileFormat)):  # CSV: reads the first block
        return ds.dataset(path, format=file_format)


def _file_format(path: Path, label_column: str) -> ds.FileFormat:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] in (".gz", ".bz2") and len(suffixes) > 1:
        suffixes = suffixes[:-1]  # compressed CSV: pyarrow reads it by its extension
    kind = _FORMATS.get(suffixes[-1] if suffixes else "")
    if kind is None:
        raise DataError(f"{path} is not a Parquet (.parquet, .pq) or CSV (.csv, .tsv, optionally .gz) file")
    if kind == "parquet":
        # Pages read through a 1 MiB buffer, not whole column chunks read ahead ("pre-buffering", which
        # helps on object stores): bounded memory, and on a local disk a scan in a third of the CPU time.
        return ds.ParquetFileFormat(default_fragment_scan_options=ds.ParquetFragmentScanOptions(
            pre_buffer=False, use_buffered_stream=True, buffer_size=1 << 20))
    # The labels are read as text. Left to itself, pyarrow infers a column's type from the values of the
    # file's first block: a private label would decide it, and a later label that does not fit it would
    # fail the read with an error quoting it.
    return ds.CsvFileFormat(parse_options=pa_csv.ParseOptions(delimiter="\t" if kind == "tsv" else ","),
                            convert_options=pa_csv.ConvertOptions(column_types={label_column: pa.string()}))


def _is_csv(dataset: ds.Dataset) -> bool:
    return isinstance(getattr(dataset, "format", None), ds.CsvFileFormat)


@contextlib.contextmanager
def _reading(where: str, csv: bool) -> Iterator[None]:
    """pyarrow's read errors as DataErrors. A CSV reader's message can quote a row, its label
    included, so it is withheld; a Parquet reader's is kept."""
    try:
        yield
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as error:
        detail = ("pyarrow's message is withheld: it may quote a row, its label included" if csv
                  else f"{type(error).__name__}: {error}")
        raise DataError(f"{where} cannot be read ({detail})") from None


def _schema(datasets: list[ds.Dataset], columns: list[str]) -> pa.Schema:
    """The needed columns' types, from the first file (dictionary-encoded columns as their values);
    later files' ids and priors are cast to them, their labels never (:func:`_batches`)."""
    for dataset in datasets:
        missing = [c for c in columns if c not in dataset.schema.names]
        if missing:
            raise DataError(f"columns {missing} not found in {_describe(dataset)}; its columns are {dataset.schema.names}")
    fields = [datasets[0].schema.field(c) for c in columns]
    return pa.schema([field.with_type(field.type.value_type) if pa.types.is_dictionary(field.type) else field
                      for field in fields])


def _released_type(datasets: list[ds.Dataset], label_type: pa.DataType) -> pa.DataType:
    """The type of ``released_label``, never a function of a label value: the label column's
    declared type (the first file's Parquet schema, an in-memory table's), or string when any file
    is CSV, which declares no types (its labels are read as text)."""
    return pa.string() if any(_is_csv(dataset) for dataset in datasets) else label_type


def _describe(dataset: ds.Dataset) -> str:
    files = getattr(dataset, "files", None)
    return files[0] if files else "the table"


def _batches(datasets: list[ds.Dataset], schema: pa.Schema, label_column: str | None = None
             ) -> Iterator[pa.RecordBatch]:
    """Record batches of the columns in ``schema``, file after file, each batch in file order;
    the read-ahead is bounded (a few batches of at most ``_READ_ROWS`` rows). Every column but
    ``label_column`` is cast to ``schema``'s type: each file's labels keep their own type and are
    matched to the classes as text (a cast would fail on a label that does not fit, and quote it)."""
    for dataset in datasets:
        with _reading(_describe(dataset), _is_csv(dataset)):
            for batch in dataset.to_batches(columns=schema.names, batch_size=_READ_ROWS, batch_readahead=2,
                                            fragment_readahead=1):
                if batch.num_rows:
                    yield _conformed(batch, schema, label_column, dataset)


def _conformed(batch: pa.RecordBatch, schema: pa.Schema, label_column: str | None,
               dataset: ds.Dataset) -> pa.RecordBatch:
    """``batch`` with its columns but the label column cast to ``schema``'s types (public columns:
    an error may quote their values)."""
    if batch.schema == schema:
        return batch
    columns = []
    for field, column in zip(schema, batch.columns):
        if field.name != label_column and column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise DataError(f"{_describe(dataset)}: column {field.name!r} does not have the first file's type "
                                f"{field.type} ({error})") from None
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=schema.names)


# ----------------------------------------------------------------------------------------------------
# Out of core: the first pass, before anything is drawn or written


def _check_rows(datasets: list[ds.Dataset], schema: pa.Schema, domain: _Domain, label_column: str,
                id_column: str, described: str) -> int:
    """Read the label and id columns once: every label must be one of the classes (the error says
    neither which nor how many are not), every id present and distinct. Returns the number of rows.

    The ids are checked with 8 bytes a row: each row's 64-bit key (:func:`_id_keys`)."""
    where = f"label column {label_column!r}"
    keys: list[np.ndarray] = []
    for batch in _batches(datasets, pa.schema([schema.field(label_column), schema.field(id_column)]), label_column):
        domain.arrow_indices(batch.column(0), where)
        if batch.column(1).null_count:
            raise DataError(f"id column {id_column!r} has missing values")
        keys.append(_id_keys(batch.column(1)))
    rows = sum(chunk.size for chunk in keys)
    if rows == 0:
        raise DataError(f"{described} has no rows")
    _refuse_duplicated_ids(datasets, schema.field(id_column), _joined(keys))
    return rows


def _id_keys(ids: pa.Array) -> np.ndarray:
    """Each id as a 64-bit key (int64): an integer id itself (uint64 wraps around, still one to one),
    any other id its hash."""
    if pa.types.is_integer(ids.type):
        return ids.to_numpy(zero_copy_only=False).astype(np.int64)
    return _hash_ids(ids)


def _hash_ids(ids: pa.Array) -> np.ndarray:
    """64-bit hashes of ids (pandas' ``hash_array``, one vectorised call), as int64."""
    return pd.util.hash_array(ids.to_numpy(zero_copy_only=False), categorize=False).view(np.int64)


def _joined(chunks: list[np.ndarray]) -> np.ndarray:
    """The chunks as one int64 array, each chunk freed once copied: the peak is about the total, not
    twice it. Empties ``chunks``."""
    joined = np.empty(sum(chunk.size for chunk in chunks), dtype=np.int64)
    stop = joined.size
    while chunks:
        chunk = chunks.pop()
        joined[stop - chunk.size:stop] = chunk
        stop -= chunk.size
    return joined


def _refuse_duplicated_ids(datasets: list[ds.Dataset], field: pa.Field, keys: np.ndarray) -> None:
    """Refuse a table in which an id occurs twice, from every row's key (sorted here, in place).
    Integer keys are the ids: a repeated key is a repeated id. Other keys are hashes: the ids of the
    repeated ones are compared exactly (:func:`_duplicated_id`), so that a collision never refuses a
    valid table."""
    keys.sort()
    repeated = keys[1:][keys[1:] == keys[:-1]]
    if not repeated.size:
        return
    if pa.types.is_integer(field.type):
        example = repeated[:1].astype(field.type.to_pandas_dtype())[0]  # back from int64 (uint64 wraps back)
    else:
        example = _duplicated_id(datasets, field, np.unique(repeated))
        if example is None:
            return
    raise _duplicated_ids_error(f"id column {field.name!r}", example)


def _duplicated_id(datasets: list[ds.Dataset], field: pa.Field, hashes: np.ndarray) -> Any:
    """An id that occurs twice among the rows whose id hash is in ``hashes`` (sorted, distinct), or
    None: the hash collisions compared exactly. One scan of the id column per ``_COLLISIONS_PER_SCAN``
    hashes (a valid table has almost never any; in a table with a duplicated id the first scan finds
    one), keeping the distinct ids of those hashes met so far, and stopping at the first repeat."""
    for start in range(0, hashes.size, _COLLISIONS_PER_SCAN):
        chosen = hashes[start:start + _COLLISIONS_PER_SCAN]
        met = pa.array([], type=field.type)
        for batch in _batches(datasets, pa.schema([field])):
            ids = batch.column(0)
            found = ids.filter(pa.array(np.isin(_hash_ids(ids), chosen)))
            if not len(found):
                continue
            met = pa.concat_arrays([met, found])
            counts = pc.value_counts(met)
            repeated = counts.field("values").filter(pc.greater(counts.field("counts"), 1))
            if len(repeated):
                return repeated[0].as_py()
    return None


@dataclass
class _Block:
    """``rows`` consecutive rows of the table, ready for the mechanism: the ids (Arrow), the labels'
    class positions and the prior rows (float64, each class a contiguous column, which is how
    RR-with-prior reads them). The arrays are views of buffers reused by the next block."""

    ids: pa.ChunkedArray
    positions: np.ndarray
    prior: np.ndarray | None

    @property
    def rows(self) -> int:
        return self.positions.size


def _blocks(batches: Iterator[pa.RecordBatch], rows: int, domain: _Domain, label_column: str, id_column: str,
            prior_columns: tuple[str, ...] | None) -> Iterator[_Block]:
    """The stream cut into blocks of exactly ``rows`` rows (the last one shorter), whatever the
    batches' sizes, so that the draws do not depend on how the files are cut. Each batch is
    converted straight into buffers allocated once: memory stays that of one block."""
    positions = np.empty(rows, dtype=np.int64)
    prior = np.empty((rows, len(prior_columns)), dtype=np.float64, order="F") if prior_columns else None
    ids: list[pa.Array] = []
    filled = 0
    where = f"label column {label_column!r}"
    for batch in batches:
        offset = 0
        while offset < batch.num_rows:
            piece = batch.slice(offset, min(rows - filled, batch.num_rows - offset))
            stop = filled + piece.num_rows
            positions[filled:stop] = domain.arrow_indices(piece.column(label_column), where)
            identifiers = piece.column(id_column)
            if identifiers.null_count:
                raise DataError(f"id column {id_column!r} has missing values")
            ids.append(identifiers)
            for position, name in enumerate(prior_columns or ()):
                column = piece.column(name)
                if column.null_count:
                    raise DataError(f"prior column {name!r} has missing values")
                prior[filled:stop, position] = column.to_numpy(zero_copy_only=False)
            filled, offset = stop, offset + piece.num_rows
            if filled == rows:
                yield _Block(pa.chunked_array(ids, type=identifiers.type), positions, prior)
                ids, filled = [], 0
    if filled:
        yield _Block(pa.chunked_array(ids), positions[:filled], prior[:filled] if prior is not None else None)


# ----------------------------------------------------------------------------------------------------
# Out of core: writing once


@contextlib.contextmanager
def _system_allocator() -> Iterator[None]:
    """Arrow allocates from the C library's malloc meanwhile (pyarrow's default pool is restored after).

    pyarrow's default, mimalloc, hands freed memory back to the operating system, so every block of
    a release pays its page faults again: on the 2-core development machine that was about 40% of
    RR-with-prior's time end to end. Buffers remember their pool, so the switch is safe; it is
    process-wide while it lasts (other threads' Arrow allocations use malloc too)."""
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


@contextlib.contextmanager
def _locked(out: Path) -> Iterator[None]:
    """Hold ``.OUT.lock`` beside ``out`` (two processes releasing into one folder would draw twice).

    The file is never removed. Removed while held, a process that had opened it could lock the removed
    file while another locks a new one under the same name, and both would draw. Empty, it stays
    beside the release, harmless."""
    with open(out.parent / f".{out.name}.lock", "a") as handle:  # released when closed
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise RunLockedError(f"another process is writing the release {out}") from None
        yield


def _refuse_existing(out: Path) -> None:
    if out.exists() or out.is_symlink():
        raise ReleaseExistsError(
            f"{out} already exists. A label column is released once: releasing it again would spend its privacy "
            "budget a second time. Train on the release that is there (labeldp.privatize.load_release), or write "
            "a release of other labels to a new folder")


def _fsync(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def privatize_table(source, out, *, label_column: str, id_column: str, classes: Sequence[Any], epsilon: float,
                    prior_columns: Sequence[str] | None = None, prior=None, write_channel: bool = False,
                    batch_rows: int = DEFAULT_BATCH_ROWS, noise: NoiseSource = NoiseSource()) -> dict[str, Any]:
    """Release the label column of a table once, streamed in blocks of ``batch_rows`` rows, into the
    new folder ``out`` (``labels.parquet``, ``release.json``, ``ledger.json``; see the module docstring).

    Args:
        source: a Parquet or CSV file, a folder of them (read in the order of their sorted paths;
            names starting with ``.`` or ``_`` are skipped), a pyarrow Table or Dataset, or a DataFrame.
        out: the release folder; it must not exist.
        label_column: the private labels (of a CSV file: read as text; see the module docstring for
            the type ``released_label`` is written in).
        id_column: a public row identifier, copied next to each released label; one distinct value
            a row (a duplicated id is an error before anything is drawn).
        classes: the label domain, in order (public, declared; a label outside it, or a missing one,
            is an error before anything is written or drawn).
        epsilon: each label's privacy budget.
        prior_columns: RR-with-prior with a per-row prior: K numeric columns, one per class in the
            classes' order, each row a distribution not depending on that row's own label.
        prior: RR-with-prior with one (K,) prior shared by every row.
        write_channel: also write each row's channel, ``channel_j`` = Pr[released | true class j].
        batch_rows: rows drawn and written at a time (one Parquet row group); the release pass's memory is
            bounded by it (the first pass, checking the ids, keeps 8 bytes a row).
        noise: the noise source.

    Returns the sidecar (the content of ``release.json``) with ``seconds``, the time it took.
    """
    started = time.perf_counter()
    out = Path(out)
    _refuse_existing(out)
    domain = _Domain(classes)
    eps = check_epsilon(epsilon)
    block_rows = _check_batch_rows(batch_rows)
    columns_of_priors, shared = _prior_spec(domain.size, prior_columns, prior)
    if not isinstance(noise, NoiseSource):
        raise ConfigError(f"noise must be a labeldp.randomness.NoiseSource, got {type(noise).__name__}")
    needed = [id_column, label_column, *(columns_of_priors or ())]
    if len(set(needed)) != len(needed):
        raise ConfigError(f"the id, label and prior columns must be distinct, got {needed}")
    if id_column in (RELEASED_COLUMN, K_COLUMN) or id_column.startswith(CHANNEL_PREFIX):
        raise ConfigError(f"id column {id_column!r} would clash with a column of the release; rename it first")
    with _system_allocator():
        return _privatize_table(source, out, started, domain, eps, block_rows, columns_of_priors, shared, needed,
                                label_column, id_column, write_channel, noise)


def _privatize_table(source, out: Path, started: float, domain: _Domain, eps: float, block_rows: int,
                     columns_of_priors, shared, needed: list[str], label_column: str, id_column: str,
                     write_channel: bool, noise: NoiseSource) -> dict[str, Any]:
    datasets, described = _datasets(source, label_column)
    schema = _schema(datasets, needed)
    class_values = domain.arrow_values(_released_type(datasets, schema.field(label_column).type), label_column)
    for name in columns_of_priors or ():
        if not (pa.types.is_floating(schema.field(name).type) or pa.types.is_integer(schema.field(name).type)):
            raise DataError(f"prior column {name!r} must be numeric, got {schema.field(name).type}")
    if pa.types.is_nested(schema.field(id_column).type):
        raise DataError(f"id column {id_column!r} must hold one value a row (a number, a string, a date), got "
                        f"{schema.field(id_column).type}")
    rows = _check_rows(datasets, schema, domain, label_column, id_column, described)

    out.parent.mkdir(parents=True, exist_ok=True)
    with _locked(out):
        _refuse_existing(out)
        partial = out.parent / f".{out.name}.partial"
        if partial.exists():
            warnings.warn(f"removed {partial}, left by a release into {out} that did not finish; its labels were "
                          "never published", stacklevel=2)
            shutil.rmtree(partial)
        partial.mkdir()
        mode = partial.stat().st_mode & 0o777
        partial.chmod(0o700)  # the noisy labels of an unfinished release are its owner's only
        try:
            sidecar = _write_release(partial, datasets, schema, label_column, id_column, domain, class_values, eps,
                                     columns_of_priors, shared, write_channel, block_rows, noise, rows, described)
            partial.chmod(mode)
            _refuse_existing(out)
            os.rename(partial, out)
            _fsync(out.parent)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)
            raise
    return {**sidecar, "seconds": time.perf_counter() - started}


def _write_release(folder: Path, datasets, schema: pa.Schema, label_column: str, id_column: str, domain: _Domain,
                   class_values: pa.Array, epsilon: float, prior_columns, shared, write_channel: bool,
                   block_rows: int, noise: NoiseSource, rows: int, described: str) -> dict[str, Any]:
    num_classes = domain.size
    with_prior = prior_columns is not None or shared is not None
    draws = _Draws(num_classes, epsilon, with_prior, noise)
    k_type = pa.int8() if num_classes < 128 else pa.int32()
    fields = [schema.field(id_column), pa.field(RELEASED_COLUMN, class_values.type, nullable=False)]
    if with_prior:
        fields.append(pa.field(K_COLUMN, k_type, nullable=False))
    channel_names = [f"{CHANNEL_PREFIX}{j}" for j in range(num_classes)] if write_channel else []
    fields += [pa.field(name, pa.float64(), nullable=False) for name in channel_names]
    out_schema = pa.schema(fields)
    written = 0
    labels_path = folder / LABELS_FILE
    with pq.ParquetWriter(labels_path, out_schema, use_dictionary=[RELEASED_COLUMN, K_COLUMN]) as writer:
        batches = _batches(datasets, schema, label_column)
        for block in _blocks(batches, block_rows, domain, label_column, id_column, prior_columns):
            prior = block.prior
            if shared is not None:
                prior = np.broadcast_to(shared, (block.rows, num_classes))
            noisy, k = draws.draw(block.positions, prior)
            arrays = [block.ids, class_values.take(pa.array(noisy))]
            if with_prior:
                arrays.append(pa.array(k.astype(k_type.to_pandas_dtype())))
            if write_channel:
                likelihood = (rr_with_prior_likelihood(noisy, prior, epsilon) if with_prior
                              else randomized_response_likelihood(noisy, num_classes, epsilon))
                arrays += [pa.array(likelihood[:, j]) for j in range(num_classes)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=out_schema), row_group_size=block.rows)
            written += block.rows
    if written != rows:
        raise DataError(f"{described} changed while it was being released ({rows} rows, then {written})")
    ledger = draws.ledger(rows)
    ledger.save(folder / LEDGER_FILE)
    ledger_data = ledger.to_dict()
    channel: dict[str, Any] = {"meaning": "Pr[released label | true label]: matrix[y][z] for true class y and "
                                          "released class z; a row's channel L[y] = Pr[its released label | y]"}
    if not with_prior or shared is not None:
        matrix = (randomized_response_probabilities(num_classes, epsilon) if not with_prior
                  else rr_with_prior_probabilities(shared[None, :], epsilon)[0])
        channel["matrix"] = matrix.tolist()
    else:
        channel["per_row"] = ("depends on the row's prior and released label: "
                              "labeldp.mechanisms.rr_with_prior_likelihood(released positions, prior rows, epsilon), "
                              "or LabelRelease.channel(priors)")
    if channel_names:
        channel["columns"] = channel_names
    sidecar = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "labeldp_version": __version__,
        "rows": rows,
        "source": {"table": described, "label_column": label_column, "id_column": id_column},
        "classes": class_values.to_pylist(),
        "label_type": str(class_values.type),
        "mechanism": RR_WITH_PRIOR if with_prior else RR,
        "epsilon": epsilon,
        "prior": ({"columns": list(prior_columns)} if prior_columns is not None
                  else {"shared": shared.tolist()} if shared is not None else None),
        "k_range": draws.k_spread.range if draws.k_spread else None,
        "channel": channel,
        "columns": {"id": id_column, "released_label": RELEASED_COLUMN, "k": K_COLUMN if with_prior else None,
                    "channel": channel_names},
        "files": {"labels": LABELS_FILE, "ledger": LEDGER_FILE},
        "batch_rows": block_rows,
        "ledger": {"file": LEDGER_FILE, "epsilon": ledger_data["epsilon"], "delta": ledger_data["delta"],
                   "neighboring_relation": ledger_data["neighboring_relation"],
                   "entries": [{key: entry[key] for key in ("tag", "description", "event", "num_members")}
                               for entry in ledger_data["entries"]]},
        "noise": {"description": _noise_text(noise), "private": noise.private,
                  "insecure_noise_seed": noise.insecure_seed, "secure": noise.secure},
    }
    if not noise.private:
        sidecar["warning"] = (f"NOT PRIVATE: the noise can be regenerated from insecure_noise_seed {noise.insecure_seed}; "
                              "for tests only, never share this release")
    write_json_atomic(folder / SIDECAR_FILE, sidecar)
    for name in (LABELS_FILE, LEDGER_FILE, SIDECAR_FILE):
        _fsync(folder / name)
    _fsync(folder)
    return sidecar


# ----------------------------------------------------------------------------------------------------
# Reading a release


def read_sidecar(path) -> dict[str, Any]:
    """The sidecar of the release folder ``path`` (classes, mechanism, epsilon, channel, noise, ledger)."""
    folder = Path(path)
    sidecar_path = folder / SIDECAR_FILE
    if not sidecar_path.is_file():
        if folder.parent.joinpath(f".{folder.name}.partial").exists():
            raise MissingFileError(f"{folder} is not a finished release: a release into it did not finish")
        raise MissingFileError(f"{sidecar_path} does not exist: {folder} is not a label release folder")
    try:
        sidecar = json.loads(sidecar_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise DataError(f"{sidecar_path} is damaged ({error})") from None
    if sidecar.get("format") != FORMAT or sidecar.get("format_version") != FORMAT_VERSION:
        raise DataError(f"{sidecar_path} is not a labeldp label release (format {FORMAT!r} version {FORMAT_VERSION})")
    return sidecar


def load_release(path) -> LabelRelease:
    """Read the release folder ``path`` written by :func:`privatize_table`, all of it, in memory (the
    result takes 8 bytes a row for the labels, 8 for k and the ids' own size; reading takes about
    twice that at its peak). For releases larger than memory, read ``labels.parquet`` in batches and
    :func:`read_sidecar`."""
    folder = Path(path)
    sidecar = read_sidecar(folder)
    ledger = PrivacyLedger.load(folder / sidecar["files"]["ledger"])
    table = pq.read_table(folder / sidecar["files"]["labels"])
    rows = sidecar["rows"]
    if table.num_rows != rows or ledger.dataset_size != rows:
        raise DataError(f"{folder}: {table.num_rows} released labels and a ledger of {ledger.dataset_size} rows, "
                        f"the sidecar says {rows}")
    domain = _Domain(sidecar["classes"])
    names = sidecar["columns"]
    labels = np.empty(rows, dtype=np.int64)
    offset = 0
    for chunk in table.column(names["released_label"]).chunks:  # a row group at a time
        labels[offset:offset + len(chunk)] = domain.arrow_indices(chunk, f"{folder / LABELS_FILE}")
        offset += len(chunk)
    k = table.column(names["k"]).to_numpy().astype(np.int64) if names.get("k") else None
    likelihood = (np.stack([table.column(name).to_numpy() for name in names["channel"]], axis=1)
                  if names.get("channel") else None)
    prior = sidecar.get("prior") or {}
    return LabelRelease(
        labels, tuple(sidecar["classes"]), float(sidecar["epsilon"]), sidecar["mechanism"], ledger,
        table.column(names["id"]).to_numpy(), k,
        np.asarray(prior["shared"]) if "shared" in prior else None,
        tuple(prior["columns"]) if "columns" in prior else None,
        sidecar["noise"]["description"], bool(sidecar["noise"]["private"]), likelihood)


__all__ = ["LabelRelease", "privatize", "privatize_table", "load_release", "read_sidecar", "table_ledger",
           "DEFAULT_BATCH_ROWS", "RELEASED_COLUMN", "K_COLUMN", "CHANNEL_PREFIX"]
