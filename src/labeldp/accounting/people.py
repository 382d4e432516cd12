"""The people of a group and which releases hold each of them: a release's :class:`People`, and the
:class:`PeopleIndex` of a group's ledger (``docs/dataset-ledger.md``).

A person is the canonical key of a public column (:func:`~labeldp.tables.keys.row_keys`: an integer id is
itself, any other spelling a 64-bit hash; a collision merges two people, which counts their releases
together: never fewer). The index groups a group's people by their *signature*, the set of releases that
hold them, so composing each person's releases is composing each signature's once.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from labeldp.errors import BudgetError
from labeldp.files import write_atomic


@dataclass(frozen=True)
class People:
    """The people a release holds: ``keys`` sorted and distinct, of public ``column``; ``most_rows``, the most
    released rows of one of them."""

    column: str
    keys: np.ndarray
    most_rows: int

    @classmethod
    def of_rows(cls, column: str, row_keys: np.ndarray) -> People:
        """The people of the released rows' keys (one a row, repeated for a person's rows)."""
        codes, uniques = pd.factorize(np.asarray(row_keys, dtype=np.int64))
        counts = np.bincount(codes) if codes.size else np.zeros(0, dtype=np.int64)
        return cls(column, np.sort(np.asarray(uniques, dtype=np.int64)), int(counts.max()) if counts.size else 0)

    @classmethod
    def of_distinct(cls, column: str, sorted_keys: np.ndarray) -> People:
        """People of one row each, their keys sorted and distinct already (a checked id column)."""
        return cls(column, np.asarray(sorted_keys, dtype=np.int64), 1 if len(sorted_keys) else 0)

    @classmethod
    def of_counts(cls, column: str, sorted_keys: np.ndarray, rows: np.ndarray) -> People:
        """People of sorted keys and each one's released rows (a key given twice: its rows together)."""
        keys, rows = np.asarray(sorted_keys, dtype=np.int64), np.asarray(rows, dtype=np.int64)
        if keys.size > 1 and not (np.diff(keys) > 0).all():
            keys, starts = np.unique(keys, return_index=True)
            rows = np.add.reduceat(rows, starts)
        return cls(column, keys, int(rows.max()) if rows.size else 0)

    @property
    def count(self) -> int:
        return int(self.keys.size)


#: keys encoded or decoded at a time: a buffer that stays in the cache, whatever the number of people
_CHUNK = 1 << 20


class PeopleIndex:
    """A group's people by signature: ``signatures[i]`` (release ids, sorted) holds the people ``keys[i]``."""

    def __init__(self, signatures: list[tuple[str, ...]] | None = None, keys: list[np.ndarray] | None = None):
        self.signatures = signatures or []
        self._keys = keys or []
        self.counts = [int(k.size) for k in self._keys]
        self._saved: tuple[Path, int, dict] | None = None  # the file's keys, decoded when first asked for

    @property
    def keys(self) -> list[np.ndarray]:
        if self._saved is not None:
            self._keys, self._saved = _decoded(*self._saved), None
        return self._keys

    @property
    def count(self) -> int:
        return sum(self.counts)

    def releases(self) -> set[str]:
        return {release for signature in self.signatures for release in signature}

    def with_release(self, release: str, people: People) -> PeopleIndex:
        """The index once ``release`` holds ``people`` (unchanged where it is in the index already: a release's
        people are fixed when it is reserved)."""
        if release in self.releases():
            return self
        found = np.zeros(people.keys.size, dtype=bool)
        signatures, keys = [], []
        for signature, group in zip(self.signatures, self.keys):
            position = np.minimum(np.searchsorted(people.keys, group), max(people.keys.size - 1, 0))
            held = people.keys[position] == group if people.keys.size else np.zeros(group.size, dtype=bool)
            found[position[held]] = True
            for part, members in ((signature, group[~held]), (tuple(sorted((*signature, release))), group[held])):
                if members.size:
                    signatures.append(part)
                    keys.append(members)
        if not found.all():
            signatures.append((release,))
            keys.append(people.keys if not found.any() else people.keys[~found])
        return PeopleIndex(signatures, keys)

    def save(self, path: Path) -> None:
        """Written whole, then renamed into place: a line of JSON, then each signature's keys as the differences
        between sorted neighbours in as few bytes as the largest takes (one for consecutive integer ids)."""
        header: dict = {"signatures": [list(s) for s in self.signatures], "counts": [], "firsts": [], "widths": []}
        for group in self.keys:
            steps = max((int(part.max()) for part in _steps(group)), default=0)
            header["counts"].append(int(group.size))
            header["firsts"].append(int(group[0]))
            header["widths"].append(max(1, (steps.bit_length() + 7) // 8))

        def write(tmp: Path) -> None:
            with open(tmp, "wb") as handle:
                handle.write(json.dumps(header).encode() + b"\n")
                for group, width in zip(self.keys, header["widths"]):
                    for shift, kind in _parts(width):
                        for steps in _steps(group):
                            handle.write((steps >> np.uint64(shift)).astype(kind).data)
                handle.flush()
                os.fsync(handle.fileno())

        write_atomic(path, write)

    @classmethod
    def load(cls, path: Path) -> PeopleIndex:
        """The index saved at ``path`` (empty if there is none); its keys are read when first asked for."""
        index = cls()
        if not path.exists():
            return index
        try:
            with open(path, "rb") as handle:
                line = handle.readline()
                header = json.loads(line)
                size = handle.seek(0, os.SEEK_END)
            index.signatures, index.counts = [tuple(s) for s in header["signatures"]], list(header["counts"])
            steps = sum((count - 1) * width for count, width in zip(header["counts"], header["widths"]))
            if len(line) + steps != size or len(index.counts) != len(index.signatures):
                raise ValueError(f"{size} bytes, its header says {len(line) + steps}")
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise BudgetError(
                f"{path}, the people of a dataset's ledger, is damaged ({error}): restore it from a backup. "
                "Deleting it would forget which people each release held (every release would count for nobody)"
            ) from None
        index._saved = (path, len(line), header)
        return index


def _steps(group: np.ndarray):
    """The differences between sorted neighbours as little-endian uint64, a chunk at a time (wrapped around:
    sorted as int64, the wrapped difference is the true one)."""
    values = group.view(np.uint64)
    for start in range(1, values.size, _CHUNK):
        stop = min(start + _CHUNK, values.size)
        yield np.subtract(values[start:stop], values[start - 1 : stop - 1]).astype("<u8", copy=False)


def _parts(width: int) -> list[tuple[int, str]]:
    """``width`` bytes as whole little-endian integers of 4, 2 and 1 bytes: (shift in bits, their type)."""
    parts, shift = [], 0
    for size, kind in ((4, "<u4"), (4, "<u4"), (2, "<u2"), (1, "u1")):
        if width - shift // 8 >= size:
            parts.append((shift, kind))
            shift += 8 * size
    return parts


def _decoded(path: Path, offset: int, header: dict) -> list[np.ndarray]:
    keys = []
    with open(path, "rb") as handle:
        handle.seek(offset)
        for count, first, width in zip(header["counts"], header["firsts"], header["widths"]):
            values = np.zeros(count, dtype=np.uint64)
            values[0] = np.int64(first).view(np.uint64)
            for shift, kind in _parts(width):
                part = np.frombuffer(handle.read((count - 1) * np.dtype(kind).itemsize), kind)
                values[1:] |= part.astype(np.uint64) << np.uint64(shift)
            keys.append(np.cumsum(values, out=values).view(np.int64))
    return keys


__all__ = ["People", "PeopleIndex"]
