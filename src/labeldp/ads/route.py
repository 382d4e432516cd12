"""The ads route as one call: a Parquet table of impressions, its labels released once through the
boundary, a hashed model trained out of core on the release into a run folder
(:mod:`labeldp.ads.folder`), and predictions on new rows hashed the same way.

With a unit column the ledger composes per unit (a user's rows are protected together); with
``max_rows_per_unit`` = m at most m rows of a unit are released, chosen by the public seed, each row's
epsilon then about epsilon / m. ``summary.json`` gives both.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from labeldp import distributed
from labeldp.accounting import PrivacyLedger
from labeldp.accounting.datasets import folder_release, new_release, saved_release, table_facts
from labeldp.accounting.policy import BudgetPolicy, Guarantee
from labeldp.accounting.spending import Spending, guarantee_of, unit_guarantee
from labeldp.ads.folder import HashedRunFolder, read_summary
from labeldp.ads.run_pieces import HashedTable, fit_counts, release_counts, train_on_channel, unit_members
from labeldp.boundary import LabelDomain, Release, release_external_labels
from labeldp.boundary.release_parts import release_randomized_response_part
from labeldp.boundary.units import unit_codes
from labeldp.config.hashed_config import DEFAULT_BLOCK_ROWS, HashedConfig
from labeldp.data.hashed_table import rank_private_labels, read_column, read_private_labels
from labeldp.data.hashing import HashSpec, hashed_blocks, parquet_files, table_rows
from labeldp.errors import ConfigError
from labeldp.evaluation import classification_metrics
from labeldp.mechanisms import parse_channel
from labeldp.randomness import NoiseSource
from labeldp.released_metrics import estimated_classification_metrics
from labeldp.tables.table_batches import ledger_source
from labeldp.training.from_counts import CountStatistics
from labeldp.training.out_of_core import load_sparse_model, predict_sparse, save_sparse_model

#: the ledger entry's tag of each route's one release
ROUTE_TAGS = {"counts": "counts", "rr": "labels", "source": "source", "reports": "reports"}
#: what a route trains from its release: ``train(table, release, config) -> (model, history, rate)``
Trainer = Callable[[HashedTable, Release, HashedConfig], tuple[Any, list, float]]


def _classes(classes: Sequence) -> list:
    declared = list(LabelDomain(classes).declared)
    if len(declared) != 2:
        raise ConfigError(
            f"the ads route's models are binary: declare two classes, the positive second, got {declared}"
        )
    return declared


def fit_hashed(
    table,
    out,
    *,
    label_column: str,
    classes: Sequence,
    spec: HashSpec,
    epsilon: float,
    noise: NoiseSource | None = None,
    policy: BudgetPolicy | None = None,
    **options,
) -> dict[str, Any]:
    """Release the label column once, train a hashed model on the release out of core, and write the run
    folder ``out``: epsilon-label-DP per privacy unit (per row without a unit column).

    ``table`` is a Parquet file or folder, its categorical columns public; ``classes`` the two label values,
    the positive second; ``spec`` the hashed slots (:func:`labeldp.ads.hash_spec`); ``options``
    :class:`~labeldp.config.hashed_config.HashedConfig`'s fields: ``route`` (``"counts"``: noisy label counts over
    every bucket; ``"rr"``: randomized response on every label), ``model``, ``unit_column``,
    ``max_rows_per_unit``, the training settings. ``out`` is new, or an unfinished run of the same settings,
    continued from its saved release (:class:`~labeldp.errors.ReleaseExistsError` otherwise). Settings and
    labels are checked before anything is drawn, and the release reserved on the dataset ledgers of ``policy``
    (None: :meth:`~labeldp.accounting.policy.BudgetPolicy.from_environment`). Returns the summary written to
    ``summary.json``.
    """
    config = HashedConfig(**options)
    if config.route not in ("counts", "rr"):
        raise ConfigError(f"route {config.route!r}: use fit_from_noisy_source or fit_from_reports")
    classes, noise = _classes(classes), noise or NoiseSource()
    data = HashedTable(table, spec, config.block_rows, data_parallel=True)
    data.check_columns(label_column, config.unit_column)
    epsilon = _positive(epsilon)

    def draw(ledger: PrivacyLedger, members: np.ndarray) -> Release | None:
        if config.route == "counts":  # each rank counts its rows; rank 0 alone draws from "histogram"
            return release_counts(
                data,
                label_column,
                classes,
                ledger,
                members,
                epsilon,
                noise.generator("histogram"),
                ROUTE_TAGS["counts"],
            )
        rows, labels = rank_private_labels(data.source, label_column, classes, data.rank, data.world)
        mine = np.flatnonzero(np.isin(rows, members, assume_unique=True))
        rng = noise.generator("label-release", *label_stream(data.rank, data.world))
        mine_labels = labels[mine] if labels is not None and mine.size else None  # a rank may hold no member
        return release_randomized_response_part(
            ledger, mine_labels, rows[mine], members, 2, epsilon, rng, ROUTE_TAGS["rr"], distributed.gather_to_main
        )

    facts = {"label_column": label_column, "classes": classes, "epsilon": epsilon, "noise": noise.describe()}
    train = _train_counts if config.route == "counts" else _train_labels
    policy = policy or BudgetPolicy.from_environment()
    return run_route(data, out, config, facts, draw, train, noise.private, shared_draw=True, policy=policy)


def label_stream(rank: int, world: int) -> tuple[int, ...]:
    """The ids of the noise stream a rank draws its rows' labels from: none in one process, ``(world, rank)``
    under ``torchrun``, so that no two ranks draw from one stream.
    """
    return (world, rank) if world > 1 else ()


def fit_from_noisy_source(
    table,
    out,
    *,
    label_column: str,
    classes: Sequence,
    spec: HashSpec,
    channel,
    stated_epsilon: float | None = None,
    **options,
) -> dict[str, Any]:
    """Train on labels a source randomized before labeldp saw them, debiased through its ``channel``; the
    ledger records the guarantee the source states (:func:`~labeldp.boundary.release_external_labels`),
    nothing is drawn.

    It holds only if the source's statement is true. ``channel`` is ``"flip:RATE"``, ``"rr:EPSILON"`` or a
    (2, 2) matrix M[y, z] = Pr[z | y]; ``stated_epsilon`` is at least the channel's. The source does not
    bound its reports per unit: with a unit column the ledger composes each unit's reports that training
    reads (at most ``max_rows_per_unit``). Other arguments as :func:`fit_hashed`.
    """
    config = HashedConfig(**{**options, "route": "source"})
    classes = _classes(classes)
    matrix = parse_channel(channel, 2) if isinstance(channel, str) else np.asarray(channel, dtype=np.float64)
    data = HashedTable(table, spec, config.block_rows, data_parallel=True)
    data.check_columns(label_column, config.unit_column)

    def draw(ledger: PrivacyLedger, members: np.ndarray) -> Release:  # on rank 0 alone: nothing is drawn
        labels = read_private_labels(data.source, label_column, classes)
        return release_external_labels(ledger, labels[members], members, matrix, stated_epsilon, ROUTE_TAGS["source"])

    facts = {"label_column": label_column, "classes": classes, "channel": matrix.tolist()}
    facts["stated_epsilon"] = stated_epsilon
    return run_route(data, out, config, facts, draw, _train_labels, True)


def _positive(epsilon: float) -> float:
    if not 0 < float(epsilon) < np.inf:
        raise ConfigError(f"epsilon must be a finite number > 0, got {epsilon}")
    return float(epsilon)


def _train_labels(table: HashedTable, release: Release, config: HashedConfig):
    return train_on_channel(table, config.model, release, config)


def _train_counts(table: HashedTable, release: Release, config: HashedConfig):
    statistics = CountStatistics.from_release(release, table.spec)
    mask = np.zeros(table.rows, dtype=bool)
    mask[release.members] = True
    model, history = fit_counts(table, statistics, mask, config)
    return model, history, statistics.rate


def run_route(
    table: HashedTable,
    out,
    config: HashedConfig,
    facts: dict[str, Any],
    draw: Callable[[PrivacyLedger, np.ndarray], Release | None],
    train: Trainer,
    private: bool,
    shared_draw: bool = False,
    policy: BudgetPolicy | None = None,
) -> dict[str, Any]:
    """Release once into the run folder ``out`` (or read the release back), train, write the model and
    summary; returns the summary on every rank.

    ``draw(ledger, members)`` makes the one release, recorded on ``ledger``; ``train(table, release,
    config)`` returns (model, history, rate); ``private`` is False for an insecure seed (said in the
    summary). Under ``torchrun`` rank 0 alone locks, reads and writes the folder and records the release;
    every rank trains on its own row groups. With ``shared_draw``, ``draw`` runs on every rank, each on its
    own rows, and rank 0 records the release; otherwise rank 0 alone calls it.
    """
    started = time.perf_counter()
    settings = {"table": str(table.source), "spec": table.spec.to_dict(), **facts, **dataclasses.asdict(config)}
    distributed.check_same(settings, "the run's settings")
    if config.test_table is not None:
        HashedTable(Path(config.test_table), table.spec, config.block_rows).check_columns(facts.get("label_column"))
    ledger, members = unit_members(table, config)  # public: the unit column and the seed, on every rank
    reserved: list[Spending | None] = [None]  # rank 0's alone: the other ranks record nothing

    def reserve() -> None:
        reserved[0] = _reserved(table, config, facts, out, members, policy)

    distributed.on_main(reserve)
    spending = reserved[0]
    try:
        return _run_route(
            table, config, out, facts, draw, train, private, shared_draw, started, ledger, members, spending
        )
    except BaseException:
        if spending is not None and distributed.is_main() and saved_release(out) is None:  # nothing was drawn
            spending.cancel()
        raise


def _run_route(table, config, out, facts, draw, train, private, shared_draw, started, ledger, members, spending):
    folder = HashedRunFolder(out)
    settings = {"table": str(table.source), "spec": table.spec.to_dict(), **facts, **dataclasses.asdict(config)}
    with contextlib.ExitStack() as stack:
        saved = distributed.on_main(lambda: _opened(stack, folder, settings, ledger, config.route))
        if saved is not None:
            release, ledger = saved
        elif not distributed.is_main():
            if shared_draw:
                draw(ledger, members)  # this rank's part, handed to rank 0
            release = distributed.on_main(lambda: None)
        else:
            release = distributed.on_main(
                lambda: _drawn(folder, lambda: draw(ledger, members), ledger, spending, config.unit_column)
            )
        released = time.perf_counter()
        model, history, rate = train(table, release, config)

        def finish() -> dict[str, Any]:
            save_sparse_model(folder.model_path, model, table.spec)
            trained = time.perf_counter()
            summary = _summary(table, config, facts, release, ledger, history, rate)
            summary["quality"] = _quality(model, table, release, config, facts)
            summary["seconds"] = {
                "release": released - started,
                "training": trained - released,
                "total": trained - started,
            }
            summary["private"] = private
            if spending is not None:
                summary["dataset_ledger"] = spending.summary()
            if table.world > 1:
                summary["processes"] = table.world
            folder.finish(summary)
            return summary

        return distributed.on_main(finish)


def _opened(
    stack: contextlib.ExitStack, folder: HashedRunFolder, settings: dict, ledger: PrivacyLedger, route: str
) -> tuple[Release, PrivacyLedger] | None:
    """Lock ``folder`` (held by ``stack``) and hand over its saved release and ledger, or None; a release saved
    without its ledger is spent, so it is recorded now, never drawn again.
    """
    saved = stack.enter_context(folder.open(settings))
    if saved is None:
        return None
    release, saved_ledger = saved
    if saved_ledger is None:
        release.record(ledger, ROUTE_TAGS[route])
        ledger.save(folder.ledger_path)
        return release, ledger
    return release, saved_ledger


def _drawn(folder: HashedRunFolder, draw, ledger: PrivacyLedger, spending, unit: str | None) -> Release:
    """Draw the release (its id in the folder first: interrupted from here on, it stays on the dataset ledgers),
    save it before anything trains on it, and put it on its dataset ledgers."""
    if spending is not None:
        folder_release(folder.root, spending.release)
    release = draw()
    folder.save_release(release, ledger)
    if spending is not None:
        spending.record(Guarantee.of_ledger(ledger, 0.0, unit))
    return release


def _reserved(table, config, facts: dict, out, members: np.ndarray, policy) -> Spending | None:
    """The run's spend, reserved on the dataset ledgers of the people its released rows hold before anything is
    drawn (refused past the policy's cap); None where labeldp draws nothing (a source's labels)."""
    if facts.get("epsilon") is None:
        return None
    names = pq.read_schema(parquet_files(table.source)[0]).names
    read = table_facts(table.source, facts["label_column"], names, table.rows)
    source = ledger_source(table.source, read, members, name=config.dataset_name, unit=config.unit_column)
    spending = Spending(policy, source, saved_release(out) or new_release(out), "hashed train", str(out))
    guarantee = guarantee_of(float(facts["epsilon"]), 0.0, config.unit_column)
    if config.unit_column is not None:
        units = unit_codes(read_column(table.source, config.unit_column))[members]
        guarantee = unit_guarantee(guarantee, int(np.bincount(units).max()))
    spending.reserve(guarantee)
    return spending


def _summary(table, config, facts, release, ledger, history, rate) -> dict[str, Any]:
    rows_trained = sum(record["rows"] for record in history)
    seconds = sum(record["seconds"] for record in history)
    return {
        **facts,
        "route": config.route,
        "model": config.model,
        "rows": table.rows,
        "members": int(release.members.size),
        "unit_column": config.unit_column,
        "privacy_units": ledger.num_units if ledger.units is not None else None,
        "max_rows_per_unit": config.max_rows_per_unit,
        "epsilon_per_unit": ledger.epsilon(),
        "epsilon_per_row": ledger.row_epsilon(),
        "release": release.description,
        "base_rate": rate,
        "history": history,
        "rows_per_second": rows_trained / seconds if seconds else None,
    }


def _quality(model, table: HashedTable, release: Release, config: HashedConfig, facts: dict) -> dict[str, Any]:
    """The model's AUC and log-loss: exact on a public test table; else estimated with intervals from the
    released labels it trained on (in-sample); else none (counts hold no row's label).
    """
    if config.test_table is not None:
        domain = LabelDomain(facts["classes"])
        labels = domain.arrow_positions(pa.array(read_column(config.test_table, facts["label_column"])), "test table")
        positive = _probabilities(model, config.test_table, table.spec, config.block_rows)
        found = classification_metrics(np.column_stack([1 - positive, positive]), labels)
        on = f"the public test table {config.test_table}"
    elif release.labels is not None and release.likelihood is not None:
        positive = _probabilities(model, table.source, table.spec, config.block_rows)[release.members]
        probabilities = np.column_stack([1 - positive, positive])
        try:
            found = estimated_classification_metrics(probabilities, release.labels, release.likelihood)
        except ConfigError as error:  # a source's channel other than randomized response
            return {"on": f"none: {error}; give --test-table to measure the model"}
        on = "the released labels of the rows it trained on (in-sample: optimistic where the model overfits)"
    else:
        return {"on": "none: a release of counts holds no row's label; give --test-table to measure the model"}
    names = ("auc", "log_loss", "beyond_chance", "chance")
    return {"on": on} | {
        key.removeprefix("test_"): value for key, value in found.items() if key.removeprefix("test_").startswith(names)
    }


def _probabilities(model, source, spec: HashSpec, block_rows: int) -> np.ndarray:
    found = np.empty(table_rows(source))
    positions, probabilities = predict_sparse(model, hashed_blocks(source, spec, block_rows))
    found[positions] = probabilities
    return found


def predict_hashed(folder, table, block_rows: int = DEFAULT_BLOCK_ROWS) -> np.ndarray:
    """The positive class's probability for every row of ``table``, in table order, hashed as the run's
    training rows were.
    """
    read_summary(folder)
    model, spec = load_sparse_model(HashedRunFolder(folder).model_path)
    return _probabilities(model, table, spec, block_rows)


__all__ = ["fit_from_noisy_source", "fit_hashed", "label_stream", "predict_hashed", "run_route"]
