"""A run tells one story: its console and its summary.json name the recipe its options came from and the
network it trains, each with where it came from, in the same words; its config.json says what the
summary says (the network, the test labels as measured) and a folder saved before it did is the same run."""

from __future__ import annotations

import dataclasses
import json

from labeldp.cli import main
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.train_config import TrainConfig
from labeldp.runs import RunConfig, train_run
from tests.helpers import table_config, write_table


def _read(folder) -> tuple[dict, dict]:
    return json.loads((folder / "config.json").read_text()), json.loads((folder / "summary.json").read_text())


def test_the_console_and_the_summary_name_the_recipe_and_the_network_and_the_config_agrees(tmp_path, capsys) -> None:
    """The digits' own recipe under a typed --epochs, the rule's network; the digits' test set is public,
    which config.json and the summary both say; the same command then finds the run finished."""
    out = tmp_path / "run"
    command = ["train", "--method", "lp-1st", "--epsilon", "2", "--epochs", "1", "--out", str(out)]
    assert main(command) == 0
    printed = capsys.readouterr().out
    config, summary = _read(out)
    assert summary["recipe"] == "digits/lp-1st"
    assert summary["recipe_source"] == "the dataset's own, chosen by test accuracy on this dataset; with your --epochs"
    assert "recipe: digits/lp-1st (the dataset's own, chosen by test accuracy on this dataset): " in printed
    assert summary["network"] == config["model"] == "mlp"
    assert summary["network_source"] == "the rule's choice for these inputs"
    assert "network: mlp (the rule's choice for these inputs)" in printed
    assert config["test_labels"] == "public" and summary["test_labels"] == "public test set"
    assert main([*command, "--quiet"]) == 0  # config.json as written is the same run
    assert _read(out)[1] == summary


def test_a_profile_is_named_with_its_version_and_a_typed_network_as_yours(tmp_path, capsys) -> None:
    assert main(["train", "--profile", "digits/e1/lp-1st/run0", "--out", str(tmp_path / "profile")]) == 0
    printed = capsys.readouterr().out
    summary = _read(tmp_path / "profile")[1]
    assert summary["recipe"] == "digits/e1/lp-1st/run0"
    assert summary["recipe_source"] == "a registered profile, version 1, run as registered"
    assert f"recipe: digits/e1/lp-1st/run0 ({summary['recipe_source']})" in printed
    assert f"network: {summary['network']} ({summary['network_source']})" in printed

    command = ["train", "--method", "lp-1st", "--epsilon", "2", "--epochs", "1", "--model", "mlp", "--quiet"]
    assert main([*command, "--out", str(tmp_path / "typed")]) == 0
    summary = _read(tmp_path / "typed")[1]
    assert summary["network_source"] == "your --model" and summary["recipe_source"].endswith("--epochs, --model")


def test_a_configuration_given_to_train_run_is_taken_as_given(tmp_path) -> None:
    config = RunConfig(method="lp-1st", epsilon=2.0, train=TrainConfig(epochs=1))
    summary = train_run(config, tmp_path / "rule", progress=False)
    assert summary["recipe"] is None and summary["recipe_source"] == "none: the configuration as given"
    assert summary["network_source"] == "the rule's choice for these inputs"
    named = train_run(dataclasses.replace(config, model="mlp"), tmp_path / "named", progress=False)
    assert named["network_source"] == "as configured"


def test_a_folder_saved_before_config_json_said_what_the_summary_says_is_the_same_run(tmp_path) -> None:
    """config.json naming no network and "released" test labels for the digits' public test set, as an
    earlier version wrote it: the same configuration finds it finished, a sweep counts it done, and
    the configuration read back resolves."""
    from labeldp.experiments.sweep_runner import _finished_as_configured
    from labeldp.runs import RunDirectory

    config = RunConfig(method="lp-1st", epsilon=2.0, train=TrainConfig(epochs=1))
    folder = tmp_path / "old"
    summary = train_run(config, folder, progress=False)
    saved = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**saved, "model": None, "test_labels": "released"}))
    assert train_run(config, folder, progress=False) == summary
    assert _finished_as_configured(RunDirectory(folder), config)
    assert RunConfig.from_dict(saved).resolved().test_labels == "released"  # "public" read back: nothing to release


def test_held_out_test_labels_read_as_measured(tmp_path) -> None:
    """A table's held-out rows: released by LP-1ST (estimated metrics), never by DP-SGD (config.json says
    none, as the summary does)."""
    write_table(tmp_path / "t.csv")
    runs = {
        "lp-1st": (table_config(tmp_path / "t.csv"), "released", "estimated from their release"),
        "dp-sgd": (
            # a noise multiplier given (epsilon 0.52 here): no calibration (seconds) to wait for
            dataclasses.replace(
                table_config(tmp_path / "t.csv"), method="dp-sgd", delta=1e-3, options=DPSGDConfig(noise_multiplier=3.0)
            ),
            "none",
            "private: not measured (dp-sgd releases no label)",
        ),
    }
    for name, (config, recorded, measured) in runs.items():
        train_run(config, tmp_path / name, progress=False)
        saved, summary = _read(tmp_path / name)
        assert saved["test_labels"] == recorded and summary["test_labels"].startswith(measured)
        assert train_run(config, tmp_path / name, progress=False) == summary  # the same run
