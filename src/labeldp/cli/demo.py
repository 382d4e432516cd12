"""``labeldp demo``: the privacy/accuracy table on the embedded digits."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from labeldp.config.shared_options import OUT, THREADS
from labeldp.options import add_options

DESCRIPTION = (
    "Train non-private, LP-1ST and LP-2ST on the embedded digits at epsilon 1, 2, 4, 8, three seeds each, in "
    "this process, and print test accuracy by method and epsilon: mean ± standard deviation over the seeds, "
    "each private run drawing its noise afresh. Every demo writes its runs into a new folder."
)
#: the demo's runs: the embedded digits profiles (recipe in labeldp.recipes.builtin_profiles), three seeds each
DEMO_PROFILES = r"^digits/(non-private|e(1|2|4|8)/lp-(1|2)st)/run[0-2]$"
#: where a demo's folder goes when --out is not given: a new folder per demo
DEMO_FOLDER = "runs/demo-{time}"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--out`` and ``--threads``."""
    add_options(parser, "demo", OUT, THREADS)


def demo_folder(out: str | None) -> tuple[Path, bool]:
    """The demo's folder (``out``, or a new one named by the date and time), and whether it is new."""
    if out is not None:
        folder = Path(out)
        return folder, not (folder.exists() and any(folder.iterdir()))
    base = Path(DEMO_FOLDER.format(time=time.strftime("%Y%m%d-%H%M%S")))
    folder, number = base, 1
    while folder.exists():  # two demos within a second
        number += 1
        folder = base.with_name(f"{base.name}-{number}")
    return folder, True


def run(args: argparse.Namespace) -> None:
    """Train the demo's profiles (:data:`DEMO_PROFILES`) on the embedded digits into ``--out`` and print their
    test accuracy by method and epsilon, mean ± std over the seeds.

    Each run releases its model and metrics under its own label-DP epsilon, its ledger's (printed); the
    non-private runs have no guarantee."""
    from labeldp import runtime
    from labeldp.accounting.policy import BudgetPolicy
    from labeldp.accounting.rounding import format_epsilon
    from labeldp.cli.common import check_threads
    from labeldp.experiments.sweep_report import aggregate, format_report
    from labeldp.recipes import list_profiles
    from labeldp.recipes.applied import profile_recipe
    from labeldp.runs import train_run

    check_threads(args)
    runtime.set_threads(args.threads, "digits")
    folder, new = demo_folder(args.out)
    policy = BudgetPolicy(folder / "budget")  # the demo's runs on a ledger of their own, never the user's
    print(
        f"demo runs in {folder}/"
        + ("" if new else " (runs already finished there are shown as saved: their noise is not drawn again)"),
        flush=True,
    )
    rows = []
    for profile in list_profiles(DEMO_PROFILES):
        summary = train_run(
            profile.config,
            folder / profile.key.replace("/", "__"),
            progress=False,
            recipe=profile_recipe(profile),
            policy=policy,
        )
        rows.append(
            {
                "status": "done",
                "dataset": "digits",
                "key": profile.key,
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
    print(
        "\nEmbedded digits (1,347 train / 450 test), three seeds per cell: the spread is that of the noise "
        "draws (and the seeds' splits); each run's label-DP epsilon comes from its ledger.\n"
    )
    print(format_report(aggregate(rows)))
    print(f"runs: {folder}/")
