"""A label column released once into a folder.

:func:`privatize_table` streams a table (:mod:`labeldp.boundary.table_source`) in blocks of
``batch_rows`` rows, one pass for the release after a first pass over the label, id and unit columns,
and writes the folder :mod:`labeldp.tables.folder_format` describes;
:func:`~labeldp.boundary.released.load_release` reads it back. What is written depends on the labels
only through the mechanism's output: no count or other statistic of the labels is computed or written.

**Release once.** A release folder is never overwritten (:class:`~labeldp.errors.ReleaseExistsError`):
releasing again would spend the labels' budget a second time. It is written under a hidden name
(``.OUT.partial``, its owner's only) and renamed into place once flushed to disk, while a lock
(``.OUT.lock``, never removed) keeps a second process out (:mod:`labeldp.tables.publishing`). An error or
interrupt removes the partial folder; one a killed process left holds labels already drawn, so the next
release into ``out`` refuses to draw until the user deletes it.
"""

from __future__ import annotations

import dataclasses
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from labeldp._validation import check_epsilon
from labeldp.accounting import PrivacyLedger
from labeldp.accounting.datasets import folder_release, new_release, table_facts
from labeldp.accounting.policy import BudgetPolicy, Guarantee
from labeldp.accounting.spending import Spending, guarantee_of, unit_guarantee
from labeldp.boundary.column import Draws, check_batch_rows, prior_spec
from labeldp.boundary.domain import LabelDomain
from labeldp.boundary.table_source import check_rows, read_blocks
from labeldp.boundary.units import bounded_rows, check_max_rows
from labeldp.errors import ConfigError, DataError
from labeldp.files import write_json_atomic
from labeldp.mechanisms import (
    randomized_response_likelihood,
    rr_with_prior_likelihood,
)
from labeldp.randomness import NoiseSource
from labeldp.tables.folder_format import (
    CHANNEL_PREFIX,
    K_COLUMN,
    LABELS_FILE,
    LEDGER_FILE,
    RELEASED_COLUMN,
    ROW_COLUMN,
    SIDECAR_FILE,
    describe_release,
)
from labeldp.tables.publishing import folder_lock, fsync, partial_folder, publish, refuse_existing, system_allocator
from labeldp.tables.table_batches import DEFAULT_BATCH_ROWS, kept_batches, ledger_source, read_batches
from labeldp.tables.table_files import (
    arrow_class_values,
    check_each_row_once,
    open_source,
    released_type,
    source_schema,
)


def privatize_table(
    source,
    out,
    *,
    label_column: str,
    id_column: str | None = None,
    classes: Sequence[Any],
    epsilon: float,
    prior_columns: Sequence[str] | None = None,
    prior=None,
    write_channel: bool = False,
    batch_rows: int = DEFAULT_BATCH_ROWS,
    noise: NoiseSource = NoiseSource(),
    unit_column: str | None = None,
    max_rows_per_unit: int | None = None,
    seed: int = 0,
    one_row_per_person: bool = False,
    dataset_name: str | None = None,
    policy: BudgetPolicy | None = None,
) -> dict[str, Any]:
    """Release a table's label column once, streamed in blocks of ``batch_rows`` rows, into the new folder
    ``out`` (:mod:`labeldp.tables.folder_format`).

    Each label is released once by RR (or RR-with-prior, given a prior), epsilon-label-DP (RR-with-prior:
    when the priors depend neither on the row's own label nor, with a privacy unit, on any label of its
    unit), recorded in ``ledger.json`` as one entry over every row; with an insecure seed the release is NOT
    PRIVATE, and its sidecar says so. Every argument, label and id is checked before anything is drawn; a
    label outside ``classes`` is neither named nor counted; nothing is written to ``out`` if drawing fails.

    Parameters
    ----------
    source : str or os.PathLike or pyarrow.Table or pyarrow.dataset.Dataset or pandas.DataFrame
        A Parquet or CSV file, a folder of them (:func:`~labeldp.tables.table_files.data_files`), an Arrow
        table or dataset, or a DataFrame.
    label_column : str
        The private labels; a CSV file's are read as text.
    id_column : str or None, optional
        A public row identifier, one distinct value a row, copied beside each released label; without one
        each row's position in the input is written as the column ``row``.
    classes : sequence
        The label domain, in order: public, declared.
    prior_columns : sequence of str or None, optional
        RR-with-prior with a per-row prior: K numeric columns, one per class in the classes' order.
    prior : array_like or None, optional
        RR-with-prior with one (K,) prior shared by every row.
    write_channel : bool, optional
        Also write each row's channel, ``channel_j`` = Pr[released | true class j].
    batch_rows : int, optional
        Rows drawn and written at a time (one Parquet row group), which bounds the release pass's memory
        (the first pass keeps 8 bytes a row for the ids).
    unit_column, max_rows_per_unit, seed : optional
        Each row's public privacy unit (e.g. a user id), the most rows of a unit released, and the public
        seed choosing them without reading a label (:func:`~labeldp.boundary.units.bound_contributions`, the
        rows :func:`~labeldp.boundary.column.privatize` keeps). ``epsilon`` is then each unit's: a kept row
        gets epsilon / c, c the most rows a unit keeps; the other rows are not released, the ledger composes
        per unit, and the sidecar's ``privacy_unit`` states the rule, the counts and both epsilons.
    one_row_per_person : bool, optional
        The user's statement that no person has two rows, letting several files be read without an id or
        unit column (:func:`~labeldp.tables.table_files.check_each_row_once`).
    dataset_name, policy : optional
        The group of people the labels belong to, and the dataset ledgers' folder and cap (None:
        :meth:`~labeldp.accounting.policy.BudgetPolicy.from_environment`): the release is reserved on the
        ledgers of the people it holds before anything is drawn (``docs/dataset-ledger.md``).

    Returns
    -------
    dict
        The sidecar (``release.json``'s content) with ``seconds``, the time it took.

    Raises
    ------
    labeldp.errors.ReleaseExistsError
        If ``out`` exists, or a killed release into it left its partial folder.
    labeldp.errors.RunLockedError
        If another process is writing a release to ``out``.
    """
    started = time.perf_counter()
    out = Path(out)
    refuse_existing(out)
    domain = LabelDomain(classes)
    eps = check_epsilon(epsilon)
    block_rows = check_batch_rows(batch_rows)
    columns_of_priors, shared = prior_spec(domain.size, prior_columns, prior)
    if not isinstance(noise, NoiseSource):
        raise ConfigError(f"noise must be a labeldp.randomness.NoiseSource, got {type(noise).__name__}")
    if (unit_column is None) != (max_rows_per_unit is None):
        raise ConfigError(
            "a privacy unit needs both unit_column (each row's unit) and max_rows_per_unit (the most rows of a "
            "unit released)"
        )
    units = (
        None
        if unit_column is None or max_rows_per_unit is None  # both or neither (checked above)
        else _UnitRule(unit_column, check_max_rows(max_rows_per_unit), int(seed))
    )
    needed = [
        *([id_column] if id_column is not None else []),
        label_column,
        *(columns_of_priors or ()),
        *([unit_column] if unit_column is not None else []),
    ]
    if len(set(needed)) != len(needed):
        raise ConfigError(f"the id, label, prior and unit columns must be distinct, got {needed}")
    if id_column is not None and (id_column in (RELEASED_COLUMN, K_COLUMN) or id_column.startswith(CHANNEL_PREFIX)):
        raise ConfigError(f"id column {id_column!r} would clash with a column of the release; rename it first")
    with system_allocator():
        return _privatize_table(
            source,
            out,
            started,
            domain,
            eps,
            block_rows,
            columns_of_priors,
            shared,
            needed,
            label_column,
            id_column,
            write_channel,
            noise,
            units,
            one_row_per_person,
            dataset_name,
            policy or BudgetPolicy.from_environment(),
        )


@dataclasses.dataclass(frozen=True)
class _UnitRule:
    """A privacy unit's column and the public rule bounding its rows."""

    column: str
    max_rows: int
    seed: int

    def keep(self, keys: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
        """The kept rows as a mask, their unit codes in [0, kept units), and the sidecar's ``privacy_unit``;
        reads the public unit keys only.
        """
        kept, kept_units, most_rows = bounded_rows(keys, self.max_rows, self.seed)
        mask = np.zeros(keys.size, dtype=bool)
        mask[kept] = True
        facts = {
            "column": self.column,
            "max_rows": self.max_rows,
            "seed": self.seed,
            "units": int(kept_units.max()) + 1,
            "rows_read": int(keys.size),
            "rows_kept": int(kept.size),
            "most_rows": most_rows,
            "epsilon": epsilon,
            "row_epsilon": epsilon / most_rows,
        }
        return mask, kept_units, facts


def _reserved(source, out, facts, unit_column, unit_keys, id_column, ids, kept, epsilon, dataset_name, policy):
    """The release's spend, reserved on the dataset ledgers of the people its kept rows hold (refused past the
    policy's cap) before anything is drawn."""
    rows = None if kept is None else kept[0]
    named = dict(name=dataset_name, unit=unit_column, id_column=id_column)
    found = ledger_source(source, facts, rows, unit_keys, ids, **named)
    guarantee = guarantee_of(epsilon, 0.0, unit_column)
    if kept is not None:
        guarantee = unit_guarantee(guarantee, int(kept[2]["most_rows"]))
    spending = Spending(policy, found, new_release(out), "privatize", str(out))
    spending.reserve(guarantee)
    return spending


#: the column of each kept row's position in the table, while a privacy unit's kept rows stream past
_POSITION = "__labeldp_position__"


def _privatize_table(
    source,
    out: Path,
    started: float,
    domain: LabelDomain,
    eps: float,
    block_rows: int,
    columns_of_priors,
    shared,
    needed: list[str],
    label_column: str,
    id_column: str | None,
    write_channel: bool,
    noise: NoiseSource,
    units: _UnitRule | None,
    one_row_per_person: bool,
    dataset_name: str | None,
    policy: BudgetPolicy,
) -> dict[str, Any]:
    unit_column = None if units is None else units.column
    datasets, described = open_source(source, [label_column, id_column, unit_column])
    check_each_row_once(len(datasets), described, id_column, unit_column, one_row_per_person)
    schema = source_schema(datasets, needed)
    class_values = arrow_class_values(domain.declared, released_type(datasets, domain.declared), label_column)
    for name in columns_of_priors or ():
        if not (pa.types.is_floating(schema.field(name).type) or pa.types.is_integer(schema.field(name).type)):
            raise DataError(f"prior column {name!r} must be numeric, got {schema.field(name).type}")
    if id_column is not None and pa.types.is_nested(schema.field(id_column).type):
        raise DataError(
            f"id column {id_column!r} must hold one value a row (a number, a string, a date), got "
            f"{schema.field(id_column).type}"
        )
    rows, unit_keys, ids = check_rows(
        datasets, schema, domain, label_column, id_column, described, columns_of_priors, unit_column
    )
    if units is None:
        kept = None
    else:
        assert unit_keys is not None  # check_rows reads the unit column it is given
        kept = units.keep(unit_keys, eps)
    names = datasets[0].schema.names
    facts = table_facts(described, label_column, names, rows)
    spending = _reserved(source, out, facts, unit_column, unit_keys, id_column, ids, kept, eps, dataset_name, policy)
    del unit_keys, ids
    drawing = False
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with folder_lock(out):  # two writers: two draws
            partial = partial_folder(out)
            drawing = True
            try:
                arguments = (schema, label_column, id_column, domain, class_values, eps, columns_of_priors, shared)
                sidecar = _write_release(
                    partial, datasets, *arguments, write_channel, block_rows, noise, rows, described, kept
                )
                drawn = PrivacyLedger.load(partial / LEDGER_FILE)  # on the dataset ledgers before it is published
                folder_release(partial, spending.release)
                spending.record(Guarantee.of_ledger(drawn, 0.0, unit_column))
                publish(partial, out)
            except BaseException:
                shutil.rmtree(partial, ignore_errors=True)
                raise
    except BaseException:
        if not drawing:  # nothing was drawn: its reservation on the dataset ledgers is withdrawn
            spending.cancel()
        raise
    return {**sidecar, "seconds": time.perf_counter() - started, "dataset_ledger": spending.summary()}


def _write_release(
    folder: Path,
    datasets,
    schema: pa.Schema,
    label_column: str,
    id_column: str | None,
    domain: LabelDomain,
    class_values: pa.Array,
    epsilon: float,
    prior_columns,
    shared,
    write_channel: bool,
    block_rows: int,
    noise: NoiseSource,
    rows: int,
    described: str,
    kept: tuple[np.ndarray, np.ndarray, dict[str, Any]] | None,
) -> dict[str, Any]:
    """Draw the release block by block into ``folder``, then write its ledger and sidecar and flush the folder;
    with a privacy unit (``kept``) only the kept rows, at the per-row epsilon. Returns the sidecar.
    """
    with_prior = prior_columns is not None or shared is not None
    unit_facts, kept_units = None, None
    batch_ids = id_column
    if kept is not None:
        mask, kept_units, unit_facts = kept
        epsilon, rows = unit_facts["row_epsilon"], unit_facts["rows_kept"]
        schema = pa.schema([field for field in schema if field.name != unit_facts["column"]])
    draws = Draws(domain.size, epsilon, with_prior, noise)
    channel_names = [f"{CHANNEL_PREFIX}{j}" for j in range(domain.size)] if write_channel else []
    batches = read_batches(datasets, schema, label_column)
    if kept is not None:
        batches = kept_batches(batches, mask, None if id_column is not None else _POSITION)
        batch_ids = id_column if id_column is not None else _POSITION
    written = _write_labels(
        folder / LABELS_FILE,
        read_blocks(batches, block_rows, domain, label_column, batch_ids, prior_columns),
        schema.field(id_column) if id_column is not None else pa.field(ROW_COLUMN, pa.int64(), nullable=False),
        class_values,
        draws,
        shared,
        channel_names,
    )
    if written != rows:
        raise DataError(f"{described} changed while it was being released ({rows} rows, then {written})")
    ledger = draws.ledger(rows, kept_units)
    ledger.save(folder / LEDGER_FILE)
    sidecar = describe_release(
        ledger,
        draws,
        rows,
        described,
        label_column,
        id_column,
        class_values,
        epsilon,
        prior_columns,
        shared,
        channel_names,
        block_rows,
        noise,
        unit_facts,
    )
    write_json_atomic(folder / SIDECAR_FILE, sidecar)
    for name in (LABELS_FILE, LEDGER_FILE, SIDECAR_FILE):
        fsync(folder / name)
    fsync(folder)
    return sidecar


def _write_labels(
    path: Path,
    blocks: Iterator,
    id_field: pa.Field,
    class_values: pa.Array,
    draws: Draws,
    shared: np.ndarray | None,
    channel_names: list[str],
) -> int:
    """Draw each block and write it as one row group of ``labels.parquet``; returns the rows written."""
    num_classes, epsilon, with_prior = draws.num_classes, draws.epsilon, draws.k_spread is not None
    k_type = pa.int8() if num_classes < 128 else pa.int32()
    fields = [id_field, pa.field(RELEASED_COLUMN, class_values.type, nullable=False)]
    if with_prior:
        fields.append(pa.field(K_COLUMN, k_type, nullable=False))
    fields += [pa.field(name, pa.float64(), nullable=False) for name in channel_names]
    out_schema = pa.schema(fields)
    written = 0
    with pq.ParquetWriter(path, out_schema, use_dictionary=[RELEASED_COLUMN, K_COLUMN]) as writer:
        for block in blocks:
            prior = block.prior if shared is None else np.broadcast_to(shared, (block.rows, num_classes))
            noisy, k = draws.draw(block.positions, prior, block.ids)
            arrays = [block.ids, class_values.take(pa.array(noisy))]
            if k is not None:  # with a prior
                arrays.append(pa.array(k.astype(k_type.to_pandas_dtype())))
            if channel_names:
                likelihood = (
                    rr_with_prior_likelihood(noisy, prior, epsilon)
                    if with_prior
                    else randomized_response_likelihood(noisy, num_classes, epsilon)
                )
                arrays += [pa.array(likelihood[:, j]) for j in range(num_classes)]
            writer.write_table(pa.Table.from_arrays(arrays, schema=out_schema), row_group_size=block.rows)
            written += block.rows
    return written


__all__ = ["privatize_table"]
