"""A run's plan (runs/plan.py): computed once, it is what the folder records and what a rerun compares; a
plan that cannot run is refused; a run interrupted while its plan is written resumes."""

from __future__ import annotations

import pytest

import labeldp.runs.plan as plan_module
from labeldp.errors import ConfigError
from labeldp.runs import RunConfig, RunDirectory, train_run
from labeldp.runs.plan import compared_configs, plan_run
from labeldp.training import TrainConfig

CONFIG = RunConfig(dataset="csv", method="lp-2st", epsilon=1.0, train=TrainConfig(epochs=1, batch_size=64))


def test_the_plan_is_what_the_folder_records_and_a_rerun_compares(blobs, tmp_path) -> None:
    plan = plan_run(CONFIG, "cpu", blobs)
    assert plan.config == CONFIG.resolved() and plan.in_memory
    # lp-2st chooses its first release on the data (auto), and says so
    assert plan.recorded["first_release"] != "auto" and plan.chosen is not None
    assert plan.network == plan.recorded["model"] == "mlp"
    out = RunDirectory(tmp_path / "run")
    out.create()
    plan.write(out)
    saved, facts = out.read_config(), out.read_data_facts()
    assert saved == plan.recorded
    assert facts is not None and facts["model"] == "mlp" and facts["source"] == "in-memory"
    existing, new = compared_configs(saved, facts, plan.config, blobs.input_shape, blobs.public_test)
    assert existing == new  # a rerun of the same configuration is the same run
    other = RunConfig(dataset="csv", method="lp-2st", epsilon=2.0).resolved()
    existing, new = compared_configs(saved, facts, other, blobs.input_shape, blobs.public_test)
    assert existing["epsilon"] != new["epsilon"]
    assert any(line.startswith("network: mlp") for line in plan.lines(None))


def test_a_plan_that_cannot_run_is_refused(blobs) -> None:
    with pytest.raises(ConfigError, match="exceeds the"):
        plan_run(RunConfig(dataset="csv", method="lp-2st", epsilon=1.0, prior="cluster", clusters=10**6), "cpu", blobs)
    with pytest.raises(ConfigError, match="fitted from released labels"):
        plan_run(RunConfig(dataset="csv", method="dp-sgd", epsilon=1.0, model="gbdt"), "cpu", blobs)


def test_a_run_interrupted_while_its_plan_is_written_resumes(blobs, tmp_path, monkeypatch) -> None:
    def interrupted(path, data):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:  # config.json written, data.json not
        patch.setattr(plan_module, "write_json_atomic", interrupted)
        with pytest.raises(KeyboardInterrupt):
            train_run(CONFIG, tmp_path / "run", progress=False, dataset=blobs)
    assert (tmp_path / "run" / "config.json").exists() and not (tmp_path / "run" / "data.json").exists()
    summary = train_run(CONFIG, tmp_path / "run", progress=False, dataset=blobs)
    assert summary["epsilon"] == pytest.approx(1.0, abs=2e-4)
