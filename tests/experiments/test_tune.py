"""Tuning on released labels (experiments/release_tuning.py): one release per tune, no true label read after it,
refusals before any spend, an interrupted tune read back, and LP-2ST and LP-MST tuned on their
first or second release as a run of the chosen options would draw them."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labeldp.boundary import unseal
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.experiments import release_tuning as tuning
from labeldp.experiments.release_tuning import candidate_config, tune
from labeldp.runs import RunConfig, RunDirectory, config_dataset, train_run
from labeldp.training import TrainConfig
from tests.helpers import poison_in_place


def _config(**fields) -> RunConfig:
    return RunConfig(
        **{
            "method": "lp-1st",
            "epsilon": 2.0,
            "insecure_noise_seed": 5,
            "train": TrainConfig(epochs=2, batch_size=64, lr=0.02),
            **fields,
        }
    )


GRID = {"lr": ["0.005", "0.05"], "mixup": [0.0]}


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_tune_spends_one_release_and_reads_no_true_label_after_it(tmp_path, monkeypatch) -> None:
    """The tune folder's ledger is one run's; poisoning the true training labels right after the
    release changes nothing (the candidates' scores, the choice, the final model); the best candidate
    is the final run; the candidates' folders hold no release and no ledger; repeating the tune reads
    it back."""
    config = _config()
    data = config_dataset(config.resolved())
    clean = tune(config, GRID, tmp_path / "clean", progress=False, dataset=data)

    release_once = tuning.release_once

    def release_then_poison(*args, **kwargs):
        releases = release_once(*args, **kwargs)
        poison_in_place(data.y_train)  # in place: every holder sees it
        return releases

    monkeypatch.setattr(tuning, "release_once", release_then_poison)
    original = unseal(data.y_train).copy()
    poisoned = tune(config, GRID, tmp_path / "poisoned", progress=False, dataset=data)
    assert np.mean(unseal(data.y_train) != original) > 0.5
    for a, b in zip(clean["results"], poisoned["results"]):
        assert a["estimated_clean_accuracy"] == b["estimated_clean_accuracy"]
        assert a["standard_error"] == b["standard_error"]
    assert clean["final"]["test_accuracy"] == poisoned["final"]["test_accuracy"]

    single = train_run(config, tmp_path / "single", progress=False, dataset=config_dataset(config.resolved()))
    folder = RunDirectory(tmp_path / "clean")
    ledger = folder.read_ledger()
    assert [entry.tag for entry in ledger.entries] == ["stage1"]
    assert clean["ledger_epsilon"] == single["epsilon"] == pytest.approx(2.0)
    best = max(clean["results"], key=lambda r: r["estimated_clean_accuracy"])
    assert clean["chosen"] == best["key"] == "lr=0.05,mixup_alpha=0.0"
    assert best["difference"] == 0 and all(
        r["difference"] <= 0 and r["difference_error"] >= 0 for r in clean["results"]
    )
    assert folder.read_config()["train"]["lr"] == 0.05
    assert clean["held_out"] == round(0.2 * len(data.y_train)) and all(
        r["held_out"] == clean["held_out"] for r in clean["results"]
    )
    for result in clean["results"]:
        candidate = tmp_path / "clean" / "candidates" / result["key"]
        assert (candidate / "result.json").exists()
        assert not (candidate / "ledger.json").exists() and not (candidate / "noisy_labels").exists()
        rows = [json.loads(line) for line in (candidate / "metrics.jsonl").read_text().splitlines()]
        assert all(row["test_accuracy"] is None for row in rows)  # the test set is not looked at
    table = (tmp_path / "clean" / "tune.csv").read_text().splitlines()
    assert table[0].startswith("key,estimated_clean_accuracy,standard_error") and len(table) == 3
    assert tune(config, GRID, tmp_path / "clean", progress=False, dataset=data) == clean
    assert RunDirectory(tmp_path / "clean").read_ledger().epsilon(0.0) == pytest.approx(2.0)


@pytest.mark.parametrize(
    "fields, grid, message",
    [
        (
            {"method": "lp-2st"},
            {"lr": ["0.01", "0.05"], "reuse_labels": ["true", "false"]},
            "reuse_labels act only after every release",
        ),
        ({"method": "lp-2st"}, {"temperature": ["1", "2"]}, r"later releases \(stage2\) depend on temperature"),
        (
            {"method": "lp-mst"},
            {"lr": ["0.01", "0.05"], "warm_start": ["true", "false"]},
            r"later releases \(stage2, stage3\) depend on warm_start",
        ),
        ({"method": "lp-2st"}, {"stages": ["0.3:0.7", "0.5:0.5"]}, "release 'stage1' depends on stages"),
        ({"method": "lp-2st", "stages": (0.005, 0.995)}, {"lr": ["0.01", "0.05"]}, "leaves fewer than two to score on"),
        ({}, {"epsilon": ["1", "2"]}, "release 'stage1' depends on epsilon"),
        ({"method": "alibi"}, {"seed": ["0", "1"]}, "release 'stage1' depends on seed"),
        ({"method": "dp-sgd"}, {"epochs": ["1", "2"]}, "must share epochs and batch size"),
        ({"method": "pate"}, {"epochs": ["1", "2"]}, "held-out training examples have no released label"),
        ({}, {"lr": ["0.01"]}, "at least two candidates"),
        ({}, {"momentum": ["0.5", "2"]}, "momentum must lie in"),
    ],
)
def test_tune_refuses_before_any_spend(tmp_path, fields, grid, message) -> None:
    base = dict(method="lp-1st", epsilon=2.0, insecure_noise_seed=5, train=TrainConfig(epochs=1))
    with pytest.raises(ConfigError, match=message):
        tune(RunConfig(**{**base, **fields}), grid, tmp_path / "tune", progress=False)
    assert not (tmp_path / "tune").exists()


@pytest.mark.parametrize(
    "field, values, shared",
    [("consensus", (False, True), ("stage1", "stage2")), ("loss", ("forward", "ce"), ("stage1",))],
)
def test_candidates_share_a_first_release_only_where_they_would_choose_the_same(field, values, shared) -> None:
    """At epsilon 1 with 10 classes --first-release auto takes vectors without consensus and with the forward
    loss, RR's labels otherwise: such candidates cannot share stage 1; with RR named they share it."""
    import dataclasses
    from types import SimpleNamespace

    from labeldp.experiments.candidates import check_tunable

    data = SimpleNamespace(num_classes=10, is_regression=False, input_shape=(1, 28, 28), categorical=())

    def candidates(**fields):
        base = RunConfig(method="lp-2st", epsilon=1.0, **fields).resolved()
        return base, [
            dataclasses.replace(base, options={**fields.get("options", {}), field: value}) for value in values
        ]

    with pytest.raises(ConfigError, match=r"depends on first_release \(--first-release auto takes vectors or labels"):
        check_tunable(*candidates(), data)
    assert check_tunable(*candidates(options={"first_release": "rr"}), data)[0] == shared


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_an_interrupted_tune_reads_its_release_and_candidates_back(tmp_path) -> None:
    """A tune stopped during its final run continues from the saved release (never drawn again: the
    ledger and the release file stay as they were) and the scored candidates (not trained again)."""
    import labeldp

    config, out = _config(), tmp_path / "tune"
    first = labeldp.tune(config, GRID, out, progress=False)
    release = (out / "noisy_labels" / "stage1.npz").read_bytes()
    ledger = (out / "ledger.json").read_text()
    metrics = {r["key"]: (out / "candidates" / r["key"] / "metrics.jsonl").read_text() for r in first["results"]}
    for name in ("tune.json", "summary.json", "model.pt"):
        (out / name).unlink()
    again = labeldp.tune(config, GRID, out, progress=False)
    assert (out / "noisy_labels" / "stage1.npz").read_bytes() == release
    assert (out / "ledger.json").read_text() == ledger
    assert {k: (out / "candidates" / k / "metrics.jsonl").read_text() for k in metrics} == metrics
    assert again["results"] == first["results"] and again["chosen"] == first["chosen"]
    with pytest.raises(RunDirectoryError, match="finished tune of other candidates"):
        labeldp.tune(config, {"lr": ["0.01", "0.02"]}, out, progress=False)


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_lp2st_tunes_what_acts_after_its_second_release(tmp_path) -> None:
    """LP-2ST's second release needs the first stage's model: the tune trains it once, as the run
    would, draws both releases, then tries what acts only after them (reusing stage 1's labels,
    warm starting); the ledger holds the two releases at the run's epsilon."""
    config = _config(method="lp-2st")
    outcome = tune(config, {"reuse_labels": ["true", "false"], "warm_start": ["false"]}, tmp_path / "t", progress=False)
    ledger = RunDirectory(tmp_path / "t").read_ledger()
    assert [entry.tag for entry in ledger.entries] == ["stage1", "stage2"]
    assert outcome["ledger_epsilon"] == pytest.approx(2.0)
    assert len(outcome["results"]) == 2 and outcome["final"]["test_accuracy"] > 0.3
    train_run(config, tmp_path / "single", progress=False)  # the release a run of the base configuration draws
    for stage in ("stage1", "stage2"):
        with (
            np.load(tmp_path / "t" / "noisy_labels" / f"{stage}.npz") as tuned,
            np.load(tmp_path / "single" / "noisy_labels" / f"{stage}.npz") as single,
        ):
            assert np.array_equal(tuned["labels"], single["labels"]) and np.array_equal(tuned["k"], single["k"])


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_lp2st_chooses_its_training_options_on_the_first_release(tmp_path, monkeypatch) -> None:
    """LP-2ST's second release depends on how its first stage trains: each candidate is scored by its
    first-stage model on held-out examples of stage 1's release, chosen without any true label (they
    are poisoned right after that release), and the second release is drawn once, by the final run
    under the chosen options, exactly as a run of them would draw it; the ledger is one run's."""
    config = _config(method="lp-2st")
    data = config_dataset(config.resolved())
    grid = {"lr": ["0.005", "0.05"]}
    clean = tune(config, grid, tmp_path / "clean", progress=False, dataset=data)

    release_once = tuning.release_once

    def release_then_poison(*args, **kwargs):
        releases = release_once(*args, **kwargs)
        poison_in_place(data.y_train)
        return releases

    monkeypatch.setattr(tuning, "release_once", release_then_poison)
    original = unseal(data.y_train).copy()
    poisoned = tune(config, grid, tmp_path / "poisoned", progress=False, dataset=data)
    assert np.mean(unseal(data.y_train) != original) > 0.5
    assert [r["estimated_clean_accuracy"] for r in clean["results"]] == [
        r["estimated_clean_accuracy"] for r in poisoned["results"]
    ]
    assert clean["chosen"] == poisoned["chosen"] == "lr=0.05"
    data.y_train._root.values[:] = original

    stage1 = np.load(tmp_path / "clean" / "noisy_labels" / "stage1.npz")["members"]
    assert clean["scored_on"] == ["stage1"] and clean["releases"] == ["stage1", "stage2"]
    assert clean["held_out"] == round(0.2 * stage1.size)
    for result in clean["results"]:
        candidate = tmp_path / "clean" / "candidates" / result["key"]
        assert not (candidate / "ledger.json").exists() and not (candidate / "noisy_labels").exists()
        rows = [json.loads(line) for line in (candidate / "metrics.jsonl").read_text().splitlines()]
        assert {row["stage"] for row in rows} == {1}  # stopped before the second release

    chosen = candidate_config(config.resolved(), {"lr": 0.05})
    single = train_run(chosen, tmp_path / "single", progress=False, dataset=data)
    ledger = RunDirectory(tmp_path / "clean").read_ledger()
    assert [entry.tag for entry in ledger.entries] == ["stage1", "stage2"]
    assert clean["ledger_epsilon"] == single["epsilon"] == pytest.approx(2.0)
    for stage in ("stage1", "stage2"):
        with (
            np.load(tmp_path / "clean" / "noisy_labels" / f"{stage}.npz") as tuned,
            np.load(tmp_path / "single" / "noisy_labels" / f"{stage}.npz") as run,
        ):
            assert np.array_equal(tuned["labels"], run["labels"]) and np.array_equal(tuned["k"], run["k"])
    assert clean["final"]["test_accuracy"] == single["test_accuracy"]


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_first_stage_candidates_never_train_on_the_held_out_examples(tmp_path, monkeypatch) -> None:
    """LP-MST with a histogram prior, options chosen on the first stage: the shared releases are the
    histogram and stage 1; each candidate trains stage 1 on its members minus the held-out fifth (and
    on nothing else), is scored on stage 1's labels only, and the final run draws stages 2 and 3."""
    import labeldp.runs.context as context

    trained: list[np.ndarray] = []
    original = context.train_stage

    def recording(model, inputs, *args, **kwargs):
        trained.append(np.asarray(inputs).reshape(len(inputs), -1).copy())
        return original(model, inputs, *args, **kwargs)

    monkeypatch.setattr(context, "train_stage", recording)
    config = _config(method="lp-mst", prior="histogram", train=TrainConfig(epochs=1, batch_size=64, lr=0.02))
    outcome = tune(config, {"lr": ["0.01", "0.05"]}, tmp_path / "t", progress=False)
    folder = RunDirectory(tmp_path / "t")
    assert [entry.tag for entry in folder.read_ledger().entries] == ["prior", "stage1", "stage2", "stage3"]
    assert outcome["scored_on"] == ["stage1"] and outcome["ledger_epsilon"] == pytest.approx(2.0)
    assert len(trained) == 2 + 3  # one first stage per candidate, then the final run's three stages
    x = config_dataset(config.resolved()).x_train.reshape(-1, 64)
    members = np.load(tmp_path / "t" / "noisy_labels" / "stage1.npz")["members"]
    held_out = members[tuning.holdout_split(members.size, 0.2, 0)]
    rows = {row.tobytes() for row in x[held_out]}
    allowed = {row.tobytes() for row in x[np.setdiff1d(members, held_out)]}
    for inputs in trained[:2]:
        seen = {row.tobytes() for row in inputs}
        assert not seen & rows and seen == allowed


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_a_first_stage_tune_interrupted_in_its_final_run_continues(tmp_path, monkeypatch) -> None:
    """The final run drew stage 2 under the chosen options, then stopped: the tune run again reads
    both releases back (the ledger and the stage-2 file stay as they were) and finishes."""
    from labeldp.runs.context import RunContext

    config, grid, out = _config(method="lp-2st"), {"lr": ["0.005", "0.05"]}, tmp_path / "t"
    train = RunContext.train

    def stop_in_stage_two(self, model, stage, *args, **kwargs):
        if type(self) is RunContext and stage == 2:
            raise KeyboardInterrupt
        return train(self, model, stage, *args, **kwargs)

    monkeypatch.setattr(RunContext, "train", stop_in_stage_two)
    with pytest.raises(KeyboardInterrupt):
        tune(config, grid, out, progress=False)
    release, ledger = (out / "noisy_labels" / "stage2.npz").read_bytes(), (out / "ledger.json").read_text()
    monkeypatch.setattr(RunContext, "train", train)
    outcome = tune(config, grid, out, progress=False)
    assert (out / "noisy_labels" / "stage2.npz").read_bytes() == release
    assert (out / "ledger.json").read_text() == ledger
    assert outcome["chosen"] == "lr=0.05" and outcome["ledger_epsilon"] == pytest.approx(2.0)


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_a_method_catching_exception_is_still_tuned(tmp_path, register_for_test) -> None:
    """The tune stops a method by exceptions no ``except Exception`` catches: LP-2ST wrapped in a catch-all
    fallback (an untrained model) is tuned as LP-2ST is, its handler never reached."""
    import dataclasses

    from labeldp.config.method_registry import get_method

    caught = []
    lp2st = get_method("lp-2st")

    def guarded(context):
        try:
            return lp2st.run(context)
        except Exception as error:  # a method's own fallback
            caught.append(error)
            return context.new_model(1), {}

    register_for_test(dataclasses.replace(lp2st, name="guarded-lp-2st", run=guarded))
    grid = {"lr": ["0.005", "0.05"]}
    plain = tune(_config(method="lp-2st"), grid, tmp_path / "plain", progress=False)
    outcome = tune(_config(method="guarded-lp-2st"), grid, tmp_path / "guarded", progress=False)
    assert caught == []
    assert [r["estimated_clean_accuracy"] for r in outcome["results"]] == [
        r["estimated_clean_accuracy"] for r in plain["results"]
    ]
    assert outcome["chosen"] == plain["chosen"] and outcome["final"]["test_accuracy"] == plain["final"]["test_accuracy"]
