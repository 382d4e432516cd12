"""A run tuned on its own release (experiments/auto_tune.py): the ledger of one run, nothing chosen by a
true label, off means train_run, the fallback where the release says nothing about the options, the
plan within the budget, and a resumed run that keeps its recorded choice."""

from __future__ import annotations

import dataclasses
import json
import re

import numpy as np
import pytest

from labeldp.boundary import unseal
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.experiments import auto_tune, extra_candidates
from labeldp.experiments.auto_tune import AUTO_TUNE_FILE, auto_tuned_run, plan_candidates
from labeldp.experiments.candidates import candidate_config, candidate_key
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


def _scored_by(accuracy, scored: list[float], stop_at: float | None = None):
    """A stand-in for score_candidates: each candidate's held-out terms, nested so that their means are
    ``accuracy(lr)`` and paired differences clear; raises KeyboardInterrupt on the rate ``stop_at``."""
    from labeldp.experiments.one_release import candidate_result

    def score(options, candidates, folder, data, device, releases, held_out, *rest):
        results = []
        for option in options:
            if option["lr"] == stop_at:
                raise KeyboardInterrupt
            scored.append(option["lr"])
            terms = (np.arange(held_out.size) < round(accuracy(option["lr"]) * held_out.size)).astype(float)
            results.append(candidate_result(option, terms, 0.0, {}, terms))
        return results

    return score


def _peak(at: float):
    return lambda lr: max(0.0, 0.6 - 0.1 * abs(np.log2(lr / at)))


@pytest.mark.parametrize(
    "accuracy, extended, kept, base",
    [
        (_peak(0.16), ["lr=0.16", "lr=0.32"], 1, False),  # beyond the largest (0.08): 0.16 wins, 0.32 does not
        (lambda lr: 0.1 + lr, ["lr=0.16", "lr=0.32", "lr=0.64"], 3, False),  # the largest keeps winning: 8 in all
        (_peak(0.001), ["lr=0.0025", "lr=0.00125", "lr=0.000625"], 2, False),  # beyond the smallest (0.005)
        (_peak(0.03), [], 0, True),  # inside the grid, 0.04 ahead of the base 0.02 by less than the noise
    ],
)
def test_a_choice_on_an_edge_extends_the_grid_within_the_budget(
    blobs, tmp_path, monkeypatch, accuracy, extended, kept, base
) -> None:
    """LP-2ST (5 planned candidates of 0.23 run; the budget of 2 pays for 8): where the best is an edge the
    grid goes on past it, one factor of 2 at a time, recorded; the run trains the best at the run's epsilon,
    on one run's ledger, or the base where the best is not clearly ahead of it."""
    scored: list[float] = []
    monkeypatch.setattr(auto_tune, "score_candidates", _scored_by(accuracy, scored))
    summary = auto_tuned_run(_config(), tmp_path / "run", progress=False, dataset=blobs)
    record = json.loads((tmp_path / "run" / AUTO_TUNE_FILE).read_text())
    assert record["candidates"] == ["lr=0.02", "lr=0.04", "lr=0.01", "lr=0.08", "lr=0.005"]
    assert record["work"]["most_candidates"] == 8 and record["tried_ratio"] <= 2.0
    assert [step["candidate"] for step in record.get("extended", [])] == extended
    assert [step["kept"] for step in record.get("extended", [])] == [n < kept for n in range(len(extended))]
    assert len(scored) == len(set(scored)) == 5 + len(extended)  # each candidate trained once
    best = 0.02 if base else max(scored, key=accuracy)
    assert ("indistinct" in record) == base
    assert record["chosen_options"] == {"lr": best} and summary["auto_tune"]["chosen"] == f"lr={best:g}"
    assert RunDirectory(tmp_path / "run").read_config()["train"]["lr"] == best
    assert _tags(tmp_path / "run") == ["stage1", "stage2"] and summary["epsilon"] == pytest.approx(2.0)


def test_an_edge_within_the_noise_is_not_extended() -> None:
    """The largest rate best by less than the standard error of its paired difference from the next one in:
    no step past it; by more, a step of twice its rate; none once ``most`` candidates are tried."""
    from labeldp.experiments.auto_tune import beyond_the_edge

    options = [{"lr": 0.1}, {"lr": 0.2}]
    inner = np.tile([1.0, 0.0], 50)
    close = np.concatenate([1 - inner[:-2], [1.0, 1.0]])  # differs on every example, ahead by 2 of 100
    clear = np.concatenate([inner[:-20], np.ones(20)])  # ahead by 10 of 100, on 20 examples
    scored = lambda terms: [{"estimated_clean_accuracy": t.mean(), "terms": t} for t in (inner, terms)]  # noqa: E731
    assert beyond_the_edge(options, scored(close), most=8) is None
    one = inner.copy()
    one[1] = 1.0  # ahead on one example only: by exactly its standard error
    assert beyond_the_edge(options, scored(one), most=8) is None
    step = beyond_the_edge(options, scored(clear), most=8)
    assert step is not None and step["options"] == {"lr": 0.4} and step["beyond"] == "largest"
    assert step["ahead"] == pytest.approx(0.1) and step["ahead"] > step["ahead_error"]
    assert beyond_the_edge(options, scored(clear), most=2) is None


def test_a_step_past_the_edge_is_chosen_only_where_clearly_ahead() -> None:
    """Steps past lr=0.2: the first clearly ahead of it is kept, the second, ahead of the first by a noise's
    width, is not: the choice is among the grid and the first step."""
    from labeldp.experiments.auto_tune import kept_steps

    edge = np.tile([1.0, 0.0], 50)
    first = (np.arange(100) < 70).astype(float)  # ahead by 20 of 100 (+- 7)
    second = (np.arange(100) >= 28).astype(float)  # ahead of the first by 2 of 100 (+- 8)
    results = [{"key": k, "terms": t} for k, t in (("lr=0.2", edge), ("lr=0.4", first), ("lr=0.8", second))]
    steps = [{"candidate": "lr=0.4", "after": "lr=0.2"}, {"candidate": "lr=0.8", "after": "lr=0.4"}]
    assert second.mean() > first.mean() and kept_steps(results, steps) == 1
    assert kept_steps(results[:2], steps[:1]) == 1 and kept_steps(results[:1], []) == 0


def test_a_run_interrupted_past_the_edge_resumes_the_same_steps(blobs, tmp_path, monkeypatch) -> None:
    """Interrupted while a candidate past the edge trains, the run resumes with the steps it recorded (no
    second release) and reaches the choice an uninterrupted run makes; a finished run keeps it."""
    scored: list[float] = []
    monkeypatch.setattr(auto_tune, "score_candidates", _scored_by(_peak(0.16), scored, stop_at=0.32))
    with pytest.raises(KeyboardInterrupt):
        auto_tuned_run(_config(), tmp_path / "run", progress=False, dataset=blobs)
    record = json.loads((tmp_path / "run" / AUTO_TUNE_FILE).read_text())
    assert [step["candidate"] for step in record["extended"]] == ["lr=0.16", "lr=0.32"] and "chosen" not in record
    monkeypatch.setattr(auto_tune, "score_candidates", _scored_by(_peak(0.16), scored))
    summary = auto_tuned_run(_config(), tmp_path / "run", progress=False, dataset=blobs)
    assert [step["candidate"] for step in summary["auto_tune"]["extended"]] == ["lr=0.16", "lr=0.32"]
    assert summary["auto_tune"]["chosen"] == "lr=0.16" and _tags(tmp_path / "run") == ["stage1", "stage2"]

    def never(*args, **kwargs):
        raise AssertionError("a candidate scored again")

    monkeypatch.setattr(auto_tune, "score_candidates", never)
    assert (
        auto_tuned_run(_config(), tmp_path / "run", progress=False, dataset=blobs)["auto_tune"] == summary["auto_tune"]
    )


def _images(augmentation: str = "translate"):
    from labeldp.data import LabeledDataset

    rng = np.random.default_rng(0)
    centers = rng.normal(0, 2, size=(4, 1, 8, 8))
    y_train, y_test = rng.integers(0, 4, 300), rng.integers(0, 4, 100)
    x_train = (centers[y_train] + rng.normal(size=(300, 1, 8, 8))).astype(np.float32)
    x_test = (centers[y_test] + rng.normal(size=(100, 1, 8, 8))).astype(np.float32)
    return LabeledDataset("images", x_train, y_train, x_test, y_test, num_classes=4, augmentation=augmentation)


@pytest.mark.parametrize("option, entry, words", [("flip", "mirror", "mirrored"), ("cutout", "cutout", "cut-out")])
@pytest.mark.parametrize("bonus, kept", [(0.1, True), (-0.1, False), (0.0, False)])
def test_on_images_the_choice_mirrored_then_cut_out_are_candidates_each_kept_only_where_clearly_ahead(
    tmp_path, monkeypatch, option, entry, words, bonus, kept
) -> None:
    scored: list[float] = []
    score = _scored_by(lambda lr: _peak(0.02)(lr), scored)

    def with_bonus(options, *args):
        results = score([{"lr": o["lr"]} for o in options], *args)
        for tried, result in zip(options, results):
            result.update(key=candidate_key(tried), options=tried)
            if tried.get(option):  # nested terms: the augmented candidate ahead (or behind) on clear examples
                terms = np.asarray(result["terms"])
                moved = round(abs(bonus) * terms.size)
                terms[np.flatnonzero(terms == (0 if bonus > 0 else 1))[:moved]] = 1 if bonus > 0 else 0
                result.update(terms=terms.tolist(), estimated_clean_accuracy=terms.mean())
        return results

    for module in (auto_tune, extra_candidates):  # the grid, and the candidates after it
        monkeypatch.setattr(module, "score_candidates", with_bonus)
    summary = auto_tuned_run(_config(), tmp_path / "run", progress=False, dataset=_images())
    record = json.loads((tmp_path / "run" / AUTO_TUNE_FILE).read_text())
    assert record["mirror"]["candidate"] == "lr=0.02,flip=True"
    flipped = option == "flip" and kept
    assert record["cutout"]["candidate"] == ("lr=0.02,flip=True,cutout=True" if flipped else "lr=0.02,cutout=True")
    assert record[entry]["kept"] == kept and not record["cutout" if option == "flip" else "mirror"]["kept"]
    assert record["chosen_options"] == ({"lr": 0.02, option: True} if kept else {"lr": 0.02})
    assert RunDirectory(tmp_path / "run").read_config()["train"][option] == kept
    assert (f"{words} images ahead" if kept else f"{words} images not clearly ahead") in auto_tune.describe_choice(
        summary["auto_tune"]
    )


def test_nothing_is_mirrored_but_images_without_a_flip_and_cut_out_but_augmented_images() -> None:
    from labeldp.experiments.extra_candidates import augmented

    base, chosen = _config().resolved(), {"lr": 0.02}
    assert augmented(base, _images(), chosen, "flip") == {"lr": 0.02, "flip": True}
    assert augmented(base, _images("crop-flip"), chosen, "flip") is None
    assert augmented(base, _images("crop-flip"), chosen, "cutout") == {"lr": 0.02, "cutout": True}
    assert augmented(base, _images("none"), chosen, "flip") == {"lr": 0.02, "flip": True}
    assert augmented(base, _images(), {"lr": 0.02, "cutout": True}, "cutout") is None
    no_augment = _config(train=TrainConfig(epochs=2, batch_size=64, lr=0.02, augment=False)).resolved()
    assert augmented(no_augment, _images(), chosen, "flip") is None
    assert augmented(no_augment, _images(), chosen, "cutout") is None


def test_blobs_are_not_images(blobs) -> None:
    from labeldp.experiments.extra_candidates import augmented

    assert augmented(_config().resolved(), blobs, {"lr": 0.02}, "flip") is None
    assert augmented(_config().resolved(), blobs, {"lr": 0.02}, "cutout") is None


def test_the_auto_tune_prints_no_estimate_outside_its_range_over_200_fresh_releases() -> None:
    """A model right on nearly every held-out example, its labels released afresh 200 times at epsilon 0.3:
    the unbiased estimates leave [0, 1] (it printed 109.14 %); every estimate and interval printed stays in
    range, and where the candidates cannot be told apart the base is kept and the console says so."""
    from labeldp.experiments.auto_tune import describe_choice, settled
    from labeldp.experiments.one_release import candidate_result, public_results
    from labeldp.mechanisms import randomized_response, randomized_response_likelihood
    from labeldp.released_metrics import accuracy_terms, channel_weights

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 300)
    good = np.eye(2)[labels] * 0.98 + 0.01
    flipped = good.copy()
    flipped[:3] = flipped[:3, ::-1]  # three examples apart: within the noise
    outside, indistinct = 0, 0
    for draw in range(200):
        noisy = randomized_response(labels, 2, 0.3, rng=draw)
        weights = channel_weights(noisy, randomized_response_likelihood(noisy, 2, 0.3))
        terms = [accuracy_terms(p, weights) for p in (flipped, good)]
        outside += max(t.mean() for t in terms) > 1
        results = [candidate_result({"lr": lr}, t, 0.0, {}, t) for lr, t in zip((0.1, 0.2), terms)]
        record = {"held_out": 300, "seconds": 0.0}
        best = settled(results, record)
        record.update(results=public_results(results), chosen=results[best]["key"])
        text = describe_choice(record)
        printed = [float(value) for value in re.findall(r"(-?[0-9.]+)%", text)]
        assert printed and all(0.0 <= value <= 100.0 for value in printed), text
        if "indistinct" in record:
            indistinct += 1
            assert best == 0 and "could not be told apart" in text and "kept the base" in text
    assert outside > 20 and indistinct > 50


def test_on_a_table_of_yours_the_defaults_fit_trees_where_the_release_favours_them(tmp_path) -> None:
    """``labeldp train --dataset csv`` with the defaults: one stage (lp-1st), and a label that steps with its
    feature five times, which trees fit and a network of ten epochs does not: the trees, tried after the learning
    rates, are clearly ahead in the log-likelihood of the held-out released labels and the run fits them."""
    import pandas as pd

    from labeldp.cli import main

    rng = np.random.default_rng(0)
    x = rng.uniform(size=(3000, 3))
    pd.DataFrame({"a": x[:, 0], "b": x[:, 1], "c": x[:, 2], "y": (x[:, 0] * 5).astype(int) % 2}).to_csv(
        tmp_path / "t.csv", index=False
    )
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes"]
    argv += ["0", "1", "--epsilon", "3", "--insecure-noise-seed", "5", "--threads", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "run")]) == 0
    record = json.loads((tmp_path / "run" / AUTO_TUNE_FILE).read_text())
    config = RunDirectory(tmp_path / "run").read_config()
    assert config["method"] == "lp-1st" and record["trees"]["candidate"] == "model=gbdt"
    assert record["trees"]["kept"] and record["chosen_options"] == {"model": "gbdt"} and config["model"] == "gbdt"
    assert "gradient-boosted trees ahead of lr=" in auto_tune.describe_choice(record)
    assert (
        json.loads((tmp_path / "run" / "summary.json").read_text())["network_source"] == "chosen on the run's release"
    )


@pytest.mark.parametrize("lead, kept", [(0.02, True), (-0.02, False), (0.0, False)])
def test_the_trees_replace_the_network_only_where_clearly_ahead_in_log_likelihood(
    blobs, tmp_path, monkeypatch, lead, kept
) -> None:
    """Whatever the accuracy terms say, the trees are kept only where their held-out released log-likelihood
    leads the chosen network's by more than the standard error of the paired difference."""
    scored: list[float] = []
    score = _scored_by(_peak(0.05), scored)

    def with_trees(options, *args):
        results = score([{"lr": o.get("lr", 0.05)} for o in options], *args)
        for option, result in zip(options, results):
            terms = np.linspace(-0.7, -0.5, len(result["terms"]))
            if option.get("model"):  # ahead (or behind) on a few examples; accuracy terms far ahead either way
                terms[: len(terms) // 4] += 4 * lead
                result.update(key="model=gbdt", options=option, terms=[1.0] * len(terms))
            result["log_likelihood_terms"] = terms.tolist()
        return results

    for module in (auto_tune, extra_candidates):  # the grid, and the candidates after it
        monkeypatch.setattr(module, "score_candidates", with_trees)
    monkeypatch.setattr(auto_tune, "trees", lambda *args: {"model": "gbdt"})
    config = RunConfig(method="lp-1st", epsilon=2.0, insecure_noise_seed=5)  # the trees train as they are
    summary = auto_tuned_run(config, tmp_path / "run", progress=False, dataset=blobs)
    record = json.loads((tmp_path / "run" / AUTO_TUNE_FILE).read_text())
    assert record["trees"]["kept"] == kept and record["trees"]["versus"] == "lr=0.05"
    assert record["chosen_options"] == ({"model": "gbdt"} if kept else {"lr": 0.05})
    assert ("trees ahead of" if kept else "trees not clearly ahead") in auto_tune.describe_choice(summary["auto_tune"])


def test_trees_are_tried_only_on_a_table_of_yours_at_the_rule_s_network_and_default_training(blobs) -> None:
    from labeldp.experiments.extra_candidates import trees

    table = RunConfig(dataset="csv", table="t.csv", label_column="y", epsilon=1.0).resolved()
    assert table.method == "lp-1st" and trees(table, blobs, "cpu") == {"model": "gbdt"}
    assert trees(dataclasses.replace(table, model="mlp"), blobs, "cpu") is None  # a network named: kept
    assert trees(dataclasses.replace(table, train=TrainConfig(epochs=3)), blobs, "cpu") is None
    assert trees(dataclasses.replace(table, method="dp-sgd", delta=1e-5).resolved(), blobs, "cpu") is None
    assert trees(dataclasses.replace(table, method="lp-2st", stages=None).resolved(), blobs, "cpu") is None
    assert trees(_config().resolved(), blobs, "cpu") is None  # not a table


def test_trees_that_cannot_be_fitted_on_the_release_are_skipped_and_the_network_trains(blobs, tmp_path, monkeypatch):
    """A fit that fails after the release (one class released among the rows the trees fit) is recorded and
    the network's choice kept: the run, which has spent, finishes."""
    scored: list[float] = []
    score = _scored_by(_peak(0.05), scored)

    def failing_trees(options, *args):
        if options[0].get("model"):
            raise ConfigError("network 'gbdt' needs released labels of two classes or more to fit")
        return score(options, *args)

    for module in (auto_tune, extra_candidates):  # the grid, and the candidates after it
        monkeypatch.setattr(module, "score_candidates", failing_trees)
    monkeypatch.setattr(auto_tune, "trees", lambda *args: {"model": "gbdt"})
    config = RunConfig(method="lp-1st", epsilon=2.0, insecure_noise_seed=5)
    summary = auto_tuned_run(config, tmp_path / "run", progress=False, dataset=blobs)
    record = summary["auto_tune"]
    assert record["trees"]["kept"] is False and "two classes" in record["trees"]["skipped"]
    assert record["chosen_options"] == {"lr": 0.05} and "gradient-boosted trees not tried (network" in (
        auto_tune.describe_choice(record)
    )


def test_a_record_written_before_the_extras_named_what_they_beat_is_described() -> None:
    record = {
        "chosen": "lr=0.05,flip=True",
        "held_out": 100,
        "seconds": 1.0,
        "results": [
            {"key": "lr=0.05", "estimated_clean_accuracy": 0.5, "standard_error": 0.1, "difference": -0.02,
             "difference_error": 0.01},
            {"key": "lr=0.05,flip=True", "estimated_clean_accuracy": 0.52, "standard_error": 0.1},
        ],
        "mirror": {"options": {}, "candidate": "lr=0.05,flip=True", "ahead": 0.02, "ahead_error": 0.01, "kept": True},
    }  # fmt: skip
    assert "mirrored images ahead of the choice: +2.00 +- 1.00 points" in auto_tune.describe_choice(record)
