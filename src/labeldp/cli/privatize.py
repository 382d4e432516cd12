"""``labeldp privatize``: a label column released once, streamed, into a release folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from labeldp.cli.common import add_budget_arguments
from labeldp.config.release_config import DEFAULT_BATCH_ROWS

DESCRIPTION = (
    "Release the label column of a Parquet or CSV table (a file or a folder of files), streamed in blocks, by "
    "randomized response or, with a prior, RR-with-prior: epsilon-label-DP per row, once. OUT (a new folder) "
    "receives labels.parquet (the id column or the row's position, released_label, k), release.json (classes, "
    "mechanism, epsilon, noise channel, noise source, the ledger's epsilon) and ledger.json. Training on the "
    "release, any number of times, costs no more privacy. An existing OUT is never overwritten. With "
    "--privacy-unit, epsilon is each unit's (a user's): at most --max-rows-per-unit rows of a unit are released, "
    "chosen by the public --seed, never by a label, each at epsilon / c, c the most rows a unit keeps."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The table, its label and id columns, the classes, epsilon, the prior, the noise and ``--out``."""
    parser.add_argument(
        "--table", required=True, metavar="PATH", help="Parquet or CSV file, or a folder of them (read in sorted order)"
    )
    parser.add_argument("--label-column", required=True, metavar="COL", help="the private labels")
    parser.add_argument(
        "--id-column",
        metavar="COL",
        help="a public row identifier, one distinct value per row, written next to each "
        "released label (a duplicated id is an error before anything is released); default: "
        "none, each row's position in the table (from 0) is written as the column 'row'",
    )
    parser.add_argument(
        "--classes",
        required=True,
        nargs="+",
        metavar="VALUE",
        help="the label values, in order (the label domain is public and must be declared; a "
        "label outside it is an error before anything is released)",
    )
    parser.add_argument(
        "--epsilon",
        required=True,
        type=float,
        help="privacy budget of each label (> 0); with --privacy-unit, of each unit's labels together",
    )
    _add_unit_arguments(parser)
    parser.add_argument(
        "--one-row-per-person",
        action="store_true",
        help="state that no person has two rows, so that a folder of several files can be released without "
        "--id-column or --privacy-unit (a row held in two files would otherwise be released twice)",
    )
    prior = parser.add_mutually_exclusive_group()
    prior.add_argument(
        "--prior-columns",
        nargs="+",
        metavar="COL",
        help="RR-with-prior: one prior column per class, in the classes' order; each row's prior "
        "must not depend on its own label (with --privacy-unit: on no label of its unit)",
    )
    prior.add_argument(
        "--prior",
        nargs="+",
        type=float,
        metavar="P",
        help="RR-with-prior with one prior shared by every row: a probability per class",
    )
    parser.add_argument(
        "--write-channel",
        action="store_true",
        help="also write each row's noise channel, channel_j = Pr[released label | class j]",
    )
    parser.add_argument(
        "--batch-rows",
        type=int,
        default=DEFAULT_BATCH_ROWS,
        help="rows drawn and written at a time; they bound the memory (default %(default)s)",
    )
    noise = parser.add_mutually_exclusive_group()
    noise.add_argument(
        "--secure-rng",
        action="store_true",
        help="draw the noise from ChaCha20 keyed from the OS (a cryptographically secure generator)",
    )
    noise.add_argument(
        "--insecure-noise-seed",
        type=int,
        metavar="SEED",
        help="reproducible noise for tests: NOT PRIVATE (the seed is written in release.json)",
    )
    add_budget_arguments(parser)
    parser.add_argument("--out", required=True, help="the release folder to create")


def _add_unit_arguments(parser: argparse.ArgumentParser) -> None:
    """``--privacy-unit``, ``--max-rows-per-unit`` and ``--seed``."""
    parser.add_argument(
        "--privacy-unit",
        metavar="COL",
        help="the column of each row's privacy unit (a user id; public): the labels of a unit are protected "
        "together at --epsilon; needs --max-rows-per-unit",
    )
    parser.add_argument(
        "--max-rows-per-unit",
        type=int,
        metavar="M",
        help="with --privacy-unit, the most rows of one unit released: a larger unit's other rows are left out, "
        "chosen by the public --seed (never by a label); each released label gets epsilon / c, c = M or the "
        "largest unit's rows if fewer",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="public seed choosing which rows of a unit larger than --max-rows-per-unit are kept (default %(default)s)",
    )


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
    from labeldp.accounting.rounding import format_epsilon
    from labeldp.boundary import privatize_table
    from labeldp.cli.summary import print_dataset_spend
    from labeldp.randomness import NoiseSource

    noise = NoiseSource(secure=args.secure_rng, insecure_seed=args.insecure_noise_seed)
    sidecar = privatize_table(
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
    print(
        f"released {rows:,} labels of {args.label_column!r} by {mechanism} (K={len(sidecar['classes'])}, epsilon "
        f"{sidecar['epsilon']:g}; the ledger's epsilon {format_epsilon(sidecar['ledger']['epsilon'])}) in "
        f"{seconds:.1f} s ({rows / seconds:,.0f} labels/s)"
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
