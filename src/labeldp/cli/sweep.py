"""``labeldp sweep``: many runs, in parallel worker processes, resumably."""

from __future__ import annotations

import argparse
from pathlib import Path

from labeldp.cli.common import add_budget_arguments

DESCRIPTION = (
    "Run every matching profile, or every combination of a grid, into OUT/<key>/. Finished runs are skipped, "
    "unfinished ones resume, a failed run is recorded and the others go on. Writes OUT/results.csv, prints "
    "the report and writes OUT/privacy_utility.png."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--profiles`` or ``--grid`` (with ``--base``), ``--recipes``, the workers, the data folder, the device
    and ``--out``."""
    chosen = parser.add_mutually_exclusive_group(required=True)
    chosen.add_argument(
        "--profiles",
        metavar="PREFIX",
        help="run the profiles whose key starts with PREFIX (a regular expression matched from the start of the keys)",
    )
    chosen.add_argument(
        "--grid",
        nargs="+",
        metavar="NAME=V1,V2",
        help="e.g. method=lp-1st,lp-2st epsilon=1,2,4 seed=0,1 (options of the run, its training, DP-SGD, PATE "
        "or marginals)",
    )
    parser.add_argument("--base", metavar="KEY", help="profile whose recipe the --grid starts from")
    parser.add_argument(
        "--recipes",
        metavar="FILE",
        help="Python file to execute first: it registers profiles, methods or datasets of your own",
    )
    parser.add_argument("--workers", type=int, default=1, help="parallel worker processes (default %(default)s)")
    parser.add_argument(
        "--data-dir",
        help="data folder for every run whose dataset reads one (MNIST family, CIFAR, MovieLens), and of every "
        "table named by a relative path (the table profiles')",
    )
    parser.add_argument("--device", default="auto", help="torch device for every run (default %(default)s)")
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="CPU threads of torch in each run (default: 1 for tables and the embedded digits; else "
        "each worker's share of the cores free when the sweep starts, re-checked during training; at most "
        "OMP_NUM_THREADS where it is set)",
    )
    parser.add_argument(
        "--quiet", action="store_true", help="no progress (a bar on a terminal, else one line per finished run)"
    )
    add_budget_arguments(parser)
    parser.add_argument("--out", required=True, help="sweep folder")


def run(args: argparse.Namespace) -> None:
    """Run the chosen profiles or the grid's combinations into ``--out`` (finished runs skipped, unfinished
    ones resumed), then print the report. Each run releases under its own ledger, as ``labeldp train``."""
    from labeldp.cli.common import check_threads
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
    )
    done = sum(r["status"] == "done" for r in rows)
    print(f"{done}/{len(rows)} runs finished; results in {Path(args.out) / 'results.csv'}\n")
    print_report(args.out, None)
