"""What ``labeldp train`` and ``labeldp tune`` share: the run options' flags, the recipe applied to
what the user did not type, and torch's threads."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from labeldp.config.method_registry import option_fields
from labeldp.config.run_config import RunConfig
from labeldp.config.shared_options import BUDGET_DIR, DEVICE, NO_RECIPE, QUIET, RECIPES, THREADS, TOTAL_EPSILON
from labeldp.config.train_config import TrainConfig
from labeldp.errors import ConfigError
from labeldp.options import (
    add_dataclass_arguments,
    add_option,
    add_options,
    dataclass_from_args,
    flag_name,
    flag_of,
    typed_options,
)

#: the training settings' names: a recipe sets them, with the model
TRAINING = frozenset(field.name for field in dataclasses.fields(TrainConfig))

if TYPE_CHECKING:
    from labeldp.recipes.applied import AppliedRecipe

#: where a method's option's value is kept in the namespace, apart from RunConfig's fields
_OWN = "options."


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every RunConfig setting and of every method's options (a group for the options of the same
    methods), and ``--recipes``, ``--no-recipe``, ``--device``, ``--threads``, ``--quiet`` and the budget's."""
    add_options(parser, "train", RECIPES, NO_RECIPE)
    add_dataclass_arguments(parser, RunConfig, "train", {"train": ("training (per stage)", None)})
    groups: dict[tuple[str, ...], argparse._ArgumentGroup] = {}
    for name, (methods, each) in option_fields().items():
        if methods not in groups:
            groups[methods] = parser.add_argument_group(f"options of --method {', '.join(methods)}")
        declaration = each.metadata["option"]
        add_option(groups[methods], declaration, "train", name, dest=_OWN + name, annotation=str(each.type),
                   typed_only=True)  # fmt: skip
    add_options(parser, "train", DEVICE, THREADS, QUIET, BUDGET_DIR, TOTAL_EPSILON)


def budget_policy(args: argparse.Namespace):
    """The dataset ledgers' folder and cap of ``--budget-dir`` and ``--total-epsilon`` (each left out read from
    the environment: :meth:`~labeldp.accounting.policy.BudgetPolicy.from_environment`)."""
    from labeldp.accounting.policy import BudgetPolicy

    return BudgetPolicy.from_environment(getattr(args, "budget_dir", None), getattr(args, "total_epsilon", None))


def typed_method_options(args: argparse.Namespace) -> dict:
    """The values typed for the methods' options, by name."""
    typed = {name: getattr(args, _OWN + name) for name in option_fields() if hasattr(args, _OWN + name)}
    return {name: tuple(value) if isinstance(value, list) else value for name, value in typed.items()}


def method_option_flags(names) -> list[str]:
    """The flags of the methods' options ``names``."""
    found = option_fields()
    return [flag_name(found[name][1].metadata["option"], name, found[name][1].default) for name in names]


def config_with_recipe(args: argparse.Namespace) -> RunConfig:
    """The run the flags describe (:func:`config_and_recipe`'s configuration)."""
    return config_and_recipe(args)[0]


def config_and_recipe(args: argparse.Namespace) -> tuple[RunConfig, AppliedRecipe]:
    """The run the flags describe, and the recipe its options came from: what the user typed as typed, every
    other option of a recipe from the dataset's and method's best known one (:mod:`labeldp.recipes.training`;
    with ``--prior``, that prior's where one exists), else (or with ``--no-recipe``) the library's defaults.
    Unless ``args.quiet``, it prints which, and where it came from, in the words the run's summary records."""
    from labeldp.recipes.applied import dataset_recipe
    from labeldp.recipes.training import recipe_for, with_recipe

    typed_own = typed_method_options(args)
    config = dataclasses.replace(dataclass_from_args(RunConfig, args), options=typed_own)
    own = [
        f.name for f in dataclasses.fields(config.options) if f.name in typed_own
    ]  # (another's at its default: none)
    typed = typed_options(args, RunConfig)
    ignored = getattr(args, "no_recipe", False)
    recipe = None if ignored else recipe_for(config.dataset, config.method, config.prior)
    recipe_sets = {"model", *TRAINING} | set(recipe.options_for(config.epsilon) if recipe is not None else ())
    # the method's options typed are given over the recipe's (or the defaults), as its training is
    flags = [flag_of(RunConfig, name) for name in typed & recipe_sets] + method_option_flags(own)
    typed |= set(own)
    applied = dataset_recipe(config.dataset, config.method, config.prior, recipe, flags, ignored=ignored)
    if not args.quiet:
        print(applied.console_line(recipe.describe(config.epsilon) if recipe is not None else ""))
    return (config if recipe is None else with_recipe(config, recipe, keep=typed)), applied


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
