"""What each task of an engine (Spark, Dask) runs on its rows, an Arrow batch at a time: the checks, which
return one bit each, and the keyed release. Light to import: an executor imports this module, the keyed
kernel's and :mod:`labeldp.tables.frames`, none of the driver's accounting."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from labeldp._validation import check_priors
from labeldp.boundary.domain import LabelDomain
from labeldp.errors import ConfigError, DataError
from labeldp.mechanisms.keyed import keyed_randomized_response, keyed_rr_with_prior, row_words
from labeldp.tables.keys import row_identities

#: what the checks of a batch return: its rows, then whether any label, id or unit, or prior row fails
CHECKS = ("rows", "outside", "missing", "bad")


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
