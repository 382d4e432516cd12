"""A run's plan (runs/plan.py): computed once, it is what the folder records and what a rerun compares; a
plan that cannot run is refused before anything is written."""

from __future__ import annotations

import pytest

from labeldp.errors import ConfigError
from labeldp.runs import RunConfig, RunDirectory
from labeldp.runs.plan import plan_run
from labeldp.runs.run import saved_config
from labeldp.training import TrainConfig


def test_the_plan_is_what_the_folder_records_and_a_rerun_compares(blobs, tmp_path) -> None:
    config = RunConfig(dataset="csv", method="lp-2st", epsilon=1.0, train=TrainConfig(epochs=1))
    plan = plan_run(config, "cpu", blobs)
    assert plan.config == config.resolved() and plan.in_memory
    # lp-2st chooses its first release on the data (auto), and says so
    assert plan.recorded["first_release"] != "auto" and plan.chosen is not None
    assert plan.network == plan.recorded["model"] == "mlp"
    out = RunDirectory(tmp_path / "run")
    out.create()
    plan.write(out)
    saved, facts = out.read_config(), out.read_data_facts()
    assert saved == plan.recorded
    assert facts is not None and facts["model"] == "mlp" and facts["source"] == "in-memory"
    # a rerun compares the saved configuration, read as this version records it, with its plan's
    assert saved_config(saved, facts, plan.network, facts["num_classes"]) == plan.recorded
    other = plan_run(RunConfig(dataset="csv", method="lp-2st", epsilon=2.0), "cpu", blobs)
    assert saved_config(saved, facts, other.network, facts["num_classes"]) != other.recorded
    assert any(line.startswith("network: mlp") for line in plan.lines(None))


def test_a_plan_that_cannot_run_is_refused_before_anything_is_written(blobs, tmp_path) -> None:
    with pytest.raises(ConfigError, match="exceeds the"):
        plan_run(RunConfig(dataset="csv", method="lp-2st", epsilon=1.0, prior="cluster", clusters=10**6), "cpu", blobs)
    with pytest.raises(ConfigError, match="fitted from released labels"):
        plan_run(RunConfig(dataset="csv", method="dp-sgd", epsilon=1.0, model="gbdt"), "cpu", blobs)
    assert not (tmp_path / "run").exists()
