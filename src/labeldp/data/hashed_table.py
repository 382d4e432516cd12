"""A hashed Parquet table as a learner sees it: blocks of public buckets, with the private label column
wrapped as :class:`~labeldp.boundary.PrivateLabels` as it is read (for a release), or with released labels
joined by row position (for training: :class:`PositionTargets`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from labeldp.boundary import LabelDomain, PrivateLabels, ReleasedLabels
from labeldp.data.hashing import HashSpec, hashed_blocks, parquet_files, row_groups, table_rows
from labeldp.errors import ConfigError, DataError


def labelled_blocks(
    source,
    spec: HashSpec,
    label_column: str,
    classes: Sequence,
    block_rows: int = 1 << 18,
    rank: int = 0,
    world: int = 1,
) -> Iterator[tuple[np.ndarray, np.ndarray, PrivateLabels]]:
    """The table's ``(positions, buckets, labels)`` blocks as
    :func:`~labeldp.boundary.release_hashed.release_hashed_counts` takes them, each block's labels wrapped as
    private; with ``rank`` and ``world``, this rank's row groups only.
    """
    domain = LabelDomain(classes)
    where = f"label column {label_column!r}"
    for block in hashed_blocks(source, spec, block_rows, [label_column], rank, world):
        positions = domain.arrow_positions(block.columns[label_column], where)
        yield block.positions, block.buckets, PrivateLabels.from_indices(positions, domain.size, domain.declared)


def read_column(source, column: str) -> np.ndarray:
    """One public column of the whole table (a user or row id) in table order, every file's values cast to the
    first file's type: a user written ``7`` in one file and ``"7"`` in another is one privacy unit.
    """
    files = parquet_files(source)
    chunks = [pq.read_table(path, columns=[column]).column(column) for path in files]
    if any(chunk.null_count for chunk in chunks):
        raise DataError(f"column {column!r} has missing values")
    kind = chunks[0].type.value_type if pa.types.is_dictionary(chunks[0].type) else chunks[0].type
    for index, chunk in enumerate(chunks):
        if chunk.type != kind:
            try:
                chunks[index] = chunk.cast(kind)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
                raise DataError(
                    f"{files[index]}: column {column!r} does not have the first file's type {kind} ({error})"
                ) from None
    return np.concatenate([chunk.to_numpy() for chunk in chunks])


def read_private_labels(source, label_column: str, classes: Sequence) -> PrivateLabels:
    """The label column of the whole table in memory, in table order, as private labels (8 bytes a row)."""
    domain = LabelDomain(classes)
    where = f"label column {label_column!r}"
    positions = [
        domain.arrow_positions(pq.read_table(path, columns=[label_column]).column(label_column), where)
        for path in parquet_files(source)
    ]
    return PrivateLabels.from_indices(np.concatenate(positions), domain.size, domain.declared)


def rank_private_labels(
    source, label_column: str, classes: Sequence, rank: int = 0, world: int = 1
) -> tuple[np.ndarray, PrivateLabels | None]:
    """The label column of a rank's row groups as private labels (None for a rank without rows), with the rows'
    increasing positions in the table.
    """
    domain = LabelDomain(classes)
    where = f"label column {label_column!r}"
    positions, found = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for group in row_groups(source, rank, world):
        column = pq.ParquetFile(group.path).read_row_group(group.index, columns=[label_column]).column(label_column)
        found.append(domain.arrow_positions(column, where))
        positions.append(np.arange(group.first_row, group.first_row + group.rows, dtype=np.int64))
    rows, codes = np.concatenate(positions), np.concatenate(found)
    return rows, PrivateLabels.from_indices(codes, domain.size, domain.declared) if rows.size else None


class PositionTargets:
    """Per-row training targets looked up by row position: released labels' log-likelihood rows (log
    Pr[released label | y], one column per class); rows not released (left out by a contribution bound) are
    skipped.

    Parameters
    ----------
    rows : int
        The table's rows.
    positions : numpy.ndarray
        (released,) the released rows' positions.
    log_likelihood : numpy.ndarray
        (released, K) log Pr[row's released label | y].

    Attributes
    ----------
    released : numpy.ndarray
        (rows,) whether each row has a target.
    """

    def __init__(self, rows: int, positions: np.ndarray, log_likelihood: np.ndarray):
        positions = np.asarray(positions, dtype=np.int64)
        values = np.asarray(log_likelihood, dtype=np.float32)
        if values.ndim != 2 or values.shape[0] != positions.size:
            raise ConfigError(f"log_likelihood must be ({positions.size}, K), got {values.shape}")
        self.released = np.zeros(rows, dtype=bool)
        self.released[positions] = True
        self._table = np.zeros((rows, values.shape[1]), dtype=np.float32)
        self._table[positions] = values

    @classmethod
    def from_channel(cls, rows: int, positions, likelihood) -> PositionTargets:
        """The targets of released rows from their channel rows L[i, y] = Pr[row i's released label | y] (log 0 =
        -inf).
        """
        with np.errstate(divide="ignore"):
            return cls(rows, positions, np.log(np.asarray(likelihood, dtype=np.float64)))

    @classmethod
    def from_released(cls, source, released: ReleasedLabels, id_column: str | None = None) -> PositionTargets:
        """The targets of released labels with a known channel, joined to ``source``'s rows by ids in
        ``id_column``, or without one by position (a release folder of this very table holds one row per input
        row, in order).
        """
        if released.likelihood is None:
            raise ConfigError("these released labels carry no channel (a prior per row): give it with with_priors")
        rows = table_rows(source)
        if id_column is None:
            if len(released) != rows:
                raise DataError(f"{len(released)} released labels for a table of {rows} rows: join them by id")
            positions = np.arange(rows)
        else:
            positions = pd.Index(read_column(source, id_column)).get_indexer(np.asarray(released.ids))
            if positions.size and positions.min() < 0:
                raise DataError(f"released ids missing from column {id_column!r} of the table")
        return cls.from_channel(rows, positions, released.likelihood)

    def __call__(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The block's rows that have a target, and their targets."""
        keep = self.released[positions]
        return keep, self._table[positions[keep]]


def released_blocks(
    source, spec: HashSpec, targets: PositionTargets, block_rows: int = 1 << 18, rank: int = 0, world: int = 1
) -> Callable[[int], Iterator[tuple[np.ndarray, np.ndarray]]]:
    """``epoch_blocks`` for :func:`~labeldp.training.out_of_core.train_sparse`: ``epoch -> (buckets, targets)``
    blocks of every released row, joined by position, one pass over the table per epoch.
    """

    def blocks(epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for block in hashed_blocks(source, spec, block_rows, (), rank, world):
            keep, values = targets(block.positions)
            yield (block.buckets if keep.all() else block.buckets[keep]), values

    return blocks


__all__ = [
    "PositionTargets",
    "labelled_blocks",
    "rank_private_labels",
    "read_column",
    "read_private_labels",
    "released_blocks",
]
