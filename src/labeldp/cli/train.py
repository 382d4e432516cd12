"""``labeldp train``: one run, into a run directory (resumed if it exists)."""

from __future__ import annotations

import argparse

from labeldp.cli.common import (
    add_run_arguments,
    budget_policy,
    config_and_recipe,
    method_option_flags,
    set_threads,
    typed_method_options,
)
from labeldp.config.shared_options import OUT
from labeldp.config.tuning import AutoTuneConfig
from labeldp.options import Option, add_dataclass_arguments, add_options

DESCRIPTION = (
    "Train one model with label DP. The run directory receives config.json, ledger.json, the noisy labels "
    "of each stage, metrics.jsonl and summary.json. Running the same command again resumes an interrupted "
    "run without drawing new noisy labels. Every option you type is used as typed; the others take the "
    "dataset's recipe for the method where there is one, else the library's defaults. Where the dataset has "
    "no recipe of its own (a table of yours; Fashion-MNIST and KMNIST borrow MNIST's) or --no-recipe sets it "
    "aside, the learning rate is chosen on this run's own release within --tune-budget, at no extra epsilon, "
    "unless you type --lr."
)
#: the options that apply on top of --profile
PROFILE_OPTIONS = {"data_dir"}
PROFILE = Option(
    "run a named recipe (see `labeldp profiles`); only --data-dir, --device, --threads and --quiet apply on top "
    "of it, other options are refused",
    type="str | None",
    flag="--profile",
    metavar="KEY",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--profile``, every run option, ``--tune-budget`` and ``--out``."""
    add_options(parser, "train", PROFILE)
    add_run_arguments(parser)
    add_dataclass_arguments(parser.add_argument_group("tuning on the run's own release"), AutoTuneConfig, "train")
    add_options(parser, "train", OUT, required=[OUT])


def run(args: argparse.Namespace) -> None:
    """Train one run into ``--out`` (resumed if it exists) and print its summary.

    Everything the run writes is released under the label-DP guarantee its ledger accounts, whose epsilon the
    summary prints (none for a non-private method; NOT PRIVATE where the noise can be regenerated).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``--profile`` is given with options that would not apply to it, or the options cannot work.
    """
    from labeldp import distributed
    from labeldp.cli.summary import print_summary
    from labeldp.config.run_config import RunConfig
    from labeldp.errors import ConfigError
    from labeldp.experiments.auto_tune import auto_tuned_run
    from labeldp.options import flag_of, typed_options
    from labeldp.recipes import get_profile
    from labeldp.recipes.applied import profile_recipe

    if distributed.env_rank() != 0:  # under torchrun rank 0 speaks for the run
        args.quiet = True
    if args.profile:
        typed = typed_options(args, RunConfig) | typed_options(args, AutoTuneConfig)
        ignored = sorted(
            flag_of(RunConfig, n) if n != "tune_budget" else "--tune-budget" for n in typed - PROFILE_OPTIONS
        ) + method_option_flags(typed_method_options(args))
        ignored += ["--no-recipe"] if args.no_recipe else []
        if ignored:
            flags = ", ".join(ignored)
            raise ConfigError(
                f"--profile runs its recipe as registered; {flags} would not apply to it (only "
                "--data-dir, --device, --threads and --quiet do). For other settings use "
                "`labeldp sweep --base PROFILE --grid NAME=VALUE` or register a recipe (--recipes)"
            )
        profile = get_profile(args.profile)
        config = profile.config.with_overrides(data_dir=getattr(args, "data_dir", None))
        recipe = profile_recipe(profile)
        if not args.quiet:
            print(recipe.console_line(profile.description))
        budget = 0.0
    else:
        if getattr(args, "method", None) is None and (method := recorded_method(args.out)) is not None:
            args.method = method  # as if typed: the rerun finishes the run the folder holds
        config, recipe = config_and_recipe(args)
        budget = tune_budget(args, config)
    set_threads(args, config.dataset)
    summary = auto_tuned_run(config, args.out, budget=budget, device=args.device, progress=not args.quiet,
                             recipe=recipe, policy=budget_policy(args))  # fmt: skip
    # after an error a rank leaves without waiting for the others: torchrun then stops them all
    distributed.stop()
    if distributed.env_rank() == 0:
        print_summary(summary)
        print(f"run directory: {args.out}")


def recorded_method(out: str) -> str | None:
    """The method the run folder ``out`` records (its ``config.json``, else its auto-tune's base; None: none): a
    rerun that names no method finishes the run the folder holds, whatever the default is now."""
    from labeldp.experiments.auto_tune import AUTO_TUNE_FILE
    from labeldp.runs.rundir import RunDirectory

    folder = RunDirectory(out)
    saved, record = folder.read_config(), folder.root / AUTO_TUNE_FILE
    if saved is None and record.is_file():
        saved = folder.read_json(record).get("base")
    return (saved or {}).get("method")


def tune_budget(args: argparse.Namespace, config) -> float:
    """The budget of tuning the run's learning rate on its own release: ``--tune-budget`` where the dataset
    has no recipe of its own for the method (:func:`~labeldp.recipes.training.own_recipe`) or ``--no-recipe``
    sets it aside, else 0; also 0, said unless ``--quiet``, where ``--lr`` is typed or under torchrun (the
    candidates train in one process)."""
    from labeldp import runtime
    from labeldp.errors import ConfigError
    from labeldp.options import dataclass_from_args
    from labeldp.recipes.training import own_recipe

    budget = dataclass_from_args(AutoTuneConfig, args).tune_budget
    if budget < 0:
        raise ConfigError(f"--tune-budget must be 0 (off) or positive, got {budget:g}")
    if budget == 0 or (not args.no_recipe and own_recipe(config.dataset, config.method, config.prior) is not None):
        return 0.0
    why = "you typed --lr, the option it tunes" if hasattr(args, "lr") else None
    if why is None and runtime.requested():
        why = "under torchrun (its candidates train in one process)"
    if why is not None:
        if not args.quiet:
            print(
                f"auto-tune: off ({why}); `labeldp tune --grid lr=...` chooses options on one release, "
                "for no extra epsilon"
            )
        return 0.0
    return budget
