"""The recipes (recipes/training.py): a recipe borrowed from another dataset of the family is not the
dataset's own, so a run on that dataset chooses its options on its own release."""

from __future__ import annotations

from labeldp.recipes.training import own_recipe, recipe_for


def test_a_borrowed_recipe_is_not_the_datasets_own() -> None:
    for dataset, family in (("fashion-mnist", "mnist"), ("kmnist", "mnist"), ("cifar100", "cifar10")):
        assert recipe_for(dataset, "lp-2st").borrowed_from == family and own_recipe(dataset, "lp-2st") is None
    for dataset in ("mnist", "digits", "cifar10"):
        assert own_recipe(dataset, "lp-2st") is recipe_for(dataset, "lp-2st") is not None
    assert own_recipe("mnist", "lp-2st", "cluster") is not None and own_recipe("csv", "lp-1st") is None


def test_a_movielens_run_without_a_recipe_takes_the_defaults() -> None:
    from labeldp.recipes.builtin_profiles import movielens_config
    from labeldp.runs import RunConfig

    assert recipe_for("movielens", "pate") is None
    assert movielens_config("pate", 1.0) == RunConfig(dataset="movielens", method="pate", epsilon=1.0)
    assert movielens_config("lp-1st", 1.0).train == recipe_for("movielens", "lp-1st").train
