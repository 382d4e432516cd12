"""Feature hashing of public categoricals and their crosses, in memory or streamed from Parquet.

A :class:`HashSpec` declares *slots*: a categorical column, or a cross of several. Each slot has its
own range of ``2 ** bits`` buckets in one index space (slot 0's range first), and every row falls in
exactly one bucket of every slot, so a row is a fixed-length bag of ``len(spec.slots)`` indices, which
is what :class:`torch.nn.EmbeddingBag` takes, and what the sensitivity of the noisy counts
(:mod:`labeldp.mechanisms.hashed_counts`) rests on. Buckets are unsigned.

**The hash** is stated exactly, so that it is stable across machines, processes and versions of
labeldp's dependencies:

- a value's 64-bit key: an integer (or boolean, date, timestamp) its int64 value; a float its IEEE
  bits (``-0.0`` as ``0.0``); text and other values pandas' ``hash_array`` (SipHash-2-4 under pandas'
  fixed key ``0123456789123456``, of the value's UTF-8 text); a missing value the constant
  :data:`MISSING_KEY`;
- a column's key: ``mix64(key(value) xor salt)``, the salt :func:`mix64` of the FNV-1a 64-bit hash of
  the column's name xor the spec's ``seed``;
- a slot's key: its first column's key, then for each further column (a cross)
  ``k = mix64(k xor that column's key)``;
- its bucket: the top ``bits`` bits of ``k``, plus the slot's offset.

:func:`mix64` is MurmurHash3's 64-bit finaliser (fmix64), computed with numpy's wrapping uint64
arithmetic. The type of a column matters (the integer 1 and the text ``"1"`` differ): keep each
column's type across the files of a table.

**Streaming.** :func:`hashed_blocks` reads a Parquet file or folder (``*.parquet`` files in sorted
order; names starting with ``.`` or ``_`` skipped) row group by row group with pyarrow and yields
blocks of ``block_rows`` rows with their row positions, so that memory is that of one block whatever
the table's size; :func:`hash_frame` hashes a table in memory, identically. With ``world`` > 1 a rank
reads only the row groups ``rank, rank + world, ...``: the ranks of a data-parallel job read
disjoint rows, each knowing every row's position in the whole table.

Everything here reads public columns only.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from labeldp.errors import ConfigError, DataError, MissingFileError

#: the key of a missing value
MISSING_KEY = np.uint64(0x9E3779B97F4A7C15)
#: rows read from a file at a time (a block is assembled from such pieces)
_READ_ROWS = 1 << 16
_C1, _C2 = np.uint64(0xFF51AFD7ED558CCD), np.uint64(0xC4CEB9FE1A85EC53)
_S33 = np.uint64(33)


def mix64(keys: np.ndarray, scratch: np.ndarray | None = None) -> np.ndarray:
    """MurmurHash3's fmix64 of every key (uint64, wrapping arithmetic), in place where ``keys`` is a
    uint64 array of its own.

    Parameters
    ----------
    keys : numpy.ndarray
        uint64 keys.
    scratch : numpy.ndarray or None, optional
        A uint64 array of the same shape to work in (default: one is allocated).

    Returns
    -------
    numpy.ndarray
        The mixed keys (uint64).
    """
    keys = np.asarray(keys, dtype=np.uint64)
    shifted = np.right_shift(keys, _S33, out=scratch)
    keys ^= shifted
    keys *= _C1
    keys ^= np.right_shift(keys, _S33, out=shifted)
    keys *= _C2
    keys ^= np.right_shift(keys, _S33, out=shifted)
    return keys


def _fnv1a(text: str) -> np.uint64:
    value = 0xCBF29CE484222325
    for byte in text.encode():
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return np.uint64(value)


@dataclass(frozen=True)
class Slot:
    """A hashed feature: one categorical column, or the cross of several.

    Parameters
    ----------
    columns : tuple of str
        The column, or the columns crossed.
    bits : int
        The slot's range holds ``2 ** bits`` buckets (1 to 30).
    """

    columns: tuple[str, ...]
    bits: int = 18

    def __post_init__(self) -> None:
        columns = (self.columns,) if isinstance(self.columns, str) else tuple(self.columns)
        object.__setattr__(self, "columns", columns)
        if not columns or len(set(columns)) != len(columns):
            raise ConfigError(f"a slot needs one or more distinct columns, got {columns}")
        if not 1 <= int(self.bits) <= 30:
            raise ConfigError(f"a slot's bits must lie in [1, 30], got {self.bits}")

    @property
    def name(self) -> str:
        """The slot's name: its columns joined by ``"x"``.

        Returns
        -------
        str
            The column's name, or the crossed columns' names joined by ``"x"`` (``"adxsite"`` for the cross
            of ``"ad"`` and ``"site"``).
        """
        return "x".join(self.columns)


@dataclass(frozen=True)
class HashSpec:
    """The slots hashed and the seed of their salts (see the module docstring).

    Parameters
    ----------
    slots : sequence of Slot, str or (tuple of str, int)
        The slots, in order: a :class:`Slot`, a column name (18 bits), or ``(columns, bits)``.
    seed : int
        Changes every column's salt (a public choice, like the number of buckets).
    """

    slots: tuple[Slot, ...]
    seed: int = 0
    offsets: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        slots = tuple(
            slot if isinstance(slot, Slot) else Slot(slot) if isinstance(slot, str) else Slot(*slot)
            for slot in self.slots
        )
        if not slots or len({slot.name for slot in slots}) != len(slots):
            raise ConfigError("a hash spec needs one or more distinct slots")
        object.__setattr__(self, "slots", slots)
        sizes = np.array([1 << slot.bits for slot in slots], dtype=np.int64)
        object.__setattr__(self, "offsets", np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64))

    @property
    def num_slots(self) -> int:
        """F, the number of slots: a row's indices.

        Returns
        -------
        int
            The number of slots, the length of each row's bag of bucket indices.
        """
        return len(self.slots)

    @property
    def num_buckets(self) -> int:
        """The size of the index space, the sum of the slots' ranges.

        Returns
        -------
        int
            The sum over the slots of ``2 ** bits``.
        """
        return int(self.offsets[-1] + (1 << self.slots[-1].bits))

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the slots read, each once, in order of first use.

        Returns
        -------
        tuple of str
            The column names.
        """
        return tuple(dict.fromkeys(name for slot in self.slots for name in slot.columns))

    def slot_of_bucket(self) -> np.ndarray:
        """(num_buckets,) int64: the slot each bucket belongs to.

        Returns
        -------
        numpy.ndarray
            (num_buckets,) int64 slot indices in [0, num_slots), slot 0's range first.
        """
        return np.repeat(np.arange(self.num_slots), [1 << slot.bits for slot in self.slots])

    def to_dict(self) -> dict:
        """The spec as JSON-ready data (:meth:`from_dict` reads it back).

        Returns
        -------
        dict
            ``"slots"``: a ``[columns, bits]`` list per slot, in order; ``"seed"``: the seed.
        """
        return {"slots": [[list(slot.columns), slot.bits] for slot in self.slots], "seed": self.seed}

    @classmethod
    def from_dict(cls, data: Mapping) -> HashSpec:
        """A spec from :meth:`to_dict`'s data.

        Parameters
        ----------
        data : Mapping
            ``"slots"``: a ``[columns, bits]`` pair per slot, in order; ``"seed"``: the seed.

        Returns
        -------
        HashSpec
            The spec, hashing as the one that wrote ``data`` did.

        Raises
        ------
        labeldp.errors.ConfigError
            If a slot's columns are empty or repeated, its bits outside [1, 30], or two slots the same.
        """
        return cls(tuple(Slot(tuple(columns), bits) for columns, bits in data["slots"]), int(data["seed"]))


def value_keys(values) -> np.ndarray:
    """Each value's 64-bit key (see the module docstring).

    Parameters
    ----------
    values : pyarrow.Array, pyarrow.ChunkedArray, numpy.ndarray or pandas.Series
        One column's values.

    Returns
    -------
    numpy.ndarray
        (rows,) uint64 keys, a new array.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if not isinstance(values, pa.Array):
        values = pa.array(np.asarray(values) if not isinstance(values, pd.Series) else values, from_pandas=True)
    if pa.types.is_dictionary(values.type):
        keys = value_keys(values.dictionary)[values.indices.fill_null(0).to_numpy(zero_copy_only=False)]
        if values.null_count:
            keys[values.is_null().to_numpy(zero_copy_only=False)] = MISSING_KEY
        return keys
    kind = values.type
    if pa.types.is_boolean(kind):
        values = values.cast(pa.int8())
    if pa.types.is_integer(values.type) or pa.types.is_temporal(values.type):
        if pa.types.is_temporal(kind) or values.type == pa.uint64():
            values = values.view(_int_of(values.type))
        integers = values.fill_null(0) if values.null_count else values
        array = integers.to_numpy(zero_copy_only=False).astype(np.int64, copy=True).view(np.uint64)
    elif pa.types.is_floating(kind):
        floats = values.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False) + 0.0  # -0.0 -> 0.0
        array = floats.view(np.uint64).copy()
    else:
        text = values.cast(pa.string()) if not pa.types.is_string(kind) else values
        array = pd.util.hash_array(text.to_numpy(zero_copy_only=False), categorize=True).astype(np.uint64)
    if values.null_count:
        array[values.is_null().to_numpy(zero_copy_only=False)] = MISSING_KEY
    return array


def _int_of(kind: pa.DataType) -> pa.DataType:
    return pa.int32() if kind.bit_width == 32 else pa.int64()


def hash_columns(columns: Mapping[str, object], spec: HashSpec, out: np.ndarray | None = None) -> np.ndarray:
    """The buckets of every row in every slot.

    Parameters
    ----------
    columns : Mapping of str to array_like
        The spec's columns (pyarrow arrays, numpy arrays or pandas Series), all of one length.
    spec : HashSpec
        The slots.
    out : numpy.ndarray or None, optional
        A (rows, num_slots) int64 array to write into.

    Returns
    -------
    numpy.ndarray
        (rows, num_slots) int64 bucket indices in [0, spec.num_buckets), slot f's in its own range.

    Raises
    ------
    labeldp.errors.DataError
        If a column is missing.
    """
    missing = [name for name in spec.columns if name not in columns]
    if missing:
        raise DataError(f"the table lacks the hashed columns {missing}")
    keys, scratch = {}, None
    for name in spec.columns:
        key = value_keys(columns[name])
        key ^= mix64(np.array([_fnv1a(name) ^ np.uint64(spec.seed)]))[0]
        scratch = np.empty_like(key) if scratch is None else scratch
        keys[name] = mix64(key, scratch)
    rows = key.size
    result = np.empty((rows, spec.num_slots), dtype=np.int64) if out is None else out
    for index, slot in enumerate(spec.slots):
        key = keys[slot.columns[0]]
        for name in slot.columns[1:]:
            key = mix64(np.bitwise_xor(key, keys[name]), scratch)
        np.right_shift(key, np.uint64(64 - slot.bits), out=scratch)
        np.add(scratch.view(np.int64), spec.offsets[index], out=result[:, index])
    return result


def hash_frame(frame, spec: HashSpec) -> np.ndarray:
    """:func:`hash_columns` of a table in memory (a pandas DataFrame or a pyarrow Table).

    Parameters
    ----------
    frame : pandas.DataFrame or pyarrow.Table
        The table.
    spec : HashSpec
        The slots.

    Returns
    -------
    numpy.ndarray
        (rows, num_slots) int64 buckets, as :func:`hashed_blocks` gives them block by block.
    """
    table = frame if isinstance(frame, pa.Table) else pa.Table.from_pandas(frame, preserve_index=False)
    return hash_columns({name: table.column(name) for name in spec.columns if name in table.column_names}, spec)


@dataclass(frozen=True)
class RowGroup:
    """One row group of one file, and where its rows lie in the whole table.

    Attributes
    ----------
    path : pathlib.Path
        The Parquet file.
    index : int
        The row group's index in that file.
    first_row : int
        The position of its first row in the whole table (the files in sorted order).
    rows : int
        Its number of rows.
    """

    path: Path
    index: int
    first_row: int
    rows: int


def parquet_files(source) -> list[Path]:
    """The Parquet files of ``source``: itself, or a folder's ``*.parquet`` files in sorted order
    (names starting with ``.`` or ``_`` skipped).

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file, or a folder searched with its subfolders.

    Returns
    -------
    list of pathlib.Path
        ``source`` itself where it is a file, else the folder's Parquet files in sorted order.

    Raises
    ------
    labeldp.errors.MissingFileError
        If ``source`` does not exist or holds no Parquet file.
    """
    path = Path(source)
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*.parquet") if not any(part[0] in "._" for part in p.relative_to(path).parts))
    if not path.exists() or not files:
        raise MissingFileError(f"{source}: no Parquet file")
    return files


def row_groups(source, rank: int = 0, world: int = 1) -> list[RowGroup]:
    """The row groups a rank reads: every ``world``-th of the table's, from the ``rank``-th, each with
    the position of its first row in the whole table (from the files' footers: nothing else is read).

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder.
    rank, world : int, optional
        This rank and the number of ranks (default 0 and 1: every row group).

    Returns
    -------
    list of RowGroup
        In table order.
    """
    if not 0 <= rank < world:
        raise ConfigError(f"rank must lie in [0, world), got rank {rank} of {world}")
    groups, first = [], 0
    for path in parquet_files(source):
        try:
            metadata = pq.read_metadata(path)
        except (pa.ArrowInvalid, OSError) as error:  # a truncated file has no footer
            raise DataError(f"{path} is not a readable Parquet file ({error})") from None
        for index in range(metadata.num_row_groups):
            rows = metadata.row_group(index).num_rows
            groups.append(RowGroup(path, index, first, rows))
            first += rows
    return [group for position, group in enumerate(groups) if position % world == rank]


def table_rows(source) -> int:
    """The number of rows of a Parquet file or folder (from the footers).

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder (:func:`parquet_files`).

    Returns
    -------
    int
        The rows of all its row groups; nothing but the files' footers is read.

    Raises
    ------
    labeldp.errors.MissingFileError
        If ``source`` does not exist or holds no Parquet file.
    """
    return sum(group.rows for group in row_groups(source))


@dataclass
class HashedBlock:
    """Consecutive rows of a rank's row groups: their positions in the table, their buckets, and the
    other columns asked for (as Arrow arrays).

    Attributes
    ----------
    positions : numpy.ndarray
        (rows,) int64, each row's position in the whole table.
    buckets : numpy.ndarray
        (rows, num_slots) int64 bucket indices (:func:`hash_columns`).
    columns : dict of str to pyarrow.Array
        The other columns asked for (e.g. the label, a user id), by name.
    """

    positions: np.ndarray
    buckets: np.ndarray
    columns: dict[str, pa.Array]

    @property
    def rows(self) -> int:
        return self.positions.size


def hashed_blocks(
    source,
    spec: HashSpec,
    block_rows: int = 1 << 18,
    columns: Sequence[str] = (),
    rank: int = 0,
    world: int = 1,
) -> Iterator[HashedBlock]:
    """The table's rows in blocks of ``block_rows`` rows (the last shorter), hashed (see the module docstring).

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder.
    spec : HashSpec
        The slots.
    block_rows : int, optional
        Rows per block: memory is about ``block_rows * (8 * num_slots + 8 + the columns' widths)``.
    columns : sequence of str, optional
        Other columns to hand over with each block (e.g. the label, a user id).
    rank, world : int, optional
        Read only the row groups of this rank (:func:`row_groups`).

    Yields
    ------
    HashedBlock
        The block's positions (int64), buckets ((rows, num_slots) int64) and ``columns``.
    """
    if block_rows < 1:
        raise ConfigError(f"block_rows must be at least 1, got {block_rows}")
    wanted = list(dict.fromkeys([*spec.columns, *columns]))
    pieces, positions, filled = [], [], 0
    for group in row_groups(source, rank, world):
        handle = pq.ParquetFile(group.path)
        offset = group.first_row
        for batch in handle.iter_batches(batch_size=_READ_ROWS, row_groups=[group.index], columns=wanted):
            start = 0
            while start < batch.num_rows:
                piece = batch.slice(start, min(block_rows - filled, batch.num_rows - start))
                pieces.append(piece)
                positions.append(np.arange(offset + start, offset + start + piece.num_rows, dtype=np.int64))
                filled += piece.num_rows
                start += piece.num_rows
                if filled == block_rows:
                    yield _block(pieces, positions, spec, columns)
                    pieces, positions, filled = [], [], 0
            offset += batch.num_rows
    if filled:
        yield _block(pieces, positions, spec, columns)


def _block(pieces: list[pa.RecordBatch], positions: list[np.ndarray], spec: HashSpec, columns) -> HashedBlock:
    table = pa.Table.from_batches(pieces)
    buckets = hash_columns({name: table.column(name) for name in spec.columns}, spec)
    extra = {name: table.column(name).combine_chunks() for name in columns}
    return HashedBlock(np.concatenate(positions), buckets, extra)


def bucket_sizes(blocks, num_buckets: int) -> np.ndarray:
    """How many rows fall in each bucket (a public count: the buckets come from public columns).

    Parameters
    ----------
    blocks : iterable of HashedBlock
        The rows.
    num_buckets : int
        The index space's size.

    Returns
    -------
    numpy.ndarray
        (num_buckets,) int64.
    """
    sizes = np.zeros(num_buckets, dtype=np.int64)
    for block in blocks:
        sizes += np.bincount(block.buckets.ravel(), minlength=num_buckets)
    return sizes


__all__ = [
    "HashSpec",
    "HashedBlock",
    "MISSING_KEY",
    "RowGroup",
    "Slot",
    "bucket_sizes",
    "hash_columns",
    "hash_frame",
    "hashed_blocks",
    "mix64",
    "parquet_files",
    "row_groups",
    "table_rows",
    "value_keys",
]
