"""A label column released where the data lives, on an engine past one machine (:mod:`labeldp.spark`,
:mod:`labeldp.dask`), into the release folder :func:`~labeldp.boundary.privatize_table` writes, which every
route reads as it is. The steps are the same on every engine (:func:`release_on`); an :class:`Engine` runs
them on its table.

Every check runs on the engine as an aggregate before anything is drawn: labels outside the classes (one bit:
whether any is), missing ids or units, priors that are no distributions, duplicated ids (an id is named: ids
are public); the driver never collects a label. A privacy unit keeps at most ``max_rows_per_unit`` rows, chosen
by a public hash of the seed and each row's id (never by a label, nor by where a row lies), in one shuffle.
The release is reserved on the dataset ledgers of the people it holds before the first draw.

**Exactly once.** Each label is released by the keyed kernel (:mod:`labeldp.mechanisms.keyed`), a pure
function of a key drawn from the OS for this release and the row's id. The key lives in the driver's memory
and in the tasks the engine ships to its workers, which read the true labels already (labeldp never writes
it, and it is in no query plan, log or error); so a retried or speculative task, a lost worker or a table
computed twice releases the same labels, bit for bit. Hence every row needs an id: its place in a cluster's
files is no identity (splits, filters and shuffles move it).
"""

from __future__ import annotations

import shutil
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from labeldp._validation import check_epsilon
from labeldp.accounting.datasets import folder_release, new_release, table_facts
from labeldp.accounting.people import People
from labeldp.accounting.policy import BudgetPolicy, Guarantee
from labeldp.accounting.spending import Source, Spending, guarantee_of, unit_guarantee
from labeldp.boundary.batches import BatchChecks, BatchRelease
from labeldp.boundary.column import Draws, prior_spec
from labeldp.boundary.domain import LabelDomain
from labeldp.boundary.units import check_max_rows
from labeldp.errors import ConfigError, DataError
from labeldp.files import write_json_atomic
from labeldp.randomness import NoiseSource
from labeldp.tables.folder_format import (
    K_COLUMN,
    LABELS_FILE,
    LEDGER_FILE,
    RELEASED_COLUMN,
    SIDECAR_FILE,
    describe_release,
)
from labeldp.tables.keys import duplicated_ids_error, row_identities
from labeldp.tables.publishing import folder_lock, partial_folder, publish, refuse_existing
from labeldp.tables.table_files import arrow_class_values, released_type


@dataclass(frozen=True)
class Units:
    """Each unit's key (the first word of its identity), sorted, and its rows kept."""

    keys: np.ndarray
    rows: np.ndarray

    @classmethod
    def of(cls, keys: np.ndarray, rows: np.ndarray) -> Units:
        order = np.argsort(keys, kind="stable")
        return cls(np.asarray(keys, dtype=np.int64)[order], np.asarray(rows, dtype=np.int64)[order])


class Engine(ABC):
    """A table on an engine, as a release uses it: public facts and aggregates come back, never a label."""

    name: str

    def __init__(self, frame):
        self.frame, self.columns = frame, list(frame.columns)
        self.kept = frame  # the rows a release keeps: all of them, until a unit's are bounded

    @abstractmethod
    def checked(self, checks: BatchChecks) -> dict[str, Any]:
        """:class:`BatchChecks` over every batch: the rows summed, each failure any batch's."""

    @abstractmethod
    def id_keys(self, column: str) -> np.ndarray:
        """Each row's id key (the first word of its identity), collected: 8 bytes a row."""

    @abstractmethod
    def id_held_twice(self, column: str, among: np.ndarray | None) -> Any:
        """An id two rows hold (comparing both words), among those whose key is in ``among`` (None: all; else
        a few: hashes of two texts alike are rare); None where there is none."""

    @abstractmethod
    def bound(self, ids: str, unit: str, limit: int, seed: int) -> Units:
        """Keep at most ``limit`` rows of each unit, ranked by a public hash of the seed and their id; returns
        the units kept."""

    @abstractmethod
    def people(self, column: str, every: bool) -> People:
        """The people of ``column`` among the rows kept (``every``: among all rows), with the most rows one has."""

    @abstractmethod
    def unit_of_ids(self) -> tuple[np.ndarray, np.ndarray]:
        """The rows kept's id keys, sorted, and each one's unit key: 16 bytes a row."""

    @abstractmethod
    def label_is_text(self, column: str) -> bool: ...

    @abstractmethod
    def write(self, path: Path, release: BatchRelease, needed: list[str]) -> None:
        """Release the rows kept and write them, as Parquet files, into the folder ``path`` (one computation)."""

    @abstractmethod
    def k_range(self, path: Path, column: str) -> tuple[int, int, int | None]:
        """RR-with-prior's smallest and largest k (``column``) in the written release, and its smallest k >= 2
        (None: none)."""


def _distinct_ids(engine: Engine, column: str, collect: bool) -> np.ndarray | None:
    """An id held twice refused, named (ids are public). ``collect``: the sorted keys of the id column come to
    the driver (8 bytes a row: the people of a release per row) and are compared there; else on the engine."""
    if not collect:
        _refuse_twice(engine, column, None)
        return None
    keys = np.sort(engine.id_keys(column))
    repeated = keys[1:] == keys[:-1]  # an integer id twice, or two texts whose hashes are alike
    if repeated.any():
        _refuse_twice(engine, column, keys[1:][repeated][:1000])
    return keys[np.append(True, ~repeated)]  # sorted: no hashing needed


def _refuse_twice(engine: Engine, column: str, among: np.ndarray | None) -> None:
    found = engine.id_held_twice(column, among)
    if found is not None:
        raise duplicated_ids_error(f"id column {column!r}", found)


def release_on(
    engine: Engine,
    out,
    *,
    label_column: str,
    id_column: str,
    classes: Sequence[Any],
    epsilon: float,
    unit_column: str | None = None,
    max_rows_per_unit: int | None = None,
    seed: int = 0,
    prior_columns: Sequence[str] | None = None,
    dataset_name: str | None = None,
    policy: BudgetPolicy | None = None,
    noise: NoiseSource | None = None,
    described: str | None = None,
) -> dict[str, Any]:
    """Release ``engine``'s label column once into the new folder ``out`` (a path every worker writes to): RR,
    or RR-with-prior on the K ``prior_columns``, each label epsilon-label-DP (with a privacy unit, each unit's
    labels together at epsilon: at most ``max_rows_per_unit`` rows a unit, each at epsilon / c, c the most rows
    a unit keeps), exactly once whatever the engine recomputes (module docstring). Returns the sidecar, with
    ``seconds`` and ``dataset_ledger``.

    Raises
    ------
    labeldp.errors.DataError
        Before anything is drawn: a label outside ``classes``, a missing id or unit, a duplicated id, a prior
        row that is no distribution.
    labeldp.errors.ReleaseExistsError
        If ``out`` exists, or a killed release into it left its partial folder.
    """
    started = time.perf_counter()
    out, noise, policy = Path(out).absolute(), noise or NoiseSource(), policy or BudgetPolicy.from_environment()
    refuse_existing(out)
    domain, eps = LabelDomain(classes), check_epsilon(epsilon)
    priors = tuple(prior_spec(domain.size, prior_columns, None)[0] or ())
    needed, limit = _needed(engine, id_column, label_column, unit_column, max_rows_per_unit, priors)
    keys = (id_column,) if unit_column is None else (id_column, unit_column)
    found = engine.checked(BatchChecks(domain, label_column, keys, priors))
    _refuse(found, domain, label_column, keys, priors)
    rows = int(found["rows"])
    every_id = _distinct_ids(engine, id_column, collect=unit_column is None)
    units = None if unit_column is None or limit is None else engine.bound(id_column, unit_column, limit, seed)
    released_rows = rows if units is None else int(units.rows.sum())
    most_rows = 1 if units is None else int(units.rows.max())

    def people(column: str, every: bool) -> People:
        if units is not None and column == unit_column and not every:
            return People.of_counts(column, units.keys, units.rows)
        if column == id_column and every_id is not None:
            return People.of_distinct(column, every_id)
        return engine.people(column, every)

    facts = table_facts(described or f"a {engine.name} table", label_column, engine.columns, rows)
    source = Source(name=dataset_name, table=facts, columns=engine.columns, unit=unit_column, id_column=id_column,
                    people=people)  # fmt: skip
    spending = Spending(policy, source, new_release(out), f"privatize ({engine.name})", str(out))
    guarantee = guarantee_of(eps, 0.0, unit_column)
    planned = guarantee if units is None else unit_guarantee(guarantee, most_rows)
    spending.reserve(planned)
    draws = Draws(domain.size, eps / most_rows, bool(priors), noise)  # its key: drawn here, kept in memory
    value_type = pa.string() if engine.label_is_text(label_column) else released_type([], domain.declared)
    class_values = arrow_class_values(domain.declared, value_type, label_column)
    release = BatchRelease(draws.key, draws.epsilon, domain, class_values, label_column, id_column, priors,
                           (RELEASED_COLUMN, K_COLUMN))  # fmt: skip
    out.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(out):  # two writers: two draws
        partial = partial_folder(out)
        try:
            folder_release(partial, spending.release)
            engine.write(partial / LABELS_FILE, release, needed)
            if draws.k_spread is not None:
                low, high, informative = engine.k_range(partial / LABELS_FILE, K_COLUMN)
                draws.k_spread.range, draws.k_spread.smallest_informative = [low, high], informative
            written = None if units is None else _written_units(engine, partial, id_column)
            ledger = draws.ledger(released_rows, written)
            unit = None if units is None else {
                "column": unit_column, "max_rows": limit, "seed": seed, "units": int(units.keys.size),
                "rows_read": rows, "rows_kept": released_rows, "most_rows": most_rows, "epsilon": eps,
                "row_epsilon": eps / most_rows,
            }  # fmt: skip
            sidecar = describe_release(
                ledger, draws, released_rows, facts["described"], label_column, id_column, class_values,
                draws.epsilon, list(priors) or None, None, [], 0, noise, unit,
            )  # fmt: skip
            ledger.save(partial / LEDGER_FILE)
            write_json_atomic(partial / SIDECAR_FILE, sidecar)
            spending.record(Guarantee.of_ledger(ledger, 0.0, unit_column))
            publish(partial, out)
        except BaseException:
            shutil.rmtree(partial, ignore_errors=True)  # drawn: its reservation stays on the ledgers (never fewer)
            raise
    return {**sidecar, "seconds": time.perf_counter() - started, "dataset_ledger": spending.summary()}


def _needed(engine: Engine, ids, label: str, unit, max_rows, priors) -> tuple[list[str], int | None]:
    """The columns a release reads, and its bound on a unit's rows; refused (ConfigError) unless coherent."""
    if (unit is None) != (max_rows is None):
        raise ConfigError("a privacy unit needs both unit_column and max_rows_per_unit")
    if ids is None:
        raise ConfigError(f"on {engine.name} every row needs an id (id_column): its release is a function of it")
    needed = [c for c in (ids, label, unit, *priors) if c is not None]
    if set(needed) - set(engine.columns) or len(set(needed)) != len(needed):
        raise ConfigError(f"columns {needed} must be distinct columns of the table, whose columns are {engine.columns}")
    return needed, None if max_rows is None else check_max_rows(max_rows)


def _written_units(engine: Engine, folder: Path, ids: str) -> np.ndarray:
    """Each written row's unit, in the order ``labels.parquet`` is read (the ledger's units, as the one-process
    route records them): its id's key looked up among the kept rows' (32 bytes a row on the driver)."""
    import pyarrow.parquet as pq

    keys, units = engine.unit_of_ids()
    written = row_identities(pq.read_table(folder / LABELS_FILE, columns=[ids]).column(0))[:, 0].view(np.int64)
    return pd.factorize(units[np.searchsorted(keys, written)])[0].astype(np.int64)


def _refuse(found: dict[str, Any], domain: LabelDomain, label: str, keys: tuple[str, ...], priors) -> None:
    if not found["rows"]:
        raise DataError("the table has no rows")
    if found["outside"]:
        raise domain.refusal(f"label column {label!r}")
    if found["missing"]:
        raise DataError(f"columns {list(keys)} have missing values: every row needs its id and its unit")
    if found["bad"]:
        raise DataError(f"prior columns {list(priors)}: some rows are no distribution over the classes")
