"""A label column released on Dask (:func:`privatize`): the steps of :mod:`labeldp.boundary.engines`, run on
a Dask DataFrame partition by partition, each partition an Arrow batch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from labeldp.accounting.people import People
from labeldp.boundary.batches import CHECKS, BatchChecks, BatchRelease
from labeldp.boundary.engines import Engine, Units, release_on
from labeldp.tables.frames import I0, I1, RANK, U0, U1, batch_of, with_identity


def privatize(frame, out, *, label_column: str, id_column: str, classes, epsilon: float, **options) -> dict[str, Any]:
    """Release the label column of the Dask DataFrame ``frame`` once into the new folder ``out``, a path every
    worker writes to (:func:`~labeldp.boundary.engines.release_on`, whose options it takes: the privacy unit,
    the prior columns, the dataset's name, the budget policy, the noise).

    Each label is epsilon-label-DP (a unit's labels together, with a privacy unit), exactly once whatever
    Dask recomputes: a lost worker, a graph computed twice.
    """
    return release_on(DaskTable(frame), out, label_column=label_column, id_column=id_column, classes=classes,
                      epsilon=epsilon, **options)  # fmt: skip


def _identified(part: pd.DataFrame, column: str, first: str = I0, second: str = I1) -> pd.DataFrame:
    """A partition with the identity of each row's ``column`` as two int64 columns."""
    batch = with_identity(batch_of(part[[column]], [column]), column, first, second)
    return part.assign(**{first: batch.column(first).to_numpy(), second: batch.column(second).to_numpy()})


def _keep(part: pd.DataFrame, limit: int, seed: int) -> pd.DataFrame:
    """A shuffled partition's rows, at most ``limit`` a unit, ranked by a public hash of the seed and the id."""
    words = part[[I0, I1]]
    order = pd.util.hash_pandas_object(words, index=False, hash_key=f"{seed % 10**16:016d}").to_numpy()
    ranked = part.assign(**{RANK: order}).sort_values([U0, U1, RANK, I0, I1], kind="stable")
    return ranked[ranked.groupby([U0, U1]).cumcount().to_numpy() < limit]


class DaskTable(Engine):
    """A Dask DataFrame as a release uses it."""

    name = "Dask"

    def checked(self, checks: BatchChecks) -> dict[str, Any]:
        columns = [checks.label, *checks.keys, *checks.priors]

        def check(part: pd.DataFrame) -> pd.DataFrame:
            return pd.DataFrame([checks(batch_of(part, columns))])

        meta = pd.DataFrame({name: pd.Series(dtype=np.int64 if name == "rows" else bool) for name in CHECKS})
        found = self.frame[columns].map_partitions(check, meta=meta).compute()
        return {name: int(found[name].sum()) if name == "rows" else bool(found[name].any()) for name in CHECKS}

    def _words(self, column: str, frame=None):
        meta = {**(frame if frame is not None else self.frame)[[column]].dtypes.to_dict(), I0: np.int64, I1: np.int64}
        source = frame if frame is not None else self.frame
        return source[[column]].map_partitions(_identified, column, meta=meta)

    def id_keys(self, column: str) -> np.ndarray:
        return self._words(column)[I0].compute().to_numpy()

    def id_held_twice(self, column: str, among: np.ndarray | None) -> Any:
        keyed = self._words(column)
        if among is not None:
            keyed = keyed[keyed[I0].isin(list(among))]
        counted = keyed.groupby([I0, I1]).size()
        twice = counted[counted > 1].compute()
        if twice.empty:
            return None
        first, second = twice.index[0]
        return keyed[(keyed[I0] == first) & (keyed[I1] == second)][column].head(1, npartitions=-1).iloc[0]

    def bound(self, ids: str, unit: str, limit: int, seed: int) -> Units:
        meta = {**self.frame.dtypes.to_dict(), I0: np.int64, I1: np.int64}
        identified = self.frame.map_partitions(_identified, ids, meta=meta)
        meta = {**meta, U0: np.int64, U1: np.int64}
        keyed = identified.map_partitions(_identified, unit, U0, U1, meta=meta)
        self.kept = keyed.shuffle(on=U0).map_partitions(_keep, limit, seed, meta={**meta, RANK: np.uint64})
        counted = self.kept.groupby([U0, U1]).size().compute()
        return Units.of(counted.index.get_level_values(0).to_numpy(), counted.to_numpy())

    def people(self, column: str, every: bool) -> People:
        counted = self._words(column, self.frame if every else self.kept)[I0].value_counts().compute()
        units = Units.of(counted.index.to_numpy(), counted.to_numpy())
        return People.of_counts(column, units.keys, units.rows)

    def unit_of_ids(self) -> tuple[np.ndarray, np.ndarray]:
        pairs = self.kept[[I0, U0]].compute().sort_values(I0)
        return pairs[I0].to_numpy(), pairs[U0].to_numpy()

    def label_is_text(self, column: str) -> bool:
        return not pd.api.types.is_numeric_dtype(self.frame[column].dtype)

    def write(self, path: Path, release: BatchRelease, needed: list[str]) -> None:
        def draw(part: pd.DataFrame) -> pd.DataFrame:
            return release(batch_of(part[needed], needed)).to_pandas()

        released, k = release.written
        meta = pd.DataFrame({release.ids: self.frame[release.ids]._meta})
        identity = pa.string() if meta[release.ids].dtype == object else pa.Schema.from_pandas(meta).field(0).type
        fields = [pa.field(release.ids, identity), pa.field(released, release.class_values.type)]
        meta[released] = pd.Series(dtype=release.class_values.type.to_pandas_dtype())
        if release.priors:
            meta[k] = pd.Series(dtype=np.int32)
            fields.append(pa.field(k, pa.int32()))
        # token: the task's name, chosen rather than hashed from its arguments (the key among them)
        released_rows = self.kept[needed].map_partitions(draw, meta=meta, token="labeldp-release")
        released_rows.to_parquet(str(path), write_index=False, schema=pa.schema(fields))

    def k_range(self, path: Path, column: str) -> tuple[int, int, int | None]:
        import dask.dataframe as dd

        k = dd.read_parquet(str(path), columns=[column])[column]
        low, high, informative = dd.compute(k.min(), k.max(), k[k >= 2].min())
        return int(low), int(high), None if pd.isna(informative) else int(informative)


__all__ = ["DaskTable", "privatize"]
