"""The options every training command shares (cli/common.py): with no training option typed a run
takes the tuned recipe (the profile the README reports), and every option typed wins over the
recipe, even one typed at the library's default."""

from __future__ import annotations

import json

import pytest

from labeldp.cli import build_parser, main
from labeldp.config.run_config import RunConfig


def test_no_training_options_means_the_best_recipe(tmp_path, capsys) -> None:
    assert (
        main(
            [
                "train",
                "--method",
                "alibi",
                "--epsilon",
                "2",
                "--lr",
                "0.03",
                "--out",
                str(tmp_path / "run"),
                "--quiet",
                "--epochs",
                "1",
            ]
        )
        == 0
    )
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert config["train"]["batch_size"] == 32 and config["train"]["lr"] == 0.03  # the digits recipe, your lr


@pytest.mark.parametrize("method", ["lp-1st", "lp-2st", "alibi", "dp-sgd"])
def test_mnist_defaults_are_the_profile_recipe(method) -> None:
    """`labeldp train --dataset mnist --method M --epsilon 2` with no training option trains exactly as
    the profile mnist/e2/M/run0, whose accuracy the results page reports, but for the network: the
    profile keeps the small CNN its figure was measured with, the defaults take the rule's (DP-SGD's
    recipe names its own in both)."""
    import dataclasses

    from labeldp.cli import build_parser
    from labeldp.cli.common import config_with_recipe
    from labeldp.methods.stages import first_release_of
    from labeldp.recipes.profile_registry import get_profile

    args = build_parser("train").parse_args(
        [
            "train",
            "--dataset",
            "mnist",
            "--data-dir",
            "m",
            "--method",
            method,
            "--epsilon",
            "2",
            "--out",
            "o",
            "--quiet",
        ]
    )
    default = config_with_recipe(args)
    profile = get_profile(f"mnist/e2/{method}/run0").config
    assert (default.model, profile.model) == (("tanh-cnn", "tanh-cnn") if method == "dp-sgd" else (None, "cnn"))
    # LP-2ST's profile pins the paper's first release, RR, which auto takes too at epsilon 2 with 10 classes
    assert first_release_of(default.resolved(), 10) == first_release_of(profile.resolved(), 10)
    profile = dataclasses.replace(profile, model=default.model, data_dir=None, options=default.options)
    assert dataclasses.replace(default, data_dir=None).resolved() == profile.resolved()


@pytest.mark.parametrize(
    "typed, expected",
    [
        ([], {"lr": 0.1, "epochs": 12}),  # MNIST's LP-2ST recipe
        (["--lr", "0.05"], {"lr": 0.05, "epochs": 12}),  # 0.05 is the library's default, and what the user typed
        (["--epochs", "10", "--lr", "0.1"], {"lr": 0.1, "epochs": 10}),
        (["--model", "mlp", "--batch-size", "128"], {"model": "mlp", "batch_size": 128, "lr": 0.1}),
    ],
)
def test_every_option_typed_wins_over_the_recipe_and_every_other_takes_it(typed, expected) -> None:
    """The command line knows what was typed (a flag not typed sets nothing), so an option typed at its
    library default is not mistaken for one left out: `--lr 0.05` trains at 0.05, not at the recipe's 0.1."""
    from labeldp.cli import build_parser
    from labeldp.cli.common import config_with_recipe

    args = build_parser("train").parse_args(
        [
            "train",
            "--dataset",
            "mnist",
            "--data-dir",
            "m",
            "--method",
            "lp-2st",
            "--epsilon",
            "2",
            "--out",
            "o",
            "--quiet",
            *typed,
        ]
    )
    config = config_with_recipe(args)
    for name, value in expected.items():
        assert (config.model if name == "model" else getattr(config.train, name)) == value


def _defaults(*argv: str) -> RunConfig:
    from labeldp.cli.common import config_with_recipe

    args = build_parser("train").parse_args(["train", *argv, "--out", "o", "--quiet"])
    return config_with_recipe(args)


def _same_run(config: RunConfig, profile_key: str) -> bool:
    import dataclasses

    from labeldp.recipes import get_profile

    profile = get_profile(profile_key).config
    return (
        dataclasses.replace(config, data_dir=None).resolved() == dataclasses.replace(profile, data_dir=None).resolved()
    )


@pytest.mark.parametrize("method", ["lp-1st", "rr-on-bins", "rr-on-bins-mst", "laplace-regression"])
def test_movielens_defaults_are_its_profiles_recipe(method) -> None:
    config = _defaults("--dataset", "movielens", "--data-dir", "m", "--method", method, "--epsilon", "1")
    assert _same_run(config, f"movielens/e1/{method}/run0")


def test_movielens_says_which_recipe_it_takes(capsys) -> None:
    from labeldp.cli.common import config_with_recipe

    args = build_parser("train").parse_args(
        ["train", "--dataset", "movielens", "--data-dir", "m", "--method", "lp-1st", "--epsilon", "1", "--out", "o"]
    )
    config_with_recipe(args)
    out = capsys.readouterr().out
    assert "recipe: movielens/lp-1st (the dataset's own" in out and "no tuned recipe" not in out


def test_a_cluster_prior_takes_the_best_cluster_profiles_encoder() -> None:
    config = _defaults(
        "--dataset", "mnist", "--data-dir", "m", "--method", "lp-2st", "--prior", "cluster", "--epsilon", "0.1"
    )
    assert config.encoder == "spectral" and config.clusters == 50
    assert _same_run(config, "mnist/e0.1/lp-2st-spectral/run0")
    typed = _defaults(
        "--dataset", "mnist", "--data-dir", "m", "--method", "lp-2st", "--prior", "cluster", "--epsilon", "0.1",
        "--encoder", "pca",
    )  # fmt: skip
    assert typed.encoder == "pca" and typed.clusters == 50  # what is typed wins, the rest is the recipe's


def test_a_table_of_ones_own_is_tuned_on_its_own_release_unless_its_lr_is_typed(capsys) -> None:
    """A table has no recipe: its learning rate is chosen on the run's own release within the default
    budget; typed, --lr is used as typed (and the run says how to tune it); --tune-budget 0 is off."""
    from labeldp.cli.common import config_with_recipe
    from labeldp.cli.train import tune_budget
    from labeldp.config.tuning import DEFAULT_TUNE_BUDGET

    def budget(*more: str) -> float:
        argv = ["train", "--dataset", "csv", "--table", "t.csv", "--classes", "0", "1", "--method", "lp-1st"]
        args = build_parser("train").parse_args([*argv, "--epsilon", "1", "--out", "o", *more])
        return tune_budget(args, config_with_recipe(args))

    assert budget() == DEFAULT_TUNE_BUDGET
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and "no tuned recipe" in lines[0]
    assert budget("--lr", "0.05") == 0.0
    lines = capsys.readouterr().out.splitlines()
    assert (
        "auto-tune: off (you typed --lr" in lines[1] and "labeldp tune" in lines[1] and "no extra epsilon" in lines[1]
    )
    assert budget("--tune-budget", "0") == 0.0 and budget("--tune-budget", "0.5") == 0.5
