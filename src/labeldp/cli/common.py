"""What ``labeldp train`` and ``labeldp tune`` share: the run options' flags, the recipe applied to
what the user did not type, and torch's threads."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from labeldp.config.run_config import RunConfig
from labeldp.errors import ConfigError
from labeldp.options import add_dataclass_arguments, dataclass_from_args, flag_of, typed_options

if TYPE_CHECKING:
    from labeldp.recipes.applied import AppliedRecipe

#: titles of the argument groups generated from RunConfig's nested settings
OPTION_GROUPS = {
    "train": ("training (per stage)", None),
    "dpsgd": ("dp-sgd", "options of --method dp-sgd (--batch-size is the expected Poisson batch size)"),
    "pate": ("pate", "options of --method pate (the training options are the student's)"),
    "marginals": ("marginals", "options of --method marginals (it has no training loop)"),
}


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every RunConfig option, and ``--recipes``, ``--device``, ``--threads``, ``--quiet``."""
    parser.add_argument(
        "--recipes",
        metavar="FILE",
        help="Python file to execute first: it registers profiles, methods or datasets of your own",
    )
    add_dataclass_arguments(parser, RunConfig, OPTION_GROUPS)
    parser.add_argument(
        "--device", default="auto", help="torch device: auto (GPU if present), cpu, cuda, cuda:1 (default %(default)s)"
    )
    add_threads_argument(parser)
    parser.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    add_budget_arguments(parser)


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    """``--budget-dir`` and ``--total-epsilon``, of every command that releases labels (see
    ``docs/dataset-ledger.md``); :func:`labeldp.cli.main` hands them to the library and its workers."""
    parser.add_argument(
        "--budget-dir",
        metavar="DIR",
        help="the folder of the per-dataset ledgers, which compose every release of a dataset's labels across "
        "runs (default: $LABELDP_BUDGET_DIR, else ~/.local/share/labeldp/budget)",
    )
    parser.add_argument(
        "--total-epsilon",
        type=float,
        metavar="E",
        help="refuse, before anything is drawn, a release that would take its dataset's composed epsilon past E",
    )


def recipe_options() -> set[str]:
    """The options a recipe sets, as RunConfig spells them: ``model`` and the nested settings' fields."""
    defaults = RunConfig()
    return {"model"} | {
        field.name for section in ("train", "dpsgd", "pate") for field in dataclasses.fields(getattr(defaults, section))
    }


def config_with_recipe(args: argparse.Namespace) -> RunConfig:
    """The run the flags describe (:func:`config_and_recipe`'s configuration)."""
    return config_and_recipe(args)[0]


def config_and_recipe(args: argparse.Namespace) -> tuple[RunConfig, AppliedRecipe]:
    """The run the flags describe, and the recipe its options came from: what the user typed as typed, every
    other option of a recipe from the dataset's and method's best known one (:mod:`labeldp.recipes.training`;
    with ``--prior``, that prior's where one exists), else the library's defaults. Unless ``args.quiet``, it
    prints which, and where it came from, in the words the run's summary records."""
    from labeldp.recipes.applied import dataset_recipe
    from labeldp.recipes.training import recipe_for, with_recipe

    config = dataclass_from_args(RunConfig, args)
    typed = typed_options(args, RunConfig)
    recipe = recipe_for(config.dataset, config.method, config.prior)
    recipe_sets = recipe_options() | set(recipe.options_for(config.epsilon) if recipe is not None else ())
    flags = [flag_of(RunConfig, name) for name in typed & recipe_sets]
    applied = dataset_recipe(config.dataset, config.method, config.prior, recipe, flags)
    if not args.quiet:
        print(applied.console_line(recipe.describe(config.epsilon) if recipe is not None else ""))
    return (config if recipe is None else with_recipe(config, recipe, keep=typed)), applied


#: ``--threads``' help, shared by every command that trains
THREADS_HELP = (
    "CPU threads of torch (default: 1 for tables and the embedded digits, whose small models run "
    "faster on one; else the cores free when the run starts, re-checked during training, so that a busy "
    "machine's other processes keep theirs; at most OMP_NUM_THREADS where it is set)"
)


def add_threads_argument(parser: argparse.ArgumentParser, help_text: str = THREADS_HELP) -> None:
    """Add ``--threads``."""
    parser.add_argument("--threads", type=int, metavar="N", help=help_text)


def check_threads(args: argparse.Namespace) -> None:
    """Refuse (:class:`~labeldp.errors.ConfigError`) ``--threads`` below 1."""
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {args.threads}")


def set_threads(args: argparse.Namespace, dataset: str) -> None:
    """torch's CPU threads: ``--threads``, else :func:`labeldp.runtime.default_threads` for ``dataset``
    (re-checked during training, :func:`labeldp.runtime.recheck_threads`)."""
    from labeldp import runtime

    check_threads(args)
    runtime.set_threads(args.threads, dataset)
