"""A hashed Parquet table as a learner sees it: blocks of public buckets, with the private label column
wrapped as :class:`~labeldp.boundary.PrivateLabels` (for a release) or with released labels joined by
row position (for training).

The private labels of a block are read from the file and wrapped at once: only the boundary opens them
(:func:`labeldp.boundary.release_hashed.release_hashed_counts` block by block, or the ``release_*``
functions on :func:`read_private_labels`' column). Released labels are public and are looked up by
each row's position in the table (:class:`PositionTargets`): a release folder's ``labels.parquet``
holds one row per input row, in input order, and an in-memory release lists its members' positions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from labeldp.boundary import LabelDomain, PrivateLabels, ReleasedLabels
from labeldp.boundary.table_source import arrow_positions
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
    """The table's blocks as :func:`~labeldp.boundary.release_hashed.release_hashed_counts` takes them.

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder.
    spec : HashSpec
        The slots.
    label_column : str
        The private label column.
    classes : sequence
        The declared label domain (a label outside it is an error that names neither it nor its row).
    block_rows : int, optional
        Rows per block.
    rank, world : int, optional
        Read only this rank's row groups.

    Yields
    ------
    tuple
        ``(positions, buckets, labels)``: the rows' positions, their buckets, their labels (private).
    """
    domain = LabelDomain(classes)
    where = f"label column {label_column!r}"
    for block in hashed_blocks(source, spec, block_rows, [label_column], rank, world):
        positions = arrow_positions(domain, block.columns[label_column], where)
        yield block.positions, block.buckets, PrivateLabels.from_indices(positions, domain.size, domain.declared)


def read_column(source, column: str) -> np.ndarray:
    """One public column of the whole table in memory (a user id, a row id), in table order, every file's
    values in the first file's type (as :func:`labeldp.boundary.table_source.read_batches` reads them):
    a user whose id one file writes as ``7`` and another as ``"7"`` is one user, never two privacy units.

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder.
    column : str
        The column.

    Returns
    -------
    numpy.ndarray
        (rows,) its values.

    Raises
    ------
    labeldp.errors.DataError
        If the column has missing values, or a file's values cannot be read in the first file's type.
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
    """The label column of the whole table in memory, as private labels (8 bytes a row).

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder.
    label_column : str
        The private label column.
    classes : sequence
        The declared label domain.

    Returns
    -------
    PrivateLabels
        The labels, in table order.
    """
    domain = LabelDomain(classes)
    where = f"label column {label_column!r}"
    positions = [
        arrow_positions(domain, pq.read_table(path, columns=[label_column]).column(label_column), where)
        for path in parquet_files(source)
    ]
    return PrivateLabels.from_indices(np.concatenate(positions), domain.size, domain.declared)


def rank_private_labels(
    source, label_column: str, classes: Sequence, rank: int = 0, world: int = 1
) -> tuple[np.ndarray, PrivateLabels | None]:
    """The label column of a rank's row groups (every row group for one process), as private labels,
    with the rows' positions in the table.

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder.
    label_column : str
        The private label column.
    classes : sequence
        The declared label domain.
    rank, world : int, optional
        Read only this rank's row groups (:func:`~labeldp.data.hashing.row_groups`).

    Returns
    -------
    positions : numpy.ndarray
        (rows,) the rows' positions, increasing.
    labels : PrivateLabels or None
        Their labels (None for a rank without rows: a table of fewer row groups than ranks).
    """
    domain = LabelDomain(classes)
    where = f"label column {label_column!r}"
    positions, found = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for group in row_groups(source, rank, world):
        column = pq.ParquetFile(group.path).read_row_group(group.index, columns=[label_column]).column(label_column)
        found.append(arrow_positions(domain, column, where))
        positions.append(np.arange(group.first_row, group.first_row + group.rows, dtype=np.int64))
    rows, found = np.concatenate(positions), np.concatenate(found)
    return rows, PrivateLabels.from_indices(found, domain.size, domain.declared) if rows.size else None


class PositionTargets:
    """Per-row training targets looked up by row position: released labels' log-likelihood rows
    (log Pr[released label | class y], one column per class), for the rows released; the others
    (left out by a contribution bound) are skipped.

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
        """From released labels' channel rows L[i, y] = Pr[released label of row i | y] (a
        :class:`~labeldp.boundary.ReleasedLabels`' ``likelihood``, a release's ``likelihood``).

        Parameters
        ----------
        rows : int
            The table's rows.
        positions : array_like
            (released,) the released rows' positions.
        likelihood : array_like
            (released, K) Pr[row's released label | y]; its logarithm is kept (log 0 = -inf).

        Returns
        -------
        PositionTargets
            The targets of the released rows.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``likelihood`` is not (released, K).
        """
        with np.errstate(divide="ignore"):
            return cls(rows, positions, np.log(np.asarray(likelihood, dtype=np.float64)))

    @classmethod
    def from_released(cls, source, released: ReleasedLabels, id_column: str | None = None) -> PositionTargets:
        """From released labels with their channel (a release folder's, ``load_release(folder)``), joined to
        the table's rows: by the rows' ids in ``id_column``, or, without one, by position (a release
        folder of this very table holds one row per input row, in input order).

        Parameters
        ----------
        source : str or os.PathLike
            The Parquet table the labels were released from.
        released : ReleasedLabels
            The released labels; their channel must be known (``likelihood``).
        id_column : str or None, optional
            The table's id column, matched to ``released.ids``.

        Returns
        -------
        PositionTargets
            The targets of the released rows.

        Raises
        ------
        labeldp.errors.DataError
            If a released id is not in the table, or, by position, the numbers of rows differ.
        labeldp.errors.ConfigError
            If the released labels carry no channel.
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
    """``epoch_blocks`` for :func:`~labeldp.training.sparse.train_sparse`: every released row's buckets
    and its target, joined by position, one pass over the table per epoch.

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder.
    spec : HashSpec
        The slots.
    targets : PositionTargets
        The released rows' targets.
    block_rows : int, optional
        Rows per block.
    rank, world : int, optional
        Read only this rank's row groups.

    Returns
    -------
    callable
        ``epoch -> iterator of (buckets, targets)``.
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
