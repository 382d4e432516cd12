"""Feature hashing of public categoricals and their crosses, in memory or streamed from Parquet.

A :class:`HashSpec` declares *slots*: a categorical column, or a cross of several. Each slot has its own
range of ``2 ** bits`` buckets in one index space (slot 0's first), and every row falls in exactly one
bucket of every slot: a row is a fixed-length bag of indices, as :class:`torch.nn.EmbeddingBag` takes it
and as the sensitivity of the noisy counts (:mod:`labeldp.mechanisms.hashed_counts`) assumes.

**The hash** is stated exactly, so that it is stable across machines, processes and dependency versions:

- a value's 64-bit key: an integer (boolean, date, timestamp) its int64 value; a float its IEEE bits
  (``-0.0`` as ``0.0``); text and other values pandas' ``hash_array`` (SipHash-2-4 under pandas' fixed
  key ``0123456789123456``, of the UTF-8 text); a missing value :data:`MISSING_KEY`;
- a column's key: ``mix64(key(value) xor salt)``, the salt :func:`mix64` of the FNV-1a 64-bit hash of
  the column's name xor the spec's ``seed``;
- a slot's key: its first column's key, then ``k = mix64(k xor key)`` for each further column (a cross);
- its bucket: the top ``bits`` bits of ``k``, plus the slot's offset.

:func:`mix64` is MurmurHash3's fmix64 in numpy's wrapping uint64 arithmetic. A column's type matters
(the integer 1 and the text ``"1"`` differ): keep it across a table's files.

**Streaming.** :func:`hashed_blocks` reads a Parquet file or folder row group by row group, in blocks of
``block_rows`` rows with their positions, so memory is one block's; :func:`hash_frame` hashes a table in
memory identically. With ``world`` > 1 a rank reads only the row groups ``rank, rank + world, ...``.
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
    """MurmurHash3's fmix64 of uint64 ``keys``, in place where ``keys`` is a uint64 array of its own
    (``scratch``: a uint64 array of the same shape to work in).
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
        """The slot's columns joined by ``"x"`` (``"adxsite"`` for the cross of ``"ad"`` and ``"site"``)."""
        return "x".join(self.columns)


@dataclass(frozen=True)
class HashSpec:
    """The slots hashed and the seed of their salts (see :mod:`labeldp.data.hashing`).

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
        """F, the number of slots: the length of each row's bag of bucket indices."""
        return len(self.slots)

    @property
    def num_buckets(self) -> int:
        """The size of the index space, the sum of the slots' ``2 ** bits``."""
        return int(self.offsets[-1] + (1 << self.slots[-1].bits))

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns the slots read, each once, in order of first use."""
        return tuple(dict.fromkeys(name for slot in self.slots for name in slot.columns))

    def slot_of_bucket(self) -> np.ndarray:
        """(num_buckets,) int64: the slot each bucket belongs to."""
        return np.repeat(np.arange(self.num_slots), [1 << slot.bits for slot in self.slots])

    def to_dict(self) -> dict:
        """The spec as JSON-ready data, ``[columns, bits]`` per slot and the seed (:meth:`from_dict` reads it back)."""
        return {"slots": [[list(slot.columns), slot.bits] for slot in self.slots], "seed": self.seed}

    @classmethod
    def from_dict(cls, data: Mapping) -> HashSpec:
        """The spec :meth:`to_dict` wrote, hashing as it did."""
        return cls(tuple(Slot(tuple(columns), bits) for columns, bits in data["slots"]), int(data["seed"]))


def value_keys(values) -> np.ndarray:
    """Each value's 64-bit key (uint64, a new array), as :mod:`labeldp.data.hashing` states it."""
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
    """(rows, num_slots) int64 buckets of every row in every slot, each slot's in its own range; ``columns``
    must hold the spec's, all of one length.
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
    assert scratch is not None, "a spec hashes at least one column"
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
    """:func:`hash_columns` of a DataFrame or Arrow table in memory, as :func:`hashed_blocks` gives them."""
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
    """The Parquet files of ``source``: itself, or a folder's ``*.parquet`` files (subfolders searched) in sorted
    order, names starting with ``.`` or ``_`` skipped.
    """
    path = Path(source)
    if path.is_file():
        return [path]
    files = sorted(p for p in path.rglob("*.parquet") if not any(part[0] in "._" for part in p.relative_to(path).parts))
    if not path.exists() or not files:
        raise MissingFileError(f"{source}: no Parquet file")
    return files


def row_groups(source, rank: int = 0, world: int = 1) -> list[RowGroup]:
    """The row groups a rank reads in table order, every ``world``-th from the ``rank``-th, with each one's first
    row position in the table, from the files' footers alone.
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
    """The number of rows of a Parquet file or folder, from the footers alone."""
    return sum(group.rows for group in row_groups(source))


@dataclass
class HashedBlock:
    """Consecutive rows of a rank's row groups.

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
    """The table's rows in hashed blocks of ``block_rows`` rows (the last shorter), with ``columns`` handed over
    beside; with ``rank`` and ``world``, this rank's row groups only (:func:`row_groups`).

    Memory is about ``block_rows * (8 * num_slots + 8 + the columns' widths)``.
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
    """How many rows fall in each bucket: a public count, the buckets coming from public columns."""
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
