"""``labeldp hashed``: the ads route on the command line, ``train`` (release once, train a hashed model
out of core, write a run folder) and ``predict`` (a finished run's probabilities for new rows)."""

from __future__ import annotations

import argparse

from labeldp.config.hashed_config import DEFAULT_SLOT_BITS, HashedConfig
from labeldp.config.shared_options import (
    BLOCK_ROWS,
    BUDGET_DIR,
    CLASSES,
    EPSILON,
    ID_COLUMN,
    INSECURE_NOISE_SEED,
    LABEL_COLUMN,
    OUT,
    SECURE_RNG,
    TABLE,
    TOTAL_EPSILON,
)
from labeldp.options import Option, add_dataclass_arguments, add_options

DESCRIPTION = (
    "The ads route: a Parquet table of impressions whose categorical columns (and their declared crosses) are "
    "public and hashed into sparse features, whose label column is private. `train` releases the labels once "
    "(noisy label counts over every hashed bucket, or randomized response; per privacy unit with "
    "--privacy-unit), or takes labels a source randomized (--source-channel) or its aggregate reports "
    "(--reports), trains a logistic regression or a factorization machine out of core, and writes a run folder "
    "(model.pt with its hashing, ledger.json, summary.json); an existing finished run is never released into "
    "again. `predict` scores new rows hashed the same way."
)


RUN = Option("the run folder of `labeldp hashed train`", type="str | None", flag="--run", metavar="FOLDER")
COLUMNS = Option("the categorical columns hashed", type="tuple[str, ...]", flag="--columns", metavar="COL")
CROSS = Option(
    "a declared cross of columns (repeatable)", [], type="str", flag="--cross", metavar="A:B", action="append"
)
BITS = Option("each slot's buckets are 2^bits", DEFAULT_SLOT_BITS, type="int", flag="--bits")
SLOT_BITS = Option(
    "bits of named slots (advertiser:site=20)", [], type="tuple[str, ...]", flag="--slot-bits", metavar="SLOT=BITS"
)
HASH_SEED = Option("the hash's public seed", 0, type="int", flag="--hash-seed")
SOURCE_CHANNEL = Option(
    "--route source: the labels arrived randomized by this channel, flip:RATE, rr:EPSILON or a 2 x 2 matrix as "
    "JSON (M[y][z] = Pr[reported z | true y])",
    type="str | None",
    flag="--source-channel",
    metavar="CHANNEL",
)
STATED_EPSILON = Option(
    "--route source: the epsilon the source states per label, if larger", type="float | None", flag="--stated-epsilon"
)
REPORTS = Option(
    "--route reports: the source's report table (see labeldp.ads.reports)",
    type="str | None",
    flag="--reports",
    metavar="PATH",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``hashed``'s actions (``train``, ``predict``) and their arguments."""
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    _add_train(actions.add_parser("train", help="release once, train, write a run folder", description=DESCRIPTION))
    predict = actions.add_parser("predict", help="a finished run's probabilities for the rows of a table")
    add_options(predict, "hashed predict", RUN, TABLE, ID_COLUMN, OUT, BLOCK_ROWS, required=[RUN, TABLE, OUT])


def _add_train(parser: argparse.ArgumentParser) -> None:
    command = "hashed train"
    add_options(
        parser,
        command,
        TABLE,
        LABEL_COLUMN,
        CLASSES,
        COLUMNS,
        CROSS,
        BITS,
        SLOT_BITS,
        HASH_SEED,
        EPSILON,
        SOURCE_CHANNEL,
        STATED_EPSILON,
        REPORTS,
        required=[TABLE, COLUMNS],
    )
    add_dataclass_arguments(parser, HashedConfig, command)
    add_options(parser.add_mutually_exclusive_group(), command, SECURE_RNG, INSECURE_NOISE_SEED)
    add_options(parser, command, BUDGET_DIR, TOTAL_EPSILON, OUT, required=[OUT])


def _route(args: argparse.Namespace) -> str:
    """The route the flags ask for, checked against them (before anything is read or drawn)."""
    from labeldp.errors import ConfigError

    implied = "source" if args.source_channel else "reports" if args.reports else None
    route = getattr(args, "route", None) or implied or HashedConfig().route
    if args.source_channel and args.reports:
        raise ConfigError("--source-channel and --reports are two routes: give one")
    if implied and route != implied:
        raise ConfigError(f"--{'source-channel' if implied == 'source' else 'reports'} is --route {implied}")
    if route == "source" and not args.source_channel:
        raise ConfigError("--route source needs the source's channel: --source-channel flip:RATE (or a matrix)")
    if route == "reports" and not args.reports:
        raise ConfigError("--route reports needs the report table: --reports PATH")
    if args.stated_epsilon is not None and route != "source":
        raise ConfigError("--stated-epsilon is what a source states for its labels: --route source")
    if route in ("counts", "rr") and args.epsilon is None:
        raise ConfigError(f"--route {route} releases the labels: give --epsilon")
    if route in ("source", "reports") and (args.epsilon is not None or args.secure_rng or args.insecure_noise_seed):
        raise ConfigError(f"--route {route}: the source states the guarantee, labeldp draws nothing (no --epsilon)")
    if route != "reports" and (args.label_column is None or args.classes is None):
        raise ConfigError(f"--route {route} needs --label-column and --classes")
    return route


def _spec(args: argparse.Namespace):
    from labeldp.ads import hash_spec
    from labeldp.errors import ConfigError

    try:
        bits = {name: int(value) for name, _, value in (item.partition("=") for item in args.slot_bits)}
    except ValueError:
        raise ConfigError(f"--slot-bits takes SLOT=BITS, got {args.slot_bits}") from None
    crosses = [cross.split(":") for cross in args.cross]
    return hash_spec(args.columns, crosses, args.bits, bits, args.hash_seed)


def run(args: argparse.Namespace) -> None:
    """Run ``labeldp hashed train`` or ``labeldp hashed predict``.

    Raises
    ------
    labeldp.errors.ConfigError
        For flags that cannot work together, before anything is read or drawn.
    labeldp.errors.DataError
        If a table lacks a column or a label is outside the classes, before anything is released.
    labeldp.errors.ReleaseExistsError
        If ``--out`` holds a finished run.
    """
    if args.action == "predict":
        _predict(args)
        return
    from labeldp import ads, distributed
    from labeldp.options import typed_options
    from labeldp.randomness import NoiseSource

    route = _route(args)
    options = {name: getattr(args, name) for name in typed_options(args, HashedConfig)} | {"route": route}
    spec = _spec(args)
    labels = {"label_column": args.label_column, "classes": args.classes}
    if route == "source":
        del options["route"]
        summary = ads.fit_from_noisy_source(
            args.table,
            args.out,
            **labels,
            spec=spec,
            channel=args.source_channel,
            stated_epsilon=args.stated_epsilon,
            **options,
        )
    elif route == "reports":
        del options["route"]
        summary = ads.fit_from_reports(args.table, args.out, reports=args.reports, spec=spec, **options)
    else:
        noise = NoiseSource(secure=args.secure_rng, insecure_seed=args.insecure_noise_seed)
        from labeldp.cli.common import budget_policy

        summary = ads.fit_hashed(
            args.table,
            args.out,
            **labels,
            spec=spec,
            epsilon=args.epsilon,
            noise=noise,
            policy=budget_policy(args),
            **options,
        )
    # after an error a rank leaves without waiting for the others: torchrun then stops them all
    distributed.stop()
    if distributed.env_rank() == 0:  # under torchrun rank 0 speaks for the run
        _print_summary(summary, args.out)


def _print_summary(summary: dict, out) -> None:
    from labeldp.accounting.rounding import describe_guarantee

    processes = summary.get("processes")
    guarantee = describe_guarantee(
        summary["epsilon_per_unit"],
        0.0,
        summary["unit_column"] or "row",
        "replace-one label",
        summary["epsilon_per_row"],
    )
    speed, seconds, epochs = summary["rows_per_second"], summary["seconds"], len(summary["history"])
    released = "released" if summary["route"] in ("counts", "rr") else "read as the source released them"
    print(
        f"{summary['route']} route, {summary['model']}: {summary['members']:,} of {summary['rows']:,} rows {released}; "
        f"{guarantee}, the ledger's; {epochs} epoch"
        f"{'s' if epochs != 1 else ''} at {speed or 0:,.0f} rows/s of training, the whole run "
        f"{seconds['total']:.1f} s ({summary['rows'] / seconds['total']:,.0f} rows/s of the table, release included)"
        + (f" ({processes} processes)" if processes else "")
    )
    print(_quality(summary["quality"]))
    print(f"written: {out}/ (model.pt with its hashing, ledger.json, summary.json, release.npz, config.json)")
    if not summary["private"]:
        print("NOT PRIVATE: the noise is reproducible from --insecure-noise-seed")
    if summary.get("dataset_ledger"):
        from labeldp.cli.summary import print_dataset_spend

        print_dataset_spend(summary["dataset_ledger"])


def _quality(quality: dict) -> str:
    """The run's quality line: AUC and log-loss on what they were measured on, with their intervals."""
    from labeldp.evaluation import chance_warning

    if "auc" not in quality:
        return f"quality: {quality['on']}"

    def shown(label: str, name: str) -> str:
        value, interval = quality[name], quality.get(f"{name}_interval")
        bounds = f"95% interval {interval[0]:.4f} to {interval[1]:.4f}" if interval else ""
        if value is None:
            return f"{label}: the released labels cannot measure it at this epsilon ({bounds or 'no interval'})"
        return f"{label} {value:.4f}" + (f" ({bounds})" if bounds else "")

    text = f"quality on {quality['on']}: {shown('AUC', 'auc')}, {shown('log-loss', 'log_loss')}"
    warning = chance_warning({f"test_{key}": value for key, value in quality.items()}, "labels")
    return text + (f"\n{warning}" if warning else "")


def _predict(args: argparse.Namespace) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    from labeldp.ads import predict_hashed
    from labeldp.data.hashed_table import read_column
    from labeldp.files import write_atomic

    probabilities = predict_hashed(args.run, args.table, args.block_rows)
    columns = {"probability": probabilities}
    if args.id_column:
        columns = {args.id_column: read_column(args.table, args.id_column), **columns}
    write_atomic(args.out, lambda path: pq.write_table(pa.table(columns), path))
    print(f"wrote {len(probabilities):,} probabilities to {args.out} (mean {probabilities.mean():.4g})")
