"""Tuning on released labels: the clean-accuracy estimates behind it, one release per tune, no true
label read after it, refusals before any spend."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from labeldp.boundary import PrivateLabels, Release, unseal
from labeldp.cli import main
from labeldp.data import LabeledDataset
from labeldp.dpsgd import selection
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.experiments import tune as tuning
from labeldp.experiments.held_out import HeldOutScorer, uninformative_message
from labeldp.experiments.tune import candidate_config, candidate_options, tune
from labeldp.mechanisms import (
    laplace_one_hot,
    laplace_one_hot_likelihood,
    prior_top_k,
    rr_with_prior,
    rr_with_prior_likelihood,
)
from labeldp.randomness import public_rng
from labeldp.released_metrics import clean_accuracy_terms
from labeldp.runs import RunConfig, RunDirectory, config_dataset, train_run
from labeldp.training import TrainConfig
from tests.helpers import poison_in_place

EPSILON = 1.0


def _rr_with_prior_case(outside: float, seed: int = 0):
    """Labels, priors whose top-k sets hold each label except for a fraction ``outside``, and predictions."""
    rng = np.random.default_rng(seed)
    n, k = 2000, 5
    true = rng.integers(0, k, n)
    other = (true + rng.integers(1, k, n)) % k
    far = (true + rng.integers(1, k, n)) % k  # a third label, outside the top two where it differs from other
    far = np.where(far == other, (other + 1) % k, far)
    far = np.where(far == true, (far + 1) % k, far)
    moved = rng.random(n) < outside  # the prior's two heavy labels miss the true one
    first = np.where(moved, far, true)
    priors = np.full((n, k), 0.1 / 3)
    priors[np.arange(n), first] = 0.45
    priors[np.arange(n), other] = 0.45
    u = rng.random(n)
    predictions = np.where(u < 0.6, true, np.where(u < 0.8, other, (true + other + 1) % k))
    return true, priors, predictions


def _mean_estimate(true, priors, predictions, releases=300):
    estimates = []
    for seed in range(releases):
        noisy, _ = rr_with_prior(true, priors, EPSILON, seed)
        terms = clean_accuracy_terms(predictions, noisy, rr_with_prior_likelihood(noisy, priors, EPSILON))
        estimates.append(terms.mean())
    return float(np.mean(estimates)), float(np.std(estimates) / math.sqrt(releases)), terms


def test_clean_accuracy_estimate_is_unbiased_for_rr_with_prior() -> None:
    """With every clean label in its top-k set, the per-example channel-corrected indicators average
    to the clean accuracy over many RR-with-prior releases, and their standard error is the spread's."""
    true, priors, predictions = _rr_with_prior_case(outside=0.0)
    k, member = prior_top_k(priors, EPSILON)
    assert np.all(k == 2) and member[np.arange(true.size), true].all()
    accuracy = float(np.mean(predictions == true))
    mean, spread, terms = _mean_estimate(true, priors, predictions)
    assert abs(mean - accuracy) < 4 * spread
    one_release_error = terms.std(ddof=1) / math.sqrt(terms.size)
    assert 0.5 < one_release_error / (spread * math.sqrt(300)) < 2


def test_clean_accuracy_estimate_outside_the_top_k_is_as_documented() -> None:
    """A clean label outside its top-k set releases the same thing whatever it is: such an example adds
    1/k (prediction inside the set) or 0 to the expectation, as clean_accuracy_terms says."""
    true, priors, predictions = _rr_with_prior_case(outside=0.3, seed=1)
    k, member = prior_top_k(priors, EPSILON)
    rows = np.arange(true.size)
    inside, predicted_inside = member[rows, true], member[rows, predictions]
    expected = np.mean(np.where(inside, predictions == true, predicted_inside / k))
    mean, spread, _ = _mean_estimate(true, priors, predictions)
    assert abs(mean - expected) < 4 * spread
    assert abs(mean - np.mean(predictions == true)) > 10 * spread  # not the clean accuracy: not identifiable


def test_alibi_scorer_is_unbiased() -> None:
    """ALIBI's held-out score, the noisy one-hot vector's entry at the prediction, averages to the clean
    accuracy."""
    rng = np.random.default_rng(2)
    n, k = 1000, 10
    true = rng.integers(0, k, n)
    predictions = np.where(rng.random(n) < 0.7, true, (true + 1) % k)
    held = np.arange(n)
    estimates = []
    for seed in range(200):
        noisy = laplace_one_hot(true, k, 2.0, seed)
        release = Release(
            held, None, "alibi", noisy.argmax(axis=1), laplace_one_hot_likelihood(noisy, 2.0), {"noisy_one_hot": noisy}
        )
        estimates.append(HeldOutScorer({"stage1": release}, held, n, k).terms(predictions).mean())
    assert abs(np.mean(estimates) - np.mean(predictions == true)) < 4 * np.std(estimates) / math.sqrt(200)


def test_the_scorer_counts_releases_that_do_not_depend_on_the_label() -> None:
    """RR-with-prior with k = 1 releases the prior's top class whatever the label: the scorer reports
    the share of such held-out examples (a tune warns above half), and plain RR has none."""
    rng = np.random.default_rng(0)
    n, k = 400, 10
    true = rng.integers(0, k, n)
    priors = np.full((n, k), 0.01 / (k - 1))
    priors[np.arange(n), true] = 0.99
    priors[:100] = 1.0 / k  # a quarter with a flat prior: randomized response over every class
    noisy, _ = rr_with_prior(true, priors, 0.5, 1)
    release = Release(np.arange(n), None, "rr-with-prior", noisy, rr_with_prior_likelihood(noisy, priors, 0.5))
    scorer = HeldOutScorer({"stage1": release}, np.arange(n), n, k)
    assert scorer.uninformative == pytest.approx(0.75)
    assert "75% of the held-out examples were released with k = 1" in uninformative_message(0.75)


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

    release_once = tuning._release_once

    def release_then_poison(*args, **kwargs):
        releases = release_once(*args, **kwargs)
        poison_in_place(data.y_train)  # in place: every holder sees it
        return releases

    monkeypatch.setattr(tuning, "_release_once", release_then_poison)
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


def test_random_search_draws_distinct_combinations_from_the_seed() -> None:
    grid = {"lr": ["0.01", "0.02", "0.05"], "epochs": ["1", "2"]}
    picked = candidate_options(grid, trials=3, seed=4)
    assert len(picked) == 3 and len({tuple(c.items()) for c in picked}) == 3
    assert picked == candidate_options(grid, trials=3, seed=4)
    assert len(candidate_options(grid)) == 6


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_tune_command_with_alibi_and_a_yaml_grid(tmp_path, capsys) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text("lr: [0.01, 0.05]\nweight-decay: [0.001]\n")
    code = main(
        [
            "tune",
            "--method",
            "alibi",
            "--epsilon",
            "2",
            "--epochs",
            "2",
            "--insecure-noise-seed",
            "1",
            "--grid-file",
            str(grid),
            "--threads",
            "1",
            "--quiet",
            "--out",
            str(tmp_path / "tuned"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "  chosen" in out and "epsilon 2 (one run's releases: stage1)" in out
    saved = json.loads((tmp_path / "tuned" / "tune.json").read_text())
    assert [r["key"] for r in saved["results"]] == ["lr=0.01,weight_decay=0.001", "lr=0.05,weight_decay=0.001"]
    assert RunDirectory(tmp_path / "tuned").read_ledger().epsilon(0.0) == pytest.approx(2.0)


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


def test_the_number_of_selection_trials_has_the_accounted_mean() -> None:
    rng = np.random.default_rng(0)
    for shape in (1.0, 0.5, math.inf):
        draws = np.array([selection.draw_trials(rng, 3.0, shape) for _ in range(3000)])
        assert abs(draws.mean() - 3.0) < 5 * draws.std() / math.sqrt(draws.size)
        assert draws.min() >= (0 if math.isinf(shape) else 1)


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_dpsgd_is_tuned_by_private_selection_with_one_accounted_event(tmp_path) -> None:
    """DP-SGD's tune records one RepeatAndSelectDpEvent, calibrated so that the ledger's epsilon
    (dp_accounting's RDP accountant) meets the budget; only the chosen trial is kept; a finished tune is
    read back, and a damaged one is not selected again in its folder."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    from labeldp.accounting import DPSGD_RELATION

    config = RunConfig(
        method="dp-sgd", epsilon=4.0, insecure_noise_seed=2, train=TrainConfig(epochs=1, batch_size=128, lr=0.5)
    )
    grid = {"lr": ["0.5", "1"], "max_grad_norm": ["1"]}
    outcome = tune(config, grid, tmp_path / "sel", progress=False, selection={"mean": 2.0})
    ledger = RunDirectory(tmp_path / "sel").read_ledger()
    (entry,) = ledger.entries
    assert entry.tag == "selection" and isinstance(entry.event, dp_event.RepeatAndSelectDpEvent)
    assert entry.event.mean == 2.0 and entry.event.shape == 1.0 and entry.members.all()
    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=DPSGD_RELATION)
    expected = accountant.compose(entry.event).get_epsilon(1e-5)
    assert ledger.epsilon(1e-5) == pytest.approx(expected) and expected <= 4.0 + 1e-9 and expected > 3.5
    assert outcome["ledger_epsilon"] == pytest.approx(expected, abs=1e-6)
    assert outcome["chosen"] in ("lr=0.5,max_grad_norm=1.0", "lr=1.0,max_grad_norm=1.0")
    saved = RunDirectory(tmp_path / "sel").read_config()
    assert saved["train"]["lr"] == outcome["chosen_options"]["lr"] and saved["dpsgd"]["noise_multiplier"] is None
    assert not (tmp_path / "sel" / "candidates").exists() and not (tmp_path / "sel" / "private").exists()
    assert tune(config, grid, tmp_path / "sel", progress=False, selection={"mean": 2.0}) == outcome
    assert outcome["final"]["seconds"] is None  # the trials' duration would tell their number
    assert not selection.scratch_folder(tmp_path / "sel").exists()
    (tmp_path / "sel" / "tune.json").unlink()
    (tmp_path / "sel" / "summary.json").unlink()
    with pytest.raises(RunDirectoryError, match="is in the way"):
        tune(config, grid, tmp_path / "sel", progress=False, selection={"mean": 2.0})


DPSGD_CONFIG = RunConfig(
    method="dp-sgd", epsilon=4.0, insecure_noise_seed=2, train=TrainConfig(epochs=1, batch_size=128, lr=0.5)
)


def test_holdout_coins_depend_on_the_position_alone() -> None:
    """The first n uniforms of numpy's Generator do not depend on how many are drawn, so each example's
    held-out coin depends on its position only: the coins of n examples are those of n + k cut to n."""
    for n in (1, 7, 64, 1000, 4097):
        uniforms = public_rng(3, "tune-holdout").random(n)
        for more in (1, 2, 1000):
            assert np.array_equal(public_rng(3, "tune-holdout").random(n + more)[:n], uniforms)
            assert np.array_equal(selection.holdout_coins(n + more, 0.2, 3)[:n], selection.holdout_coins(n, 0.2, 3))


def _numbered(data: LabeledDataset, extra: int = 0) -> LabeledDataset:
    """``data`` with its first ``extra`` training examples appended again at its end, and every training
    input's first entry set to its position (to tell which examples a trial trains on)."""
    x = np.concatenate([data.x_train, data.x_train[:extra]])
    x.reshape(len(x), -1)[:, 0] = np.arange(len(x))
    return dataclasses.replace(data, x_train=x, y_train=PrivateLabels.concatenate([data.y_train, data.y_train[:extra]]))


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_appending_an_example_moves_no_other_between_training_and_scoring(tmp_path, monkeypatch) -> None:
    """Add-or-remove neighbours: with one example appended, every trial trains on the same examples of
    the original dataset (plus, maybe, the new one), so every other example stays held out or not."""
    data = config_dataset(DPSGD_CONFIG.resolved())
    trained: dict[str, set[int]] = {}

    def recording(model, inputs, *args, **kwargs):
        trained.setdefault(name, set()).update(np.asarray(inputs).reshape(len(inputs), -1)[:, 0].astype(int).tolist())
        return model, []

    monkeypatch.setattr(selection, "train_dpsgd", recording)
    for name, extra in (("d", 0), ("d+1", 1)):
        tune(
            DPSGD_CONFIG,
            {"lr": ["0.5", "1"]},
            tmp_path / name,
            progress=False,
            dataset=_numbered(data, extra),
            selection={"mean": 2.0},
        )
    n = len(data.y_train)
    assert trained["d+1"] - {n} == trained["d"] and 0 < len(trained["d"]) < n


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_a_private_selection_writes_its_folder_after_the_last_trial(tmp_path, monkeypatch) -> None:
    """Nothing in the tune folder was written before the secret trials ended (their duration would tell
    their number): every file's and folder's mtime and ctime come after a file written once the last
    trial was over; the summary holds no duration; no metrics or checkpoints are written."""
    trial, marker = selection._trial, tmp_path / "after-the-trials"

    def timed(*args, **kwargs):
        result = trial(*args, **kwargs)
        marker.write_text("")  # the filesystem's clock, after this trial
        return result

    monkeypatch.setattr(selection, "_trial", timed)
    out = tmp_path / "sel"
    outcome = tune(DPSGD_CONFIG, {"lr": ["0.5", "1"]}, out, progress=False, selection={"mean": 2.0})
    after = marker.stat().st_mtime_ns
    written = [out, *out.rglob("*")]
    assert {path.name for path in written} >= {"config.json", "ledger.json", "model.pt", "summary.json", "tune.json"}
    for path in written:
        status = path.lstat()
        assert status.st_mtime_ns >= after and status.st_ctime_ns >= after, path
    assert not any(path.name in ("metrics.jsonl", "checkpoints", "elapsed.json") for path in written)
    assert outcome["final"]["seconds"] is None and json.loads((out / "summary.json").read_text())["seconds"] is None
    assert not selection.scratch_folder(out).exists()


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_an_interrupted_private_selection_stays_accounted_and_is_refused(tmp_path, monkeypatch) -> None:
    """A selection stopped during its trials leaves no tune folder, only its recorded ledger in the
    owner-only scratch folder beside it; running it again is refused (it cannot be resumed without a
    second spend) by a message that says where that ledger is."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(selection, "_trial", interrupted)
    out = tmp_path / "sel"
    with pytest.raises(KeyboardInterrupt):
        tune(DPSGD_CONFIG, {"lr": ["0.5", "1"]}, out, progress=False, selection={"mean": 2.0})
    scratch = selection.scratch_folder(out)
    assert not out.exists() and scratch.stat().st_mode & 0o777 == 0o700
    (entry,) = RunDirectory(scratch).read_ledger().entries
    assert entry.tag == "selection"
    monkeypatch.undo()
    with pytest.raises(RunDirectoryError, match="cannot be resumed") as refused:
        tune(DPSGD_CONFIG, {"lr": ["0.5", "1"]}, out, progress=False, selection={"mean": 2.0})
    assert str(scratch / "ledger.json") in str(refused.value) and not out.exists()


@pytest.mark.parametrize("holdout, message", [(1e-6, "fewer than two to score on"), (1 - 1e-6, "none to train on")])
def test_a_private_selection_refuses_a_holdout_that_leaves_nothing(tmp_path, holdout, message) -> None:
    with pytest.raises(ConfigError, match=message):
        tune(
            DPSGD_CONFIG,
            {"lr": ["0.5", "1"]},
            tmp_path / "sel",
            holdout=holdout,
            progress=False,
            selection={"mean": 2.0},
        )
    assert not (tmp_path / "sel").exists() and not selection.scratch_folder(tmp_path / "sel").exists()


@pytest.mark.parametrize(
    "grid",
    [
        {"delta": ["0.1", "0.2"]},
        {"epsilon": ["1", "50"]},
        {"insecure_noise_seed": ["7", "8"]},
        {"noise_multiplier": ["1", "2"]},
    ],
)
def test_a_private_selection_varies_training_options_only(tmp_path, grid) -> None:
    """A candidate's delta would make the printed epsilon another delta's, its epsilon another budget, its
    noise seed reproducible noise inside the selection, its noise multiplier one never used: refused
    before anything is written."""
    config = RunConfig(method="dp-sgd", epsilon=4.0, train=TrainConfig(epochs=1, batch_size=128, lr=0.5))
    with pytest.raises(ConfigError):
        tune(config, {"lr": ["0.5", "1"], **grid}, tmp_path / "sel", progress=False)
    with pytest.raises(ConfigError, match="mean number of trials"):
        tune(config, {"lr": ["0.5", "1"]}, tmp_path / "sel", progress=False, selection={"mean": 1.0})
    assert not (tmp_path / "sel").exists()


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

    release_once = tuning._release_once

    def release_then_poison(*args, **kwargs):
        releases = release_once(*args, **kwargs)
        poison_in_place(data.y_train)
        return releases

    monkeypatch.setattr(tuning, "_release_once", release_then_poison)
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
