"""Models from a source's aggregate reports: noisy positive counts per key, with the noise scale and
contribution bound the source states (a measurement API's summary reports).

**The report table**, one row per key (Parquet or CSV):

``slot``
    the key's slot as the hash spec names it: a column (``advertiser``) or a cross's columns joined by
    ``:`` or ``x`` (``advertiser:site``);
one column per categorical column of the spec
    the key's value in each of its slot's columns (others empty), cast to the impressions table's type;
``noisy_positives``
    the key's positive count plus the source's noise;
``rows``
    the key's number of impressions (public);
``scale``
    b, the scale of the Laplace noise added to the count;
``contribution``
    C, the most one of the source's units (a user, a device) can change the whole set of counts, in L1.

Keys are hashed with the run's spec (colliding keys summed) and fitted as counts
(:func:`labeldp.ads.run_pieces.fit_counts`) on the public impressions table. Nothing is drawn: the ledger
records the source's statement (:func:`~labeldp.boundary.release_external_counts`), epsilon = max C /
min b, pure, per the source's unit.

**It holds only if** every count received independent Laplace noise of scale at least b and C bounds
the L1 change of the *whole* table (every key of every slot) when one unit's conversions change. A bound
per key or per report is not that: a unit reaching k keys changes the table by up to k C, and the printed
epsilon would be k times too small. Reports of the same units released again (another window) compose:
give them to one ledger, or add their epsilons.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from labeldp.ads.route import ROUTE_TAGS, run_route
from labeldp.ads.run_pieces import HashedTable, fit_counts
from labeldp.boundary import Release, release_external_counts
from labeldp.config.hashed_config import HashedConfig
from labeldp.data.hashing import HashSpec, hash_columns, parquet_files
from labeldp.errors import ConfigError, DataError
from labeldp.training.from_counts import CountStatistics, base_rate, bucket_rates

#: the columns of a report table besides the keys' values
REPORT_COLUMNS = ("slot", "noisy_positives", "rows", "scale", "contribution")


def read_reports(reports, spec: HashSpec, types: dict[str, pa.DataType] | None = None) -> dict[str, Any]:
    """The reports' keys hashed into the spec's buckets (cast to the impressions table's ``types``): per bucket
    ``positives``, ``sizes`` and ``variance``, and ``epsilon`` = max C / min b.
    """
    frame = _report_table(reports)
    missing = [name for name in (*REPORT_COLUMNS, *spec.columns) if name not in frame.column_names]
    if missing:
        raise DataError(f"the report table lacks the columns {missing}")
    numbers = {name: frame.column(name).to_numpy(zero_copy_only=False) for name in REPORT_COLUMNS[1:]}
    if any(frame.column(name).null_count for name in REPORT_COLUMNS):
        raise DataError(f"the report table has missing values in {list(REPORT_COLUMNS)}")
    if min(numbers["scale"].min(), numbers["contribution"].min()) <= 0 or numbers["rows"].min() < 0:
        raise DataError("a report's scale and contribution must be > 0, its rows >= 0")
    slots = {slot.name: index for index, slot in enumerate(spec.slots)}
    named = np.array([str(name).replace(":", "x") for name in frame.column("slot").to_pylist()])
    unknown = sorted(set(named) - set(slots))
    if unknown:
        raise DataError(f"the reports name slots the run does not hash: {unknown} (it hashes {sorted(slots)})")
    buckets = np.empty(frame.num_rows, dtype=np.int64)
    for name, index in slots.items():
        rows = np.flatnonzero(named == name)
        slot = spec.slots[index]
        keys = {column: _cast(frame.column(column).take(rows), (types or {}).get(column)) for column in slot.columns}
        if rows.size and any(keys[column].null_count for column in slot.columns):
            raise DataError(f"reports of slot {name!r} lack a value of {list(slot.columns)}")
        one = HashSpec((slot,), spec.seed)
        buckets[rows] = hash_columns(keys, one)[:, 0] + spec.offsets[index] if rows.size else 0
    size = spec.num_buckets
    variance = np.bincount(buckets, weights=2 * numbers["scale"].astype(np.float64) ** 2, minlength=size)
    return {
        "positives": np.bincount(buckets, weights=numbers["noisy_positives"].astype(np.float64), minlength=size),
        "sizes": np.bincount(buckets, weights=numbers["rows"].astype(np.float64), minlength=size).astype(np.int64),
        "variance": variance,
        "epsilon": float(numbers["contribution"].max() / numbers["scale"].min()),
    }


def _report_table(reports) -> pa.Table:
    if isinstance(reports, pa.Table):
        return reports
    if hasattr(reports, "to_parquet"):  # a DataFrame
        return pa.Table.from_pandas(reports, preserve_index=False)
    return pa.concat_tables(_read(reports))


def _read(path) -> list[pa.Table]:
    if str(path).endswith((".csv", ".csv.gz")):
        return [pa_csv.read_csv(path)]
    try:
        return [pq.read_table(file) for file in parquet_files(path)]
    except pa.ArrowInvalid as error:
        raise DataError(f"{path}: not a Parquet table ({error})") from None


def _cast(values: pa.ChunkedArray, kind: pa.DataType | None) -> pa.Array:
    values = values.combine_chunks()
    if kind is None or values.type == kind:
        return values
    try:
        return values.cast(kind)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
        raise DataError(f"a report key cannot be read as the table's {kind}: {error}") from None


def report_statistics(found: Mapping[str, Any], spec: HashSpec) -> CountStatistics:
    """The counts' post-processing of :func:`read_reports`' buckets, the noise variance averaged over the
    buckets that hold a report.
    """
    sizes, positives = np.asarray(found["sizes"]), np.asarray(found["positives"])
    positives = np.where(sizes > 0, positives, 0.0)
    occupied = np.asarray(found["variance"]) > 0
    variance = float(np.asarray(found["variance"])[occupied].mean()) if occupied.any() else 0.0
    slots = spec.slot_of_bucket()
    rate = base_rate(positives, sizes, slots)
    rates, slopes = bucket_rates(positives, sizes, slots, variance, rate)
    return CountStatistics(positives, sizes, rates, slopes, rate, variance, int(sizes.sum() // spec.num_slots))


def fit_from_reports(table, out, *, reports, spec: HashSpec, **options) -> dict[str, Any]:
    """Fit the logistic regression from a source's aggregate ``reports`` on the public impressions ``table``
    (Parquet), into the run folder ``out``; the ledger records the source's stated guarantee (see
    :mod:`labeldp.ads.reports`).

    ``options`` are :class:`~labeldp.config.hashed_config.HashedConfig`'s training settings, without a privacy
    unit: the source bounds its own units. Malformed reports are refused before anything is recorded;
    returns the summary written to ``summary.json``.
    """
    config = HashedConfig(**{**options, "route": "reports"})
    if config.unit_column is not None:
        raise ConfigError("aggregate reports are bounded per unit by their source, whose statement is recorded")
    data = HashedTable(table, spec, config.block_rows, data_parallel=True)
    data.check_columns()
    schema = pq.read_schema(parquet_files(data.source)[0])
    found = read_reports(reports, spec, {name: schema.field(name).type for name in spec.columns})
    statistics = report_statistics(found, spec)
    if statistics.rows == 0:
        raise DataError("the reports count no rows")
    description = f"aggregate reports of noisy positive counts over {spec.num_slots} slots (Laplace)"

    def draw(ledger, members) -> Release:
        arrays = {name: found[name] for name in ("positives", "sizes", "variance")}
        return release_external_counts(ledger, members, found["epsilon"], description, ROUTE_TAGS["reports"], **arrays)

    def train(table: HashedTable, release: Release, config: HashedConfig):
        model, history = fit_counts(table, report_statistics(release.arrays, spec), None, config, table.sizes)
        return model, history, statistics.rate

    facts = {"reports": str(reports) if isinstance(reports, (str, bytes)) or hasattr(reports, "__fspath__") else None}
    facts["stated_epsilon"] = found["epsilon"]
    return run_route(data, out, config, facts, draw, train, True)


__all__ = ["REPORT_COLUMNS", "fit_from_reports", "read_reports", "report_statistics"]
