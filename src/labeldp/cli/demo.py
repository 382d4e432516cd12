"""``labeldp demo``: the privacy/accuracy table on the embedded digits."""

from __future__ import annotations

import argparse
from pathlib import Path

DESCRIPTION = (
    "Train non-private, LP-1ST and LP-2ST on the embedded digits at epsilon 1, 2, 4, 8 and print test "
    "accuracy by method and epsilon."
)
#: the demo's runs: the embedded digits profiles (recipe in labeldp.recipes.builtin)
DEMO_PROFILES = r"^digits/(non-private|e(1|2|4|8)/lp-(1|2)st)/run0$"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``demo``'s one argument, ``--out``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    """
    parser.add_argument(
        "--out", default="runs/demo", help="folder for the demo's run directories (default %(default)s)"
    )


def run(args: argparse.Namespace) -> None:
    """Train the demo's profiles (:data:`DEMO_PROFILES`) on the embedded digits into ``--out`` and print
    their test accuracy by method and epsilon.

    Each run reads the digits' training labels and releases its model and metrics under its own label-DP
    epsilon, the one its ledger gives (printed); the non-private run has no such guarantee.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.
    """
    from labeldp.accounting.rounding import format_epsilon
    from labeldp.experiments.report import aggregate, format_report
    from labeldp.recipes import list_profiles
    from labeldp.runs import train_run

    rows = []
    for profile in list_profiles(DEMO_PROFILES):
        summary = train_run(profile.config, Path(args.out) / profile.key.replace("/", "__"), progress=False)
        rows.append(
            {
                "status": "done",
                "dataset": "digits",
                "method": summary["method"],
                "target_epsilon": profile.config.epsilon or "",
                "test_accuracy": summary["test_accuracy"],
            }
        )
        print(
            f"  {profile.key:<24} test accuracy {100 * summary['test_accuracy']:5.1f}%  "
            f"ledger epsilon {format_epsilon(summary['epsilon'])}  {summary['seconds']:.1f}s",
            flush=True,
        )
    print("\nEmbedded digits (1,347 train / 450 test); each run's label-DP epsilon comes from its ledger.\n")
    print(format_report(aggregate(rows), spread=False))
