"""``labeldp privatize``: a label column released once, streamed, into a release folder."""

from __future__ import annotations

import argparse
import functools
from pathlib import Path

from labeldp.config.shared_options import (
    BATCH_ROWS,
    BUDGET_DIR,
    CLASSES,
    DATASET_NAME,
    EPSILON,
    ID_COLUMN,
    INSECURE_NOISE_SEED,
    LABEL_COLUMN,
    MAX_ROWS_PER_UNIT,
    ONE_ROW_PER_PERSON,
    OUT,
    PRIOR,
    PRIVACY_UNIT,
    SECURE_RNG,
    SEED,
    TABLE,
    TOTAL_EPSILON,
)
from labeldp.options import Option, add_options

COMMAND = "privatize"

DESCRIPTION = (
    "Release the label column of a Parquet or CSV table (a file or a folder of files), streamed in blocks, by "
    "randomized response or, with a prior, RR-with-prior: epsilon-label-DP per row, once. OUT (a new folder) "
    "receives labels.parquet (the id column or the row's position, released_label, k), release.json (classes, "
    "mechanism, epsilon, noise channel, noise source, the ledger's epsilon) and ledger.json. Training on the "
    "release, any number of times, costs no more privacy. An existing OUT is never overwritten. With "
    "--privacy-unit, epsilon is each unit's (a user's): at most --max-rows-per-unit rows of a unit are released, "
    "chosen by the public --seed, never by a label, each at epsilon / c, c the most rows a unit keeps."
)


PRIOR_COLUMNS = Option(
    "RR-with-prior: one prior column per class, in the classes' order; each row's prior must not depend on its "
    "own label (with --privacy-unit: on no label of its unit)",
    type="tuple[str, ...] | None",
    flag="--prior-columns",
    metavar="COL",
)
ENGINE = Option(
    "where the labels are released: in this process, streamed (no JVM), or on Spark (labeldp[spark]: every row "
    "needs --id-column; the release is exactly once under Spark's retries)",
    "local",
    type="str",
    flag="--engine",
    choices=("local", "spark"),
)
MASTER = Option(
    "Spark's master with --engine spark: local[N] or spark://HOST:PORT", "local[2]", type="str", flag="--master"
)
WRITE_CHANNEL = Option(
    "also write each row's noise channel, channel_j = Pr[released label | class j]", False, flag="--write-channel"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The table, its label and id columns, the classes, epsilon, the prior, the noise and ``--out``."""
    required = [TABLE, LABEL_COLUMN, CLASSES, EPSILON, OUT]
    add_options(parser, COMMAND, TABLE, LABEL_COLUMN, ID_COLUMN, CLASSES, EPSILON, required=required)
    add_options(parser, COMMAND, PRIVACY_UNIT, MAX_ROWS_PER_UNIT, SEED, ONE_ROW_PER_PERSON, DATASET_NAME)
    add_options(parser.add_mutually_exclusive_group(), COMMAND, PRIOR_COLUMNS, PRIOR)
    add_options(parser, COMMAND, WRITE_CHANNEL, BATCH_ROWS, ENGINE, MASTER)
    add_options(parser.add_mutually_exclusive_group(), COMMAND, SECURE_RNG, INSECURE_NOISE_SEED)
    add_options(parser, COMMAND, BUDGET_DIR, TOTAL_EPSILON, OUT, required=required)


def run(args: argparse.Namespace) -> None:
    """Release ``--table``'s label column once into the new folder ``--out``
    (:func:`labeldp.boundary.privatize_table`) and print what was written.

    Randomized response, or RR-with-prior with a prior: epsilon-label-DP per row, once (the ledger's epsilon
    is printed); with ``--insecure-noise-seed`` the release is NOT PRIVATE, and says so.

    Raises
    ------
    labeldp.errors.DataError
        If the table lacks a column, an id is duplicated, a unit or a label is missing, or a label is
        outside the classes, before anything is released.
    labeldp.errors.ReleaseExistsError
        If ``--out`` exists.
    """
    from labeldp.accounting.rounding import describe_guarantee
    from labeldp.boundary import privatize_table
    from labeldp.cli.common import budget_policy
    from labeldp.cli.summary import print_dataset_spend
    from labeldp.randomness import NoiseSource

    noise = NoiseSource(secure=args.secure_rng, insecure_seed=args.insecure_noise_seed)
    release = functools.partial(_on_spark, master=args.master) if args.engine == "spark" else privatize_table
    sidecar = release(
        args.table,
        args.out,
        label_column=args.label_column,
        id_column=args.id_column,
        classes=args.classes,
        epsilon=args.epsilon,
        prior_columns=args.prior_columns,
        prior=args.prior,
        write_channel=args.write_channel,
        batch_rows=args.batch_rows,
        noise=noise,
        unit_column=args.privacy_unit,
        max_rows_per_unit=args.max_rows_per_unit,
        seed=args.seed,
        one_row_per_person=args.one_row_per_person,
        dataset_name=args.dataset_name,
        policy=budget_policy(args),
    )
    rows, seconds = sidecar["rows"], sidecar["seconds"]
    unit = sidecar["privacy_unit"]
    if unit is not None:
        print(
            f"privacy unit {unit['column']!r}: {unit['units']:,} units, at most {unit['max_rows']} rows each (chosen "
            f"by the public seed {unit['seed']}, never by a label): {unit['rows_kept']:,} of {unit['rows_read']:,} "
            f"rows kept; each unit's labels at epsilon {unit['epsilon']:g} together, each label at "
            f"{unit['row_epsilon']:g} (epsilon / {unit['most_rows']})"
        )
    mechanism = {"randomized-response": "randomized response", "rr-with-prior": "RR-with-prior"}[sidecar["mechanism"]]
    ledger = sidecar["ledger"]
    guarantee = describe_guarantee(
        ledger["epsilon"], 0.0, unit["column"] if unit else "row", "replace-one label", (unit or {}).get("row_epsilon")
    )
    print(
        f"released {rows:,} labels of {args.label_column!r} by {mechanism} (K={len(sidecar['classes'])}): "
        f"{guarantee}, the ledger's; in {seconds:.1f} s ({rows / seconds:,.0f} labels/s)"
    )
    columns = [
        c for c in (sidecar["columns"]["id"], sidecar["columns"]["released_label"], sidecar["columns"]["k"]) if c
    ]
    print(
        f"written: {Path(args.out) / 'labels.parquet'} ({', '.join(columns + sidecar['columns']['channel'])}), "
        f"{Path(args.out) / 'release.json'}, {Path(args.out) / 'ledger.json'}"
    )
    if not sidecar["noise"]["private"]:
        print(f"NOT PRIVATE: the noise is {sidecar['noise']['description']}")
    print_dataset_spend(sidecar["dataset_ledger"])


def _on_spark(table, out, *, master: str, prior, write_channel: bool, one_row_per_person: bool, **options):
    """The release on Spark (:func:`labeldp.spark.privatize`) of a Parquet or CSV file or folder, every option
    checked before Spark starts."""
    from labeldp.errors import ConfigError
    from labeldp.tables.table_files import data_files, file_kind

    unused = {"--prior": prior, "--write-channel": write_channel, "--one-row-per-person": one_row_per_person}
    if any(unused.values()) or options["id_column"] is None:
        named = [flag for flag, value in unused.items() if value] or ["no --id-column"]
        raise ConfigError(f"--engine spark takes the prior as columns and every row's id: {', '.join(named)}")
    kinds = {file_kind(path) for path in data_files(table)}
    if len(kinds) != 1:
        raise ConfigError(f"--engine spark reads a table of one format; {table} holds {sorted(kinds)}")
    from labeldp import spark

    kind, reader = kinds.pop(), spark.session(master).read
    if kind != "parquet":  # every column of a CSV read as text, as the one-process route reads its labels
        reader = reader.format("csv").options(header=True, sep="\t" if kind == "tsv" else ",")
    frame = reader.load(str(Path(table).absolute()), format="parquet" if kind == "parquet" else None)
    options.pop("batch_rows")
    return spark.privatize(frame, out, described=str(table), **options)
