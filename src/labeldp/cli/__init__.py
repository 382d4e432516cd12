"""``labeldp`` on the command line: one module per command, each with ``HELP``, ``DESCRIPTION``,
``add_arguments(parser)`` and ``run(args)``; start with :mod:`labeldp.cli.train`.

A command imports the library (torch, scikit-learn, dp_accounting) inside ``run`` only, so ``--help``
and argument errors answer before any of it is imported.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from labeldp import __version__, runtime

#: command -> (its module, one line of help), in the order ``labeldp --help`` lists them
COMMANDS = {
    "train": ("labeldp.cli.train", "train one model and write a run directory"),
    "demo": ("labeldp.cli.demo", "privacy/accuracy table on the embedded digits dataset"),
    "profiles": ("labeldp.cli.profiles", "list named recipes"),
    "sweep": ("labeldp.cli.sweep", "run many runs in parallel, resumably"),
    "tune": ("labeldp.cli.tune", "choose training options on one release of the labels"),
    "report": ("labeldp.cli.report", "table and privacy-utility plot of a sweep"),
    "audit": ("labeldp.cli.audit", "empirical epsilon lower bound for a run's recipe"),
    "predict": ("labeldp.cli.predict", "score new rows with a finished run's model"),
    "privatize": ("labeldp.cli.privatize", "release a label column once, for any learner to train on"),
    "hashed": ("labeldp.cli.hashed", "the ads route: hashed sparse features, trained out of core (train, predict)"),
    "budget": ("labeldp.cli.budget", "what each dataset's releases have spent, composed across runs"),
    "download": ("labeldp.cli.download", "fetch a dataset's standard files (needs internet)"),
}


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``labeldp`` parser: every command listed, only ``command``'s arguments built."""
    parser = argparse.ArgumentParser(
        prog="labeldp",
        description="Train models whose labels are private (label differential privacy); inputs are public.",
    )
    parser.add_argument("--version", action="version", version=f"labeldp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        if name == command:
            module = importlib.import_module(module_name)
            module.add_arguments(commands.add_parser(name, help=help_text, description=module.DESCRIPTION))
        else:
            commands.add_parser(name, help=help_text)
    return parser


def _command(argv: list[str]) -> str | None:
    """The command ``argv`` names (its first word that is a command), if any."""
    return next((word for word in argv if word in COMMANDS), None)


def _load_user_recipes(argv: list[str]) -> None:
    """Execute the ``--recipes`` file before the parser is built, so that the methods, datasets and
    profiles it registers are choices of ``--method``, ``--dataset`` and ``--profile`` (and listed by
    ``--help``)."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--recipes")
    path = pre.parse_known_args(argv)[0].recipes
    if path:
        from labeldp.recipes import load_recipes

        load_recipes(path)


def main(argv: list[str] | None = None) -> int:
    """Run ``labeldp`` with ``argv`` (None: ``sys.argv[1:]``); returns the exit status.

    A :class:`~labeldp.errors.LabelDPError` (or a read of private labels outside the boundary) is printed as
    one line, status 2, as is any command but ``train`` under ``torchrun``; argparse's errors exit with 2;
    Ctrl-C at any point, start-up included, is one line and status 130."""
    try:
        return _main(sys.argv[1:] if argv is None else list(argv))
    except KeyboardInterrupt:  # before the command started (imports, the parser) or while it said so
        print("\nlabeldp: interrupted.", file=sys.stderr)
        return 130


def _main(argv: list[str]) -> int:
    """:func:`main`, less the interrupts outside the command's run."""
    runtime.prefer_short_waits()  # before torch is imported: idle OpenMP threads spin briefly, then sleep
    from labeldp.errors import BudgetError, ConfigError, LabelDPError

    try:
        _load_user_recipes(argv)
    except LabelDPError as error:
        print(f"labeldp: error: {error}", file=sys.stderr)
        return 2
    args = build_parser(_command(argv)).parse_args(argv)
    runtime.reuse_freed_memory()
    from labeldp.boundary.labels import PrivateLabelAccessError

    try:
        data_parallel = args.command == "train" or (args.command, getattr(args, "action", None)) == ("hashed", "train")
        if runtime.requested() and not data_parallel:
            raise ConfigError(
                f"`labeldp {args.command}` runs in one process; under torchrun only `labeldp train` runs "
                "(data-parallel), and `labeldp hashed train`"
            )
        importlib.import_module(COMMANDS[args.command][0]).run(args)
    except (LabelDPError, BudgetError, PrivateLabelAccessError) as error:
        print(f"labeldp: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        again = (
            " Run the same command again to continue where it stopped."
            if args.command in ("train", "sweep", "tune")
            else ""
        )
        print(f"\nlabeldp: interrupted.{again}", file=sys.stderr)
        return 130
    return 0


__all__ = ["COMMANDS", "build_parser", "main"]
