"""``labeldp predict``: scores of new rows by a finished run's model (post-processing: free)."""

from __future__ import annotations

import argparse

from labeldp.config.shared_options import ID_COLUMN, OUT, TABLE
from labeldp.options import add_options

DESCRIPTION = (
    "Score the rows of a table with the model of RUNDIR and its fitted preprocessing; write the probability "
    "of each class and the predicted class per row (CSV or Parquet, by --out's suffix). Predictions are "
    "post-processing: they cost no privacy."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUNDIR, ``--table``, ``--out`` and ``--id-column``."""
    parser.add_argument("run_dir", metavar="RUNDIR")
    add_options(parser, "predict", TABLE, OUT, ID_COLUMN, required=[TABLE, OUT])


def run(args: argparse.Namespace) -> None:
    """Score ``--table``'s rows with RUNDIR's model into ``--out``
    (:func:`labeldp.runs.predictor.predict_table`): post-processing of the run's model, it reads no private
    label and costs no privacy."""
    from labeldp.runs.predictor import predict_table

    print(f"scores written: {predict_table(args.run_dir, args.table, args.out, args.id_column)}")
