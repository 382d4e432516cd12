"""What ``labeldp train`` and ``labeldp tune`` share: the run options' flags, the recipe applied to
what the user did not type, and torch's threads."""

from __future__ import annotations

import argparse
import dataclasses
from typing import TYPE_CHECKING

from labeldp.config.method_registry import registered_options
from labeldp.config.run_config import RunConfig
from labeldp.config.shared_options import BUDGET_DIR, DEVICE, NO_RECIPE, QUIET, RECIPES, THREADS, TOTAL_EPSILON
from labeldp.errors import ConfigError
from labeldp.options import (
    add_dataclass_arguments,
    add_option,
    add_options,
    dataclass_from_args,
    flag_of,
    typed_options,
)

if TYPE_CHECKING:
    from labeldp.recipes.applied import AppliedRecipe

#: titles of the argument groups generated from RunConfig's nested settings
OPTION_GROUPS = {
    "train": ("training (per stage)", None),
    "dpsgd": ("dp-sgd", "options of --method dp-sgd (--batch-size is the expected Poisson batch size)"),
    "pate": ("pate", "options of --method pate (the training options are the student's)"),
    "marginals": ("marginals", "options of --method marginals (it has no training loop)"),
}


#: where a method's own option's value is kept in the namespace, apart from RunConfig's fields
_OWN = "method_options."


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every RunConfig option and of the registered methods' own, and ``--recipes``,
    ``--no-recipe``, ``--device``, ``--threads``, ``--quiet`` and the budget's."""
    add_options(parser, "train", RECIPES, NO_RECIPE)
    add_dataclass_arguments(parser, RunConfig, "train", OPTION_GROUPS)
    groups: dict[str, argparse._ArgumentGroup] = {}
    for name, (method, declaration) in registered_options().items():
        if method not in groups:
            groups[method] = parser.add_argument_group(method, f"options of --method {method}")
        add_option(groups[method], declaration, "train", name, dest=_OWN + name, typed_only=True)
    add_options(parser, "train", DEVICE, THREADS, QUIET, BUDGET_DIR, TOTAL_EPSILON)


def budget_policy(args: argparse.Namespace):
    """The dataset ledgers' folder and cap of ``--budget-dir`` and ``--total-epsilon`` (each left out read from
    the environment: :meth:`~labeldp.accounting.policy.BudgetPolicy.from_environment`)."""
    from labeldp.accounting.policy import BudgetPolicy

    return BudgetPolicy.from_environment(getattr(args, "budget_dir", None), getattr(args, "total_epsilon", None))


def method_options(args: argparse.Namespace) -> dict:
    """The values typed for the registered methods' own options, by name."""
    typed = {name: getattr(args, _OWN + name) for name in registered_options() if hasattr(args, _OWN + name)}
    return {name: tuple(value) if isinstance(value, list) else value for name, value in typed.items()}


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
    with ``--prior``, that prior's where one exists), else (or with ``--no-recipe``) the library's defaults.
    Unless ``args.quiet``, it prints which, and where it came from, in the words the run's summary records."""
    from labeldp.recipes.applied import dataset_recipe
    from labeldp.recipes.training import recipe_for, with_recipe

    config = dataclasses.replace(dataclass_from_args(RunConfig, args), method_options=method_options(args))
    typed = typed_options(args, RunConfig)
    ignored = getattr(args, "no_recipe", False)
    recipe = None if ignored else recipe_for(config.dataset, config.method, config.prior)
    recipe_sets = recipe_options() | set(recipe.options_for(config.epsilon) if recipe is not None else ())
    flags = [flag_of(RunConfig, name) for name in typed & recipe_sets]
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
