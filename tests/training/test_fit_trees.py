"""fit_trees and a run whose network is ``gbdt``: the trees fitted from released targets only (RR's labels with
the channel inverted, other channels by posterior weights), and the run's release, resume, summary and predict."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import roc_auc_score

import labeldp.methods.stage_release as stage_release
from labeldp.cli import main
from labeldp.config.train_config import TrainConfig
from labeldp.errors import ConfigError
from labeldp.models.boosted_trees import BoostedTrees
from labeldp.runs import RunConfig, RunDirectory, load_run_model, train_run
from labeldp.training.fit_trees import check_fitted_network, fit_trees, rr_channel, rr_rows
from labeldp.training.stage import train_stage

KEEP, OTHER = np.e / (1 + np.e), 1 / (1 + np.e)  # binary randomized response at epsilon 1


def _clean(rows: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inputs, the true Pr[y = 1 | x] and labels drawn from it (an interaction no additive model learns)."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 4)).astype(np.float32)
    p = 1 / (1 + np.exp(-(2.5 * x[:, 0] * np.sign(x[:, 1]) + x[:, 2])))
    return x, p, (rng.random(rows) < p).astype(np.int64)


def _rr(labels: np.ndarray, seed: int) -> np.ndarray:
    """(n, 2) likelihoods of labels released by randomized response at epsilon 1 (tests draw their own noise)."""
    flipped = np.random.default_rng(seed).random(labels.size) > KEEP
    released = np.where(flipped, 1 - labels, labels)
    return np.where(np.arange(2)[None, :] == released[:, None], KEEP, OTHER)


def _predicted(model: BoostedTrees, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model.probabilities(torch.from_numpy(x)).numpy()


def test_rr_channel_is_found_only_where_every_row_shares_it() -> None:
    likelihood = _rr(np.array([0, 1, 1, 0]), 0)
    assert rr_channel(likelihood) == pytest.approx((KEEP, OTHER))
    assert rr_channel(np.vstack([likelihood, [[0.5, 0.2]]])) is None  # a row of another channel
    assert rr_channel(np.full((3, 2), 0.5)) is None  # a channel that says nothing


def test_rr_labels_learn_the_clean_probabilities_through_the_inverted_channel() -> None:
    """Statistical: on 20,000 rows RR at epsilon 1 keeps most of the ranking a clean fit has, and the inverted
    channel estimates Pr[clean label | x] (its mean the clean base rate), where the uncorrected fit would not."""
    x, p, labels = _clean(20_000, 0)
    test_x, test_p, _ = _clean(5_000, 1)
    model = BoostedTrees(2)
    facts = fit_trees(model, x, _rr(labels, 2), seed=0)
    predicted = _predicted(model, test_x)[:, 1]
    assert facts["first_fit"] == "released labels, channel inverted" and facts["inverted_rows"] == 20_000
    assert facts["fitted_on"] == "posteriors" and model.channel.numel() == 0  # then one round of posteriors
    assert roc_auc_score(test_p > 0.5, predicted) > 0.9
    assert abs(predicted.mean() - test_p.mean()) < 0.02  # the released labels' rate is ~0.5 * KEEP + ...
    assert np.corrcoef(predicted, test_p)[0, 1] > 0.9


def test_per_row_channels_are_fitted_by_posterior_weights_and_soft_labels_as_weights() -> None:
    x, p, labels = _clean(6_000, 3)
    likelihood = _rr(labels, 4)
    likelihood[::2] = np.where(likelihood[::2] == KEEP, 0.9, 0.1)  # every other row a stronger channel
    likelihood[1::10] = 1.0  # and some released as RR-with-prior's k = 1 releases them: saying nothing
    model = BoostedTrees(2)
    facts = fit_trees(model, x, likelihood, seed=0)
    assert facts["uninformative_rows"] == 600
    assert facts["first_fit"] == "released labels, channel inverted" and facts["inverted_rows"] == 3_000  # the stronger
    assert facts["fitted_on"] == "posteriors" and facts["em_rounds"] == 1 and model.channel.numel() == 0
    assert np.corrcoef(_predicted(model, x)[:, 1], p)[0, 1] > 0.85
    soft = BoostedTrees(2)
    assert fit_trees(soft, x, np.column_stack([1 - p, p]), soft_labels=True)["fitted_on"] == "soft labels"
    assert np.corrcoef(_predicted(soft, x)[:, 1], p)[0, 1] > 0.95


def test_true_labels_are_fitted_once_as_they_are() -> None:
    x, _, labels = _clean(2_000, 8)
    model = BoostedTrees(2)
    facts = fit_trees(model, x, np.eye(2)[labels], seed=0)  # a non-private stage's channel: the identity
    assert facts["fitted_on"] == "released labels" and "em_rounds" not in facts and model.channel.numel() == 0


def test_the_channel_most_rows_share_is_found_among_others() -> None:
    likelihood = np.vstack([_rr(np.array([0, 1, 1]), 9), [[0.5, 0.5], [0.9, 0.1]]])  # an uninformative row, another
    channel, rows = rr_rows(likelihood)
    assert channel == pytest.approx((KEEP, OTHER)) and rows.tolist() == [True, True, True, False, False]
    assert rr_rows(np.full((2, 2), 0.5)) is None


def test_what_the_trees_do_not_fit_is_refused() -> None:
    x, _, labels = _clean(200, 5)
    with pytest.raises(ConfigError, match="numeric labels"):
        fit_trees(BoostedTrees(2), x, labels.astype(np.float64))
    with pytest.raises(ConfigError, match="binned evidence"):
        fit_trees(BoostedTrees(2), x, np.ones((200, 3, 2)))
    with pytest.raises(ConfigError, match="two classes"):
        fit_trees(BoostedTrees(2), x, np.zeros(200, dtype=np.int64))


def _tables(tmp_path) -> tuple[str, str]:
    paths = []
    for name, rows, seed in (("train", 3000, 6), ("test", 1000, 7)):
        x, _, labels = _clean(rows, seed)
        frame = pd.DataFrame(x, columns=["a", "b", "c", "d"]).assign(kind=np.where(x[:, 3] > 0, "u", "v"), y=labels)
        frame.to_csv(tmp_path / f"{name}.csv", index=False)
        paths.append(str(tmp_path / f"{name}.csv"))
    return paths[0], paths[1]


def _config(train: str, test: str, **fields) -> RunConfig:
    settings = dict(method="lp-2st", epsilon=2.0, model="gbdt", seed=3)
    return RunConfig(
        dataset="csv", table=train, test_table=test, label_column="y", classes=("0", "1"), **{**settings, **fields}
    )


def test_a_gbdt_run_releases_once_resumes_from_its_releases_and_predicts(tmp_path, monkeypatch) -> None:
    train, test = _tables(tmp_path)
    out = tmp_path / "run"
    first = train_run(_config(train, test), out, progress=False)
    assert first["network"] == "gbdt" and first["test_auc"] > 0.8
    assert [entry.tag for entry in RunDirectory(out).read_ledger().entries] == ["stage1", "stage2"]
    rows = RunDirectory(out).read_metrics()
    assert [row["stage"] for row in rows] == [1, 2] and rows[1]["fit"]["fitted_on"] == "posteriors"
    assert isinstance(load_run_model(out), BoostedTrees)
    ledger = (out / "ledger.json").read_bytes()
    (out / "summary.json").unlink()  # as if interrupted after both releases
    (out / "model.pt").unlink()

    def refuse(*args, **kwargs):
        raise AssertionError("a resumed run drew a release again")

    monkeypatch.setattr(stage_release, "release_randomized_response", refuse)
    monkeypatch.setattr(stage_release, "release_rr_with_prior", refuse)
    again = train_run(_config(train, test), out, progress=False)
    assert again["test_auc"] == first["test_auc"] and (out / "ledger.json").read_bytes() == ledger

    scores = tmp_path / "scores.csv"
    assert main(["predict", str(out), "--table", test, "--out", str(scores)]) == 0
    truth = pd.read_csv(test)["y"]
    assert roc_auc_score(truth, pd.read_csv(scores)["p_1"]) == pytest.approx(first["test_auc"], abs=1e-6)


def test_the_auto_tune_has_no_learning_rate_to_choose_for_gbdt(tmp_path, capsys) -> None:
    train, test = _tables(tmp_path)
    argv = ["train", "--dataset", "csv", "--table", train, "--test-table", test, "--label-column", "y"]
    argv += ["--classes", "0", "1", "--model", "gbdt", "--method", "lp-1st", "--epsilon", "2"]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 0
    assert "not trained at a learning rate" in capsys.readouterr().out
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["network"] == "gbdt" and summary["test_auc"] > 0.8


@pytest.mark.parametrize("method, message", [("dp-sgd", "gradient steps"), ("pate", "teachers")])
def test_methods_that_train_by_gradient_steps_refuse_gbdt_before_any_release(tmp_path, method, message) -> None:
    train, test = _tables(tmp_path)
    fields = {"delta": 1e-5} if method in ("dp-sgd", "pate") else {}
    with pytest.raises(ConfigError, match=message):
        train_run(_config(train, test, method=method, **fields), tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "ledger.json").exists()


def test_gradient_steps_refuse_fitted_trees() -> None:
    x, _, labels = _clean(100, 10)
    with pytest.raises(ConfigError, match="not trained by gradient steps"):
        train_stage(BoostedTrees(2), x, labels, 2, TrainConfig(epochs=1), progress=False)


def test_a_regression_refuses_gbdt() -> None:
    with pytest.raises(ConfigError, match="numeric labels"):
        check_fitted_network(RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, model="gbdt"), "gbdt", True)


def test_a_tune_of_the_training_of_fitted_trees_is_refused_before_any_spend() -> None:
    """Candidates that differ in how a network trains are one run for gbdt: refused, nothing drawn."""
    from labeldp.experiments.candidates import check_tunable

    data = SimpleNamespace(input_shape=(4,), categorical=(), is_regression=False, num_classes=2)
    base = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, model="gbdt")
    candidates = [dataclasses.replace(base, train=TrainConfig(lr=lr)) for lr in (0.01, 0.1)]
    with pytest.raises(ConfigError, match="the training options do not act on it"):
        check_tunable(base, candidates, data)


def test_training_options_a_fit_leaves_unused_are_refused_before_any_release() -> None:
    """The trees fit with their own settings: an epoch count or a learning rate typed for them would do nothing."""
    config = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, model="gbdt", train=TrainConfig(epochs=30, lr=0.1))
    with pytest.raises(ConfigError, match="does not use the training options epochs, lr; leave them"):
        check_fitted_network(config, "gbdt", False)
    check_fitted_network(dataclasses.replace(config, train=TrainConfig(eval_batch_size=64)), "gbdt", False)


@pytest.mark.parametrize("labels", [np.arange(70) % 10, np.r_[np.zeros(299, int), 1]])
def test_rows_too_few_for_a_stratified_tenth_fit_without_stopping_early(labels) -> None:
    """Ten classes in 70 rows (a tenth holds 7) or a class of one row: scikit-learn's early-stopping split
    cannot be made, so the trees fit their iterations without it, rather than failing after the release."""
    x = np.random.default_rng(0).normal(size=(labels.size, 3)).astype(np.float32)
    model = BoostedTrees(int(labels.max()) + 1)
    facts = fit_trees(model, x, labels)
    assert facts["iterations"] == 1000
