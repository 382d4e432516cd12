"""What each task of an engine (Spark, Dask) runs on its rows, an Arrow batch at a time: the checks, which
return one bit each, and the keyed release. Light to import: an executor imports this module and the keyed
kernel's, none of the driver's accounting."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd
import pyarrow as pa

from labeldp._validation import check_priors
from labeldp.boundary.domain import LabelDomain
from labeldp.boundary.keys import row_identities
from labeldp.errors import ConfigError, DataError
from labeldp.mechanisms.keyed import keyed_randomized_response, keyed_rr_with_prior, row_words

#: the columns a release adds while it runs: its id's identity (two words), its unit's, its rank in the unit
I0, I1, U0, U1, RANK = (f"__labeldp_{name}__" for name in ("i0", "i1", "u0", "u1", "rank"))
#: what the checks of a batch return: its rows, then whether any label, id or unit, or prior row fails
CHECKS = ("rows", "outside", "missing", "bad")


def with_identity(batch: pa.RecordBatch, column: str, first: str = I0, second: str = I1) -> pa.RecordBatch:
    """``batch`` with the identity of each row's ``column`` as two int64 columns (:func:`row_identities`)."""
    words = row_identities(batch.column(column)).view(np.int64)
    return batch.append_column(first, pa.array(words[:, 0])).append_column(second, pa.array(words[:, 1]))


def arrow_of(frame: pd.DataFrame, text_columns: list[str]) -> pa.Table:
    """A DataFrame as an Arrow table, object text columns made text first: Arrow would infer their type from
    the values and quote the first that does not fit.
    """
    objects = [c for c in text_columns if c in frame.columns and frame[c].dtype == object]
    if objects:
        frame = frame.assign(**{c: frame[c].map(lambda v: None if pd.isna(v) else str(v)) for c in objects})
    try:
        return pa.Table.from_pandas(frame, preserve_index=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise DataError(
            "the DataFrame cannot be converted to an Arrow table: a column of mixed Python objects? "
            "(pyarrow's message is withheld: it may quote a value)"
        ) from None


def identity_frame(values: pd.Series) -> pd.DataFrame:
    """The identity of each value (:func:`row_identities`) as two int64 columns, ``i0`` and ``i1``."""
    words = row_identities(values).view(np.int64)
    return pd.DataFrame({"i0": words[:, 0], "i1": words[:, 1]})


def batch_of(frame: pd.DataFrame, text_columns: list[str]) -> pa.RecordBatch:
    """A DataFrame (a partition) as one Arrow batch (:func:`arrow_of`)."""
    table = arrow_of(frame, text_columns).combine_chunks()
    return (table.to_batches() or [pa.RecordBatch.from_pylist([], schema=table.schema)])[0]


def _prior(batch: pa.RecordBatch, priors: tuple[str, ...]) -> np.ndarray:
    return np.column_stack([batch.column(c).to_numpy(zero_copy_only=False) for c in priors]).astype(np.float64)


@dataclass(frozen=True)
class BatchChecks:
    """The checks of one batch before anything is drawn; reveals of the labels only whether one is outside."""

    domain: LabelDomain
    label: str
    keys: tuple[str, ...]  # the id column and the unit column
    priors: tuple[str, ...]

    def __call__(self, batch: pa.RecordBatch) -> dict[str, int | bool]:
        return {
            "rows": batch.num_rows,
            "outside": _fails(self.domain.arrow_positions, batch.column(self.label), "labels"),
            "missing": any(_fails(row_identities, batch.column(key)) for key in self.keys),
            "bad": bool(self.priors) and _fails(lambda: check_priors(_prior(batch, self.priors))),
        }


def _fails(step, *args) -> bool:
    try:
        step(*args)
    except (ConfigError, DataError, ValueError):
        return True
    return False


@dataclass(frozen=True)
class BatchRelease:
    """The release of one batch of rows by the keyed kernel
    (:mod:`labeldp.mechanisms.keyed`): RR, or RR-with-prior on ``priors``, each label at ``epsilon``. A pure
    function of the key and each row's id: a batch drawn again is released the same."""

    key: bytes = field(repr=False)  # never shown: in no log, plan or error
    epsilon: float
    domain: LabelDomain
    class_values: pa.Array
    label: str
    ids: str
    priors: tuple[str, ...]
    written: tuple[str, str]  # the names of the released label's column and of k's

    def __call__(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        released, k_column = self.written
        positions = self.domain.arrow_positions(batch.column(self.label), f"label column {self.label!r}")
        words = row_words(self.key, row_identities(batch.column(self.ids)))
        columns = {self.ids: batch.column(self.ids)}
        if self.priors:
            noisy, k = keyed_rr_with_prior(positions, _prior(batch, self.priors), self.epsilon, words)
            columns[released] = self.class_values.take(pa.array(noisy))
            columns[k_column] = pa.array(k.astype(np.int32))
        else:
            noisy = keyed_randomized_response(positions, self.domain.size, self.epsilon, words)
            columns[released] = self.class_values.take(pa.array(noisy))
        return pa.RecordBatch.from_pydict(columns)
