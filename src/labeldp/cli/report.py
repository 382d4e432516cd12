"""``labeldp report``: a sweep's table by method and epsilon, and its privacy-utility plot."""

from __future__ import annotations

import argparse

from labeldp.config.shared_options import BUDGET_DIR
from labeldp.options import Option, add_options

DESCRIPTION = (
    "Print mean ± std of a test metric by method and epsilon from DIR/results.csv (a sweep's), or from the runs in "
    "DIR (a run's folder, a demo's), with each dataset's composed spend, and write DIR/privacy_utility.png."
)
#: the metrics a report can show (labeldp.experiments.sweep_report.METRICS' keys)
METRIC_NAMES = ("accuracy", "auc", "log-loss", "rmse", "mse", "mae")
METRIC = Option(
    "what the table and the plot show (auc: two classes; default: accuracy, or rmse for numeric labels)",
    type="str | None",
    flag="--metric",
    choices=METRIC_NAMES,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The sweep folder DIR, ``--metric`` and ``--budget-dir``."""
    parser.add_argument("dir", metavar="DIR")
    add_options(parser, "report", METRIC, BUDGET_DIR)


def print_report(folder: str, metric: str | None, budget_dir) -> None:
    """Print the report of the sweep in ``folder`` (:data:`METRIC_NAMES`; None: each dataset's own), each
    dataset's spend from the ledgers in ``budget_dir``, and where its plot is."""
    from labeldp.experiments.sweep_report import report

    text, plot = report(folder, metric, budget_dir)
    print(text)
    print(f"plot: {plot}")


def run(args: argparse.Namespace) -> None:
    """Print the sweep's report and write its privacy-utility plot."""
    from labeldp.cli.common import budget_policy

    print_report(args.dir, args.metric, budget_policy(args).folder)
