"""``labeldp download``: a dataset's standard files (needs internet)."""

from __future__ import annotations

import argparse

DESCRIPTION = (
    "Fetch a dataset's standard files into --data-dir. MovieLens 100K comes from GroupLens under its "
    "research-only licence (read its README; do not redistribute it)."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The dataset (one read from a folder) and ``--data-dir``."""
    from labeldp.config.shared_options import DATA_DIR
    from labeldp.data.loading import folder_datasets
    from labeldp.options import add_options

    parser.add_argument("dataset", choices=folder_datasets())
    add_options(parser, "download", DATA_DIR, required=[DATA_DIR])


def run(args: argparse.Namespace) -> None:
    """Download the dataset's standard files into ``--data-dir`` (:func:`labeldp.data.download_dataset`)."""
    from labeldp.data import download_dataset

    download_dataset(args.dataset, args.data_dir)
    print(f"{args.dataset} saved in {args.data_dir}")
