"""``labeldp sweep``: many runs, in parallel worker processes, resumably."""

from __future__ import annotations

import argparse
from pathlib import Path

from labeldp.config.shared_options import (
    BUDGET_DIR,
    DATA_DIR,
    DEVICE,
    GRID,
    OUT,
    QUIET,
    RECIPES,
    THREADS,
    TOTAL_EPSILON,
)
from labeldp.options import Option, add_options

DESCRIPTION = (
    "Run every matching profile, or every combination of a grid, into OUT/<key>/. Finished runs are skipped, "
    "unfinished ones resume, a failed run is recorded and the others go on. Writes OUT/results.csv, prints "
    "the report and writes OUT/privacy_utility.png."
)


PROFILES = Option(
    "run the profiles whose key starts with PREFIX (a regular expression matched from the start of the keys)",
    type="str | None",
    flag="--profiles",
    metavar="PREFIX",
)
BASE = Option("profile whose recipe the --grid starts from", type="str | None", flag="--base", metavar="KEY")
WORKERS = Option("parallel worker processes", 1, type="int", flag="--workers")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--profiles`` or ``--grid`` (with ``--base``), ``--recipes``, the workers, the data folder, the device
    and ``--out``."""
    add_options(parser.add_mutually_exclusive_group(required=True), "sweep", PROFILES, GRID)
    add_options(parser, "sweep", BASE, RECIPES, WORKERS, DATA_DIR, DEVICE, THREADS, QUIET, BUDGET_DIR, TOTAL_EPSILON)
    add_options(parser, "sweep", OUT, required=[OUT])


def run(args: argparse.Namespace) -> None:
    """Run the chosen profiles or the grid's combinations into ``--out`` (finished runs skipped, unfinished
    ones resumed), then print the report. Each run releases under its own ledger, as ``labeldp train``."""
    from labeldp.cli.common import budget_policy, check_threads
    from labeldp.cli.report import print_report
    from labeldp.config.overrides import parse_assignments
    from labeldp.errors import ConfigError
    from labeldp.experiments.sweep_runner import SweepJob, grid_jobs, run_sweep
    from labeldp.recipes import get_profile, list_profiles
    from labeldp.recipes.applied import profile_recipe

    if args.profiles:
        if args.base:
            raise ConfigError("--base is the recipe a --grid starts from; --profiles runs its profiles as registered")
        jobs = [SweepJob(p.key, p.config, profile_recipe(p)) for p in list_profiles(args.profiles)]
        if not jobs:
            raise ConfigError(f"no profile matches {args.profiles!r}; see `labeldp profiles`")
    else:
        base = get_profile(args.base) if args.base else None
        jobs = grid_jobs(
            parse_assignments(args.grid),
            base.config if base is not None else None,
            profile_recipe(base, base=True) if base is not None else None,
        )
    check_threads(args)
    rows = run_sweep(
        jobs,
        args.out,
        workers=args.workers,
        device=args.device,
        data_dir=args.data_dir,
        progress=not args.quiet,
        threads=args.threads,
        policy=budget_policy(args),
    )
    done = sum(r["status"] == "done" for r in rows)
    print(f"{done}/{len(rows)} runs finished; results in {Path(args.out) / 'results.csv'}\n")
    print_report(args.out, None, budget_policy(args).folder)
