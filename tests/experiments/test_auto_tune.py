"""A run tuned on its own release (experiments/auto_tune.py): the ledger of one run, nothing chosen by a
true label, off means train_run, the fallback where the release says nothing about the options, the
plan within the budget, and a resumed run that keeps its recorded choice."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labeldp.boundary import unseal
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.experiments import auto_tune
from labeldp.experiments.auto_tune import AUTO_TUNE_FILE, auto_tuned_run, plan_candidates
from labeldp.experiments.candidates import candidate_config
from labeldp.runs import RunConfig, RunDirectory, train_run
from labeldp.training import TrainConfig
from tests.helpers import poison_in_place

pytestmark = pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")


def _config(**fields) -> RunConfig:
    train = TrainConfig(epochs=2, batch_size=64, lr=0.02)
    return RunConfig(**{"method": "lp-2st", "epsilon": 2.0, "insecure_noise_seed": 5, "train": train, **fields})


def _tags(folder) -> list[str]:
    return [entry.tag for entry in RunDirectory(folder).read_ledger().entries]


def test_the_ledger_is_one_runs_and_no_true_label_chooses(blobs, tmp_path, monkeypatch) -> None:
    """LP-2ST tuned on its first release: the ledger holds one run's releases at the run's epsilon, each
    the one a single run of the chosen options draws; poisoning the true labels right after the first
    release changes no score and no choice."""
    config = _config()
    clean = auto_tuned_run(config, tmp_path / "clean", progress=False, dataset=blobs)
    record = clean["auto_tune"]
    assert record["candidates"] == ["lr=0.02", "lr=0.04", "lr=0.01", "lr=0.08", "lr=0.005"]  # 0.23 run each
    assert record["work"]["ratio"] <= 2.0 and record["scored_on"] == ["stage1"]
    chosen = candidate_config(config.resolved(), record["chosen_options"])
    single = train_run(chosen, tmp_path / "single", progress=False, dataset=blobs)
    assert _tags(tmp_path / "clean") == _tags(tmp_path / "single") == ["stage1", "stage2"]
    assert clean["epsilon"] == single["epsilon"] == pytest.approx(2.0)
    assert clean["test_accuracy"] == single["test_accuracy"]
    for stage in ("stage1", "stage2"):
        with (
            np.load(tmp_path / "clean" / "noisy_labels" / f"{stage}.npz") as tuned,
            np.load(tmp_path / "single" / "noisy_labels" / f"{stage}.npz") as run,
        ):
            assert np.array_equal(tuned["labels"], run["labels"]) and np.array_equal(tuned["k"], run["k"])
    assert json.loads((tmp_path / "clean" / "summary.json").read_text())["auto_tune"] == record

    release_once = auto_tune.release_once

    def release_then_poison(*args, **kwargs):
        releases = release_once(*args, **kwargs)
        poison_in_place(blobs.y_train)  # in place: every holder sees it
        return releases

    monkeypatch.setattr(auto_tune, "release_once", release_then_poison)
    original = unseal(blobs.y_train).copy()
    poisoned = auto_tuned_run(config, tmp_path / "poisoned", progress=False, dataset=blobs)
    assert np.mean(unseal(blobs.y_train) != original) > 0.5
    assert [r["estimated_clean_accuracy"] for r in poisoned["auto_tune"]["results"]] == [
        r["estimated_clean_accuracy"] for r in record["results"]
    ]
    assert poisoned["auto_tune"]["chosen"] == record["chosen"]  # (its stage 2 is a release of the poisoned labels)
    blobs.y_train._root.values[:] = original


def test_a_budget_of_zero_is_train_run(blobs, tmp_path) -> None:
    config = _config(method="lp-1st")
    off = auto_tuned_run(config, tmp_path / "off", budget=0, progress=False, dataset=blobs)
    plain = train_run(config, tmp_path / "plain", progress=False, dataset=blobs)
    same = lambda summary: {k: v for k, v in summary.items() if k not in ("seconds", "dataset_ledger")}  # noqa: E731
    assert same(off) == same(plain)
    assert (off["dataset_ledger"]["releases"], plain["dataset_ledger"]["releases"]) == (1, 2)  # composed
    assert sorted(p.name for p in (tmp_path / "off").iterdir()) == sorted(
        p.name for p in (tmp_path / "plain").iterdir()
    )
    assert not (tmp_path / "off" / AUTO_TUNE_FILE).exists()
    with pytest.raises(ConfigError, match="0 \\(off\\) or positive"):
        auto_tuned_run(config, tmp_path / "negative", budget=-1, progress=False, dataset=blobs)


def test_where_the_release_says_nothing_the_base_options_train(blobs, tmp_path, capsys) -> None:
    """LP-1ST with a cluster prior of pure clusters at epsilon 0.5: most held-out examples are released
    with k = 1 (the prior's top class whatever the label); the run says so and trains its base options
    on the same release (one run's ledger)."""
    config = _config(method="lp-1st", epsilon=0.5, prior="cluster", clusters=10, encoder="raw")
    summary = auto_tuned_run(config, tmp_path / "run", progress=True, base_name="the family's recipe", dataset=blobs)
    record = summary["auto_tune"]
    assert record["chosen"] is None and "released with k = 1" in record["reason"] and "results" not in record
    assert "says nothing about the options" in capsys.readouterr().out
    assert RunDirectory(tmp_path / "run").read_config()["train"]["lr"] == 0.02
    assert _tags(tmp_path / "run") == ["prior", "stage1"] and not (tmp_path / "run" / "candidates").exists()


@pytest.mark.parametrize(
    "fields, budget, message",
    [
        ({"method": "lp-1st"}, 1.0, "pays for 1 candidate"),  # each candidate: 0.8 of a run
        ({"method": "pate"}, 2.0, "tune does not take method 'pate'"),
        ({"method": "dp-sgd"}, 2.0, "tuned by private-selection"),
    ],
)
def test_what_cannot_be_tuned_on_the_release_trains_as_given(blobs, fields, budget, message) -> None:
    with pytest.raises(ConfigError, match=message):
        plan_candidates(_config(**fields).resolved(), blobs, budget)
    options, work = plan_candidates(_config(method="lp-1st").resolved(), blobs, 2.0)
    assert options == [{"lr": 0.02}, {"lr": 0.04}] and work["ratio"] == pytest.approx(1.6)


def test_a_resumed_run_keeps_its_recorded_choice(blobs, tmp_path, monkeypatch) -> None:
    """Interrupted in its final run, the run continues with the choice it recorded (under another
    budget too), scoring no candidate again; from another configuration it is refused."""
    from labeldp.runs.context import RunContext

    config, out = _config(method="lp-1st"), tmp_path / "run"
    train = RunContext.train

    def stop_the_final_run(self, *args, **kwargs):
        if type(self) is RunContext:
            raise KeyboardInterrupt
        return train(self, *args, **kwargs)

    monkeypatch.setattr(RunContext, "train", stop_the_final_run)
    with pytest.raises(KeyboardInterrupt):
        auto_tuned_run(config, out, progress=False, dataset=blobs)
    recorded = json.loads((out / AUTO_TUNE_FILE).read_text())
    monkeypatch.setattr(RunContext, "train", train)

    def never(*args, **kwargs):
        raise AssertionError("a candidate scored again")

    monkeypatch.setattr(auto_tune, "score_candidates", never)
    summary = auto_tuned_run(config, out, budget=3.0, progress=False, dataset=blobs)
    assert summary["auto_tune"]["chosen"] == recorded["chosen"] and summary["auto_tune"]["budget"] == 2.0
    assert RunDirectory(out).read_config()["train"]["lr"] == recorded["chosen_options"]["lr"]
    assert _tags(out) == ["stage1"]
    with pytest.raises(RunDirectoryError, match="differs in: epsilon"):
        auto_tuned_run(_config(method="lp-1st", epsilon=1.0), out, progress=False, dataset=blobs)


def test_a_run_started_without_tuning_continues_as_it_was(blobs, tmp_path, capsys) -> None:
    config, out = _config(method="lp-1st"), tmp_path / "run"
    plain = train_run(config, out, progress=False, dataset=blobs)
    assert auto_tuned_run(config, out, progress=True, dataset=blobs) == plain
    assert "started without tuning" in capsys.readouterr().out and not (out / AUTO_TUNE_FILE).exists()


def test_train_run_tunes_when_its_tuning_asks(blobs, tmp_path) -> None:
    """``train_run`` given a tuning of a budget is the auto-tuned run (the options given named as such); of
    budget 0, a plain run."""
    from labeldp.config.tuning import AutoTuneConfig

    config = _config(method="lp-1st")
    tuned = train_run(config, tmp_path / "tuned", progress=False, dataset=blobs, tuning=AutoTuneConfig(2.0))
    assert tuned == auto_tuned_run(config, tmp_path / "tuned", progress=False, dataset=blobs)
    assert tuned["auto_tune"]["budget"] == 2.0 and (tmp_path / "tuned" / AUTO_TUNE_FILE).exists()
    plain = train_run(config, tmp_path / "plain", progress=False, dataset=blobs, tuning=AutoTuneConfig(0.0))
    assert "auto_tune" not in plain and not (tmp_path / "plain" / AUTO_TUNE_FILE).exists()
