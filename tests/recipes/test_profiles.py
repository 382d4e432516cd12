"""Profiles (recipes/profile_registry.py): the paper's profiles exist and resolve, a user's recipe file is
loaded, and profiles are selected by key or prefix."""

from __future__ import annotations

import pytest

from labeldp.cli import main
from labeldp.errors import ConfigError
from labeldp.recipes import get_profile, list_profiles, load_recipes, register
from labeldp.runs import RunConfig


def test_paper_profiles_exist_and_resolve() -> None:
    keys = [p.key for p in list_profiles(r"^mnist/e(1|2|4)/lp-(1|2)st/run0$")]
    assert keys == [
        "mnist/e1/lp-1st/run0",
        "mnist/e1/lp-2st/run0",
        "mnist/e2/lp-1st/run0",
        "mnist/e2/lp-2st/run0",
        "mnist/e4/lp-1st/run0",
        "mnist/e4/lp-2st/run0",
    ]
    for dataset in ("mnist", "fashion-mnist", "cifar10", "digits"):
        assert list_profiles(f"^{dataset}/")
    for every in list_profiles("."):  # no recipe sets an option its method does not use
        every.config.resolved()
    profile = get_profile("cifar10/e8/lp-2st/run2")
    assert profile.config.epsilon == 8.0 and profile.config.seed == 2 and profile.config.train.mixup_alpha > 0
    pate = get_profile("mnist/e0.5/pate/run1").config.resolved()
    assert pate.method == "pate" and pate.delta == 1e-5 and pate.seed == 1 and pate.train.epochs == 100
    cluster = get_profile("mnist/e0.1/lp-2st-cluster/run0").config.resolved()
    assert (
        cluster.prior == "cluster" and cluster.prior_temperature == 4.0 and cluster.prior_epsilon == pytest.approx(0.01)
    )
    with pytest.raises(ValueError, match="did you mean"):
        get_profile("mnist/e2/lp-2st/run9")
    with pytest.raises(ValueError, match="already registered"):
        register("mnist/e2/lp-2st/run0", RunConfig(epsilon=2.0))
    with pytest.raises(ValueError, match="needs --epsilon"):
        register("broken/recipe", RunConfig(method="lp-1st"))


def test_user_recipe_file(tmp_path, capsys) -> None:
    recipes = tmp_path / "my_recipes.py"
    recipes.write_text(
        "from labeldp.recipes import register\n"
        "from labeldp.runs import RunConfig\nfrom labeldp.training import TrainConfig\n"
        "register('mine/digits/e3', RunConfig(method='lp-1st', epsilon=3.0, train=TrainConfig(epochs=2)))\n"
    )
    assert main(["profiles", "mine/", "--recipes", str(recipes)]) == 0
    assert "mine/digits/e3" in capsys.readouterr().out
    assert main(["train", "--profile", "mine/digits/e3", "--out", str(tmp_path / "run"), "--quiet"]) == 0
    assert "epsilon 3" in capsys.readouterr().out
    with pytest.raises(FileNotFoundError):
        load_recipes(tmp_path / "missing.py")
    (tmp_path / "recipes.txt").write_text(recipes.read_text())
    with pytest.raises(ConfigError, match="not a Python file"):  # no loader for the suffix
        load_recipes(tmp_path / "recipes.txt")


def test_profiles_are_selected_by_key_or_prefix() -> None:
    mnist = [p.key for p in list_profiles("mnist/")]
    assert mnist and all(key.startswith("mnist/") for key in mnist)  # not fashion-mnist/...
    assert [p.key for p in list_profiles("mnist/e2/lp-2st/run0")] == ["mnist/e2/lp-2st/run0"]
    assert all(p.key.startswith("mnist/e2/") for p in list_profiles("mnist/e2/"))
