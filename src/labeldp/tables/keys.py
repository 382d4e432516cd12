"""Row keys: ids and privacy units normalised as labels are, so that one person is one key.

A user id may be ``17`` in Parquet, ``"17"`` in CSV, ``17.0`` after pandas saw a missing value, or mixed
within one column. Every route compares ids and units, and the label domain labels, by
:func:`canonical_label`'s spelling, so none of these splits a person in two or hides a duplicated row. Keys
are public; nothing here reads a label.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from labeldp.errors import DataError


def canonical_label(value: Any) -> str:
    """One spelling per label value: ``1``, ``1.0`` and `` 1`` are one class, so are ``True``, ``true`` and ``1``."""
    text = str(value).strip()
    if text.lower() in ("true", "false"):
        return "1" if text.lower() == "true" else "0"
    try:
        return str(int(text))  # exact: a 19-digit id must not round through a float
    except ValueError:
        pass
    try:
        number = float(text)
    except ValueError:
        return text
    return str(int(number)) if number.is_integer() else repr(number)


def _uniques(values, missing: str) -> tuple[np.ndarray, list]:
    """Each row's code and the distinct raw values; a missing value is refused with the message ``missing``."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if values.null_count:
            raise DataError(missing)
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        encoded = pc.dictionary_encode(values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values)
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        uniques = encoded.dictionary.to_pylist()
    else:
        series = values if isinstance(values, pd.Series) else pd.Series(np.asarray(values, dtype=object))
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        if codes.size and codes.min() < 0:
            raise DataError(missing)
        codes, uniques = codes.astype(np.int64), list(uniques)
    if any(isinstance(value, str) and not value.strip() for value in uniques):  # an empty CSV field
        raise DataError(missing)
    return codes, uniques


def _integers(values) -> np.ndarray | None:
    """The values as a numpy array if they are integers that int64 holds (their own canonical spelling), else
    None: an unsigned id past 2^63 goes the way of its text, as it does read from CSV."""
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        found = values.to_numpy() if pa.types.is_integer(values.type) and not values.null_count else None
    elif isinstance(values, (np.ndarray, pd.Series)) and values.dtype.kind in "iu":
        found = np.asarray(values)
    else:
        return None
    if found is not None and found.dtype.kind == "u" and found.size and found.max() >= 1 << 63:
        return None
    return found


def canonical_codes(values, missing: str = "a key column has missing values") -> np.ndarray:
    """Each row's key as an int64 code in [0, distinct keys), in order of first appearance, values of one
    canonical spelling sharing a code (exact: no hashing); a missing value is refused.
    """
    integers = _integers(values)
    if integers is not None:
        return pd.factorize(integers)[0].astype(np.int64)
    codes, uniques = _uniques(values, missing)
    spelled = pd.factorize(pd.Series([canonical_label(value) for value in uniques], dtype=object))[0]
    return pd.factorize(spelled[codes])[0].astype(np.int64)


def row_keys(values, missing: str = "a key column has missing values") -> np.ndarray:
    """Each row's key as 64 bits (8 bytes a row, for tables read in blocks): an integer spelling is itself,
    any other spelling hashed; a missing value is refused.

    Unequal spellings collide with probability about 2^-64 a pair, which merges two units (bounding their
    rows together: never weaker) and is resolved exactly for ids (:func:`canonical_text`).
    """
    return row_identities(values, missing)[:, 0].view(np.int64)


def row_identities(values, missing: str = "a key column has missing values") -> np.ndarray:
    """Each row's key as two 64-bit words, (n, 2) uint64: an integer spelling is itself and 0, any other
    spelling two independent hashes (unequal spellings share both with probability about 2^-128 a pair):
    the identity a keyed draw is a function of (:mod:`labeldp.mechanisms.keyed`)."""
    integers = _integers(values)
    if integers is not None:
        words = np.zeros((integers.size, 2), dtype=np.uint64)
        words[:, 0] = integers.astype(np.int64).view(np.uint64)  # uint64 wraps around: still one to one
        return words
    codes, uniques = _uniques(values, missing)
    spellings = [canonical_label(value) for value in uniques]
    words = np.zeros((len(spellings), 2), dtype=np.uint64)
    hashed = []
    for position, spelling in enumerate(spellings):
        number = _int64(spelling)
        if number is None:
            hashed.append(position)
        else:
            words[position, 0] = np.int64(number).view(np.uint64)
    if hashed:
        texts = np.array([spellings[position] for position in hashed], dtype=object)
        words[hashed, 0] = _hash_texts(texts).view(np.uint64)
        words[hashed, 1] = pd.util.hash_array(texts, hash_key=_SECOND_HASH, categorize=False)
    return words[codes]


#: the key of the second hash of a spelling (public: identities are public)
_SECOND_HASH = "labeldp-identity"


def _hash_texts(texts: np.ndarray) -> np.ndarray:
    """64-bit hashes (int64) of an object array of strings (pandas' ``hash_array``, one vectorised call)."""
    return pd.util.hash_array(texts, categorize=False).view(np.int64)


def canonical_text(values) -> list[str]:
    """Each row's canonical spelling (exact comparison of keys whose hashes collide)."""
    codes, uniques = _uniques(values, "a key column has missing values")
    spellings = np.array([canonical_label(value) for value in uniques], dtype=object)
    return list(spellings[codes])


def _int64(spelling: str) -> int | None:
    try:
        number = int(spelling)
    except ValueError:
        return None
    return number if -(1 << 63) <= number < (1 << 63) else None


def refuse_duplicated(ids: np.ndarray, where: str, after: str = "; nothing was released") -> None:
    """Refuse ids held in memory (compared exactly) if one occurs twice (:func:`duplicated_ids_error`)."""
    index = pd.Index(ids)
    if not index.is_unique:
        raise duplicated_ids_error(where, index[index.duplicated()][0], after)


def duplicated_ids_error(where: str, example: Any, after: str = "; nothing was released") -> DataError:
    """The error for a duplicated id, naming it (ids are public), never a label."""
    return DataError(
        f"{where} has duplicated values ({example.item() if isinstance(example, np.generic) else example!r} at least "
        "twice): each row needs an id of its own, or its "
        "label would be released twice, with independent noise, under a ledger that shows one release. Rows read "
        "twice usually come from a stray copy of a file, or the same file in a second format (events.csv beside "
        f"events.parquet), in the table's folder: remove it{after}"
    )


__all__ = ["canonical_codes", "canonical_label", "canonical_text", "row_identities", "row_keys"]
