"""``labeldp profiles``: the registered recipes whose key starts with a prefix."""

from __future__ import annotations

import argparse

from labeldp.config.shared_options import RECIPES
from labeldp.options import add_options

DESCRIPTION = "List the registered recipes whose key starts with PREFIX."


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The key PREFIX and ``--recipes``."""
    parser.add_argument(
        "pattern",
        nargs="?",
        metavar="PREFIX",
        help="a key, its start (mnist/ or mnist/e2), or a regular expression matched from the start "
        "of the keys (mnist/e(1|2)/lp-2st)",
    )
    add_options(parser, "profiles", RECIPES)


def run(args: argparse.Namespace) -> None:
    """Print one line per registered profile matching PREFIX (key, version, method, budget, dataset, epochs,
    seed); a ConfigError lists the prefixes that match where none does."""
    from labeldp.errors import ConfigError
    from labeldp.recipes import list_profiles

    profiles = list_profiles(args.pattern)
    if not profiles:
        prefixes = sorted({profile.key.split("/")[0] + "/" for profile in list_profiles()})
        raise ConfigError(
            f"no profile matches {args.pattern!r}; the profiles' keys start with {', '.join(prefixes)} "
            "(a file of your own registers more: --recipes FILE)"
        )
    rows = []
    for profile in profiles:
        c = profile.config
        budget = "no privacy" if c.epsilon is None else f"epsilon {c.epsilon:g}"
        rows.append(
            [profile.key, f"v{profile.version}", c.method, budget, c.dataset, f"{c.train.epochs} epochs/stage"]
            + [f"seed {c.seed}"]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        print("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[-1]]))
