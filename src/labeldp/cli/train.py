"""``labeldp train``: one run, into a run directory (resumed if it exists)."""

from __future__ import annotations

import argparse

from labeldp.cli.common import add_run_arguments, config_with_recipe, set_threads

DESCRIPTION = (
    "Train one model with label DP. The run directory receives config.json, ledger.json, the noisy labels "
    "of each stage, metrics.jsonl and summary.json. Running the same command again resumes an interrupted "
    "run without drawing new noisy labels. Every option you type is used as typed; the others take the "
    "dataset's recipe for the method where there is one, else the library's defaults."
)
#: the options that apply on top of --profile
PROFILE_OPTIONS = {"data_dir"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``train``'s arguments: ``--profile``, every run option (:func:`~labeldp.cli.common.add_run_arguments`)
    and ``--out``.

    Parameters
    ----------
    parser : argparse.ArgumentParser
        The command's parser.
    """
    parser.add_argument(
        "--profile",
        metavar="KEY",
        help="run a named recipe (see `labeldp profiles`); only --data-dir, --device, --threads and "
        "--quiet apply on top of it, other options are refused",
    )
    add_run_arguments(parser)
    parser.add_argument("--out", required=True, help="run directory (created, or resumed if it exists)")


def run(args: argparse.Namespace) -> None:
    """Train one run into ``--out`` (resumed if it exists) and print its summary.

    The run reads the dataset's private labels; everything it writes (noisy labels, models, metrics,
    summary) is released under the label-DP guarantee its ledger (``ledger.json``) accounts, whose
    epsilon the summary prints (none for a non-private method; NOT PRIVATE where the noise can be
    regenerated).

    Parameters
    ----------
    args : argparse.Namespace
        The parsed arguments.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``--profile`` is given with options that would not apply to it, or the options cannot work.
    """
    from labeldp import distributed
    from labeldp.cli.summary import print_summary
    from labeldp.config.run import RunConfig
    from labeldp.errors import ConfigError
    from labeldp.options import flag_of, typed_options
    from labeldp.recipes import get_profile
    from labeldp.runs import train_run

    if distributed.env_rank() != 0:  # under torchrun rank 0 speaks for the run
        args.quiet = True
    if args.profile:
        ignored = sorted(flag_of(RunConfig, name) for name in typed_options(args, RunConfig) - PROFILE_OPTIONS)
        if ignored:
            flags = ", ".join(ignored)
            raise ConfigError(
                f"--profile runs its recipe as registered; {flags} would not apply to it (only "
                "--data-dir, --device, --threads and --quiet do). For other settings use "
                "`labeldp sweep --base PROFILE --grid NAME=VALUE` or register a recipe (--recipes)"
            )
        config = get_profile(args.profile).config.with_overrides(data_dir=getattr(args, "data_dir", None))
    else:
        config = config_with_recipe(args)
    set_threads(args, config.dataset)
    summary = train_run(config, args.out, device=args.device, progress=not args.quiet)
    # after an error a rank leaves without waiting for the others: torchrun then stops them all
    distributed.stop()
    if distributed.env_rank() == 0:
        print_summary(summary)
        print(f"run directory: {args.out}")
