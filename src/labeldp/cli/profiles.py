"""``labeldp profiles``: the registered recipes whose key starts with a prefix."""

from __future__ import annotations

import argparse

DESCRIPTION = "List the registered recipes whose key starts with PREFIX."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``profiles``'s arguments: the key PREFIX and ``--recipes``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    """
    parser.add_argument(
        "pattern",
        nargs="?",
        metavar="PREFIX",
        help="a key, its start (mnist/ or mnist/e2), or a regular expression matched from the start "
        "of the keys (mnist/e(1|2)/lp-2st)",
    )
    parser.add_argument(
        "--recipes",
        metavar="FILE",
        help="Python file to execute first: it registers profiles, methods or datasets of your own",
    )


def run(args: argparse.Namespace) -> None:
    """Print one line per registered profile matching PREFIX: its key, version, method, budget, dataset,
    epochs and seed.

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.
    """
    from labeldp.recipes import list_profiles

    for profile in list_profiles(args.pattern):
        c = profile.config
        budget = "no privacy" if c.epsilon is None else f"epsilon {c.epsilon:g}"
        print(
            f"{profile.key:<34} v{profile.version}  {c.method:<11} {budget:<12} {c.dataset:<13} "
            f"{c.train.epochs} epochs/stage  seed {c.seed}"
        )
