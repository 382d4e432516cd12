"""The methods for numeric labels (methods/numeric.py): the binned evidence and its loss, the
regression methods end to end with their ledgers, fresh noise, and the checks before any release."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from labeldp.accounting import PrivacyLedger
from labeldp.data import regression_dataset
from labeldp.errors import ConfigError
from labeldp.evaluation import primary_metric
from labeldp.methods.numeric import binned_evidence, within_bins
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig
from labeldp.training.losses import binned_likelihood_loss, likelihood_loss
from tests.helpers import config_of

FAST = TrainConfig(epochs=3, batch_size=64, optimizer="adam", lr=0.01, weight_decay=1e-4)


def config(method: str, **fields) -> RunConfig:
    epsilon = None if method == "non-private" else fields.pop("epsilon", 2.0)
    noise = {} if method == "non-private" else {"insecure_noise_seed": 1}
    fields = {"label_range": (0, 20), "label_grid": 11, "model": "mlp", "train": FAST, **noise, **fields}
    return config_of(dataset="csv", method=method, epsilon=epsilon, **fields)


def test_binned_loss_is_the_forward_loss_on_bins_and_the_prior_inside_them() -> None:
    rng = np.random.default_rng(0)
    logits = torch.tensor(rng.normal(size=(6, 5)), requires_grad=True)
    bin_of = np.array([[0, 0, 1, 1, 1]] * 3 + [[0, 1, 2, 3, 4]] * 3)
    likelihood = np.where(bin_of == rng.integers(0, 2, (6, 1)), 0.7, 0.3)
    priors = rng.dirichlet(np.ones(5), 6)
    evidence = torch.tensor(binned_evidence(likelihood, priors, bin_of), dtype=torch.float64)
    within = within_bins(priors, bin_of)
    assert np.allclose(np.array([within[i][bin_of[i] == b].sum() for i in range(6) for b in range(2)]), 1.0)
    grad = torch.autograd.grad(binned_likelihood_loss(logits, evidence).sum(), logits)[0]
    forward = torch.autograd.grad(likelihood_loss(logits, torch.tensor(likelihood).log()).sum(), logits)[0]
    for i in range(6):  # the same gradient on each bin's total
        for b in np.unique(bin_of[i]):
            assert grad[i, bin_of[i] == b].sum() == pytest.approx(float(forward[i, bin_of[i] == b].sum()), abs=1e-6)
    assert torch.allclose(grad[3:], forward[3:], atol=1e-6)  # one point per bin: exactly the forward loss
    # at a model whose bins are split as the prior splits them, nothing moves inside a bin
    q = np.stack([within[i] * np.array([0.2, 0.8])[bin_of[i]] for i in range(3)])
    at_prior = torch.tensor(np.log(q), requires_grad=True)
    grad = torch.autograd.grad(binned_likelihood_loss(at_prior, evidence[:3]).sum(), at_prior)[0]
    target_share = q * (likelihood[:3] / (q * likelihood[:3]).sum(axis=1, keepdims=True))
    assert np.allclose(grad.numpy(), q - target_share, atol=1e-6)


@pytest.mark.parametrize(
    "method, fields",
    [
        ("non-private", {}),
        ("lp-1st", {}),
        ("rr-on-bins", {}),
        ("rr-on-bins", {"loss": "mse", "prior": "uniform"}),
        ("rr-on-bins-mst", {}),
        ("laplace-regression", {}),
        ("laplace-regression", {"loss": "mse"}),
        ("lp-1st", {"loss": "mse"}),
    ],
)
def test_regression_methods_run_and_record_their_releases(tmp_path, toy, method: str, fields: dict) -> None:
    summary = train_run(config(method, **fields), tmp_path, dataset=toy, progress=False)
    assert 0 < summary["test_rmse"] < 8 and summary["test_mse"] == pytest.approx(summary["test_rmse"] ** 2)
    assert summary["label_range"] == [0.0, 20.0] and summary["label_grid"] == 11 and "test_accuracy" not in summary
    assert primary_metric(summary) == "test_rmse"
    ledger = PrivacyLedger.load(tmp_path / "ledger.json")
    if method == "non-private":
        assert summary["epsilon"] == "inf"  # printed and stored alike
        return
    assert summary["epsilon"] == pytest.approx(2.0, abs=1e-3) and ledger.epsilon() == pytest.approx(2.0, abs=1e-3)
    metrics = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert all(row["test_rmse"] is not None for row in metrics)
    again = train_run(config(method, **fields), tmp_path, dataset=toy, progress=False)
    assert again == summary and PrivacyLedger.load(tmp_path / "ledger.json").to_dict() == ledger.to_dict()


def test_rr_on_bins_ledgers_the_histogram_and_spends_the_rest(tmp_path, toy) -> None:
    summary = train_run(config("rr-on-bins", prior_epsilon=0.5), tmp_path / "one", dataset=toy, progress=False)
    entries = {e.tag: e for e in PrivacyLedger.load(tmp_path / "one" / "ledger.json").entries}
    assert set(entries) == {"prior", "stage1"} and entries["prior"].num_members == entries["stage1"].num_members == 400
    assert "epsilon=1.5" in entries["stage1"].description and summary["stages"][0]["epsilon"] == 1.5
    with np.load(tmp_path / "one" / "noisy_labels" / "stage1.npz") as released:
        assert released["evidence"].shape == (400, 3, 11) and released["bin_of"].shape == (400, 11)
    # in stages, only stage 1's examples pay for the histogram: stage 2 spends all of epsilon on the labels
    summary = train_run(config("rr-on-bins-mst", prior_epsilon=0.5), tmp_path / "mst", dataset=toy, progress=False)
    ledger = PrivacyLedger.load(tmp_path / "mst" / "ledger.json")
    entries = {e.tag: e for e in ledger.entries}
    assert entries["prior"].num_members == entries["stage1"].num_members == 160
    assert [s["epsilon"] for s in summary["stages"]] == [1.5, 2.0]
    assert np.array_equal(entries["prior"].members, entries["stage1"].members)
    assert ledger.epsilon() == pytest.approx(2.0, abs=1e-3)


@pytest.mark.parametrize("method", ["rr-on-bins", "laplace-regression"])
def test_the_noise_does_not_come_from_the_seed(tmp_path, toy, method: str) -> None:
    released = []
    for run in ("a", "b"):
        train_run(
            config(method, insecure_noise_seed=None, train=TrainConfig(epochs=1)),
            tmp_path / run,
            dataset=toy,
            progress=False,
        )
        with np.load(tmp_path / run / "noisy_labels" / "stage1.npz") as saved:
            released.append(saved["values"])
    assert not np.array_equal(*released)  # same configuration and seed, fresh noise


@pytest.mark.parametrize(
    "method, fields, message",
    [
        ("rr-on-bins", {"loss": "ce"}, "releases values, not labels"),
        ("rr-on-bins", {"clusters": 5, "prior": "histogram"}, "only with prior 'cluster'"),
        ("laplace-regression", {"prior": "histogram"}, "does not use prior"),
        ("rr-on-bins", {"label_range": (0, 10)}, "the dataset has the grid of 11 points over \\[0, 20\\]"),
        ("rr-on-bins", {"label_grid": None, "label_range": None}, None),
    ],
)
def test_regression_configurations_are_checked_before_any_release(tmp_path, toy, method, fields, message) -> None:
    if message is None:  # an in-memory dataset need not restate its grid
        assert train_run(config(method, **fields), tmp_path, dataset=toy, progress=False)["test_rmse"] > 0
        return
    with pytest.raises(ConfigError, match=message):
        train_run(config(method, **fields), tmp_path / "run", dataset=toy, progress=False)
    assert not (tmp_path / "run" / "ledger.json").exists()


def test_numeric_methods_and_options_refuse_classes(tmp_path) -> None:
    for fields, message in (
        ({"method": "rr-on-bins", "epsilon": 1.0}, "for numeric labels"),
        ({"method": "laplace-regression", "epsilon": 1.0}, "for numeric labels"),
        ({"method": "lp-1st", "epsilon": 1.0, "loss": "mse"}, "needs numeric labels"),
    ):
        with pytest.raises(ConfigError, match=message):
            train_run(config_of(**fields), tmp_path / "run", progress=False)
        assert not (tmp_path / "run" / "ledger.json").exists()
    with pytest.raises(ConfigError, match="defines its own labels"):
        RunConfig(method="lp-1st", epsilon=1.0, label_range=(0, 1)).resolved()
    with pytest.raises(ConfigError, match="not both"):
        RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, label_range=(0, 1), classes=("0", "1")).resolved()


def test_uneven_grids_refuse_the_laplace_mechanism(tmp_path) -> None:
    grid = np.array([0.0, 1.0, 5.0, 10.0])
    x = np.random.default_rng(0).normal(size=(40, 3))
    data = regression_dataset("uneven", x, np.arange(40) % 10, x[:10], np.arange(10.0), grid)
    with pytest.raises(ConfigError, match="evenly spaced"):
        train_run(
            RunConfig(dataset="csv", method="laplace-regression", epsilon=1.0), tmp_path, dataset=data, progress=False
        )
    assert (
        train_run(
            RunConfig(dataset="csv", method="rr-on-bins", epsilon=1.0, train=FAST),
            tmp_path / "bins",
            dataset=data,
            progress=False,
        )["test_rmse"]
        > 0
    )


def test_the_histogram_prior_of_several_stages_depends_on_who_pays_for_it(tmp_path, monkeypatch) -> None:
    """rr-on-bins-mst's histogram is paid by stage 1's examples, or by all of them with combine_priors:
    an unfinished run whose histogram was drawn one way does not continue the other way (its ledger
    would charge the histogram to examples that then spend all of epsilon on their labels)."""
    import pytest

    from labeldp.data import label_grid, regression_dataset
    from labeldp.errors import RunDirectoryError

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3))
    values = 10 + 3 * x[:, 0] + rng.normal(size=300)
    toy = regression_dataset("toy", x[:240], values[:240], x[240:], values[240:], label_grid(0, 20, 11))

    def config(combine: bool) -> RunConfig:
        return RunConfig(
            dataset="csv",
            method="rr-on-bins-mst",
            epsilon=2.0,
            prior_epsilon=0.5,
            label_range=(0, 20),
            label_grid=11,
            model="mlp",
            options={"combine_priors": combine},
            insecure_noise_seed=1,
            train=TrainConfig(epochs=1, batch_size=64),
        )

    from labeldp.runs.context import RunContext

    def stop_before_stage_2(self, model, stage, *args, **kwargs):
        train(self, model, stage, *args, **kwargs)
        raise KeyboardInterrupt  # interrupted after stage 1's training, before stage 2's release

    train = RunContext.train
    monkeypatch.setattr(RunContext, "train", stop_before_stage_2)
    with pytest.raises(KeyboardInterrupt):
        train_run(config(False), tmp_path / "run", dataset=toy, progress=False)
    monkeypatch.undo()
    with pytest.raises(RunDirectoryError, match="whose releases prior depend"):
        train_run(config(True), tmp_path / "run", dataset=toy, progress=False)
