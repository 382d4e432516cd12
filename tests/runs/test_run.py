"""Runs end to end: outputs, the privacy boundary, bad configurations, resuming after a crash."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import labeldp.runs.context as run_module
from labeldp.accounting import PrivacyLedger
from labeldp.boundary import unseal
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.pate import PATEConfig
from labeldp.errors import RunDirectoryError
from labeldp.runs import RunConfig, split_stages, train_run
from labeldp.training import TrainConfig, train_stage

FAST = TrainConfig(epochs=3, batch_size=64, lr=0.05)


def test_lp2st_run_writes_everything(blobs, tmp_path) -> None:
    config = RunConfig(dataset="csv", method="lp-2st", epsilon=2.0, train=FAST)
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    for name in (
        "config.json",
        "ledger.json",
        "metrics.jsonl",
        "summary.json",
        "model.pt",
        "noisy_labels/stage1.npz",
        "noisy_labels/stage2.npz",
    ):
        assert (tmp_path / "run" / name).exists(), name
    assert {"test_accuracy", "epsilon", "method", "dataset", "seconds"} <= set(summary)
    assert summary["epsilon"] == pytest.approx(2.0, abs=2e-4)
    assert 0.0 <= summary["test_accuracy"] <= 1.0
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["stage1", "stage2"]
    assert ledger.entries[0].members.sum() + ledger.entries[1].members.sum() == 600
    assert not np.any(ledger.entries[0].members & ledger.entries[1].members)
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [(r["stage"], r["epoch"]) for r in rows] == [(s, e) for s in (1, 2) for e in (1, 2, 3)]
    assert json.loads((tmp_path / "run" / "summary.json").read_text()) == summary


@pytest.mark.parametrize("loss", ["forward", "ce"])
def test_trainer_only_sees_released_labels(blobs, tmp_path, monkeypatch, loss) -> None:
    seen = []
    real = run_module.train_stage

    def spy(model, inputs, targets, *args, **kwargs):
        seen.append(np.array(targets))
        return real(model, inputs, targets, *args, **kwargs)

    monkeypatch.setattr(run_module, "train_stage", spy)
    config = RunConfig(dataset="csv", method="lp-mst", epsilon=0.5, stages=(0.3, 0.3, 0.4), loss=loss, train=FAST)
    train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    released = []
    for stage in (1, 2, 3):
        with np.load(tmp_path / "run" / "noisy_labels" / f"stage{stage}.npz") as data:
            released.append({key: data[key] for key in ("indices", "labels", "likelihood", "evidence")})
    key = "evidence" if loss == "forward" else "labels"
    for stage in (1, 2, 3):
        own = released[stage - 1][key]
        assert np.array_equal(seen[stage - 1][: len(own)], own)  # its own noisy labels first
        earlier = [r[key] for r in released[: stage - 1]]
        rest = seen[stage - 1][len(own) :]
        if loss == "forward":  # every earlier release, unfiltered, in stage order
            assert np.array_equal(rest, np.concatenate(earlier) if earlier else rest)
        else:  # a filtered subset of the earlier noisy labels
            assert len(rest) <= sum(len(e) for e in earlier)
    # the likelihood rows are the channels of the released labels: the released label is the most likely
    stage1 = released[0]
    assert np.array_equal(stage1["likelihood"].argmax(axis=1), stage1["labels"])
    # stage 1 has a uniform prior: its evidence is the normalised channel
    np.testing.assert_allclose(
        stage1["evidence"], stage1["likelihood"] / stage1["likelihood"].sum(1, keepdims=True), rtol=1e-5
    )
    # at epsilon 0.5 the released labels differ from the truth for most examples
    assert np.mean(stage1["labels"] != unseal(blobs.y_train)[stage1["indices"]]) > 0.5


def test_non_private_reference_reports_infinite_epsilon(blobs, tmp_path) -> None:
    summary = train_run(
        RunConfig(dataset="csv", method="non-private", train=FAST), tmp_path / "np", progress=False, dataset=blobs
    )
    assert summary["epsilon"] is None
    assert PrivacyLedger.load(tmp_path / "np" / "ledger.json").epsilon() == math.inf
    assert summary["test_accuracy"] > 0.9


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(method="lp-2st"), "needs --epsilon"),
        (dict(method="lp-2st", epsilon=0.0), "epsilon must be a finite number > 0"),
        (dict(method="lp-2st", epsilon=float("nan")), "epsilon must be a finite number > 0"),
        (dict(method="lp-mst", epsilon=1.0, stages=(0.5, 0.6)), "summing to 1"),
        (dict(method="lp-2st", epsilon=1.0, stages=(0.2, 0.3, 0.5)), "has 2 stage"),
        (dict(method="non-private", epsilon=1.0), "takes no epsilon"),
        (dict(method="dp-magic", epsilon=1.0), "unknown method"),
        (dict(dataset="imagenet", epsilon=1.0), "unknown dataset"),
        (dict(epsilon=1.0, temperature=0.0), "temperature"),
        (dict(epsilon=1.0, train=TrainConfig(epochs=0)), "epochs"),
        (dict(method="dp-sgd", epsilon=1.0, temperature=2.0), "'dp-sgd' does not use temperature; leave it"),
        (
            dict(method="lp-1st", epsilon=1.0, reuse_labels=False, warm_start=False),
            "'lp-1st' does not use reuse_labels, warm_start; leave them",
        ),
        (dict(method="pate", epsilon=1.0, loss="ce"), "'pate' does not use loss"),
        (dict(method="non-private", secure_rng=True), "'non-private' does not use secure_rng"),
        (dict(method="lp-2st", epsilon=1.0, dpsgd=DPSGDConfig(max_grad_norm=0.1)), "does not use dpsgd.max_grad_norm;"),
        (
            dict(method="dp-sgd", epsilon=1.0, pate=PATEConfig(teachers=10, queries=5)),
            "does not use pate.teachers, pate.queries;",
        ),
    ],
)
def test_bad_configuration_is_refused_before_anything_is_written(blobs, tmp_path, changes, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        train_run(RunConfig(**{"dataset": "csv", **changes}), tmp_path / "run", progress=False, dataset=blobs)
    assert not (tmp_path / "run").exists()


def test_amp_off_a_gpu_is_refused_before_anything_is_written(blobs, tmp_path) -> None:
    config = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, train=TrainConfig(epochs=1, amp=True))
    with pytest.raises(ValueError, match="amp .* is for CUDA GPUs; this run is on cpu"):
        train_run(config, tmp_path / "run", device="cpu", progress=False, dataset=blobs)
    assert not (tmp_path / "run").exists()
    with pytest.raises(ValueError, match="is for CUDA GPUs"):  # the library function too
        train_stage(
            torch.nn.Linear(blobs.x_train.shape[1], blobs.num_classes),
            blobs.x_train,
            unseal(blobs.y_train).copy(),
            blobs.num_classes,
            config.train,
            progress=False,
        )


def test_existing_directory_with_other_config_is_refused(blobs, tmp_path) -> None:
    train_run(
        RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, train=FAST),
        tmp_path / "run",
        progress=False,
        dataset=blobs,
    )
    with pytest.raises(RunDirectoryError, match="differs in: epsilon"):
        train_run(
            RunConfig(dataset="csv", method="lp-1st", epsilon=2.0, train=FAST),
            tmp_path / "run",
            progress=False,
            dataset=blobs,
        )


def test_finished_run_is_not_repeated(blobs, tmp_path, monkeypatch) -> None:
    config = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, train=FAST)
    first = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger_before = (tmp_path / "run" / "ledger.json").read_bytes()
    monkeypatch.setattr(run_module, "train_stage", lambda *a, **k: pytest.fail("trained again"))
    assert train_run(config, tmp_path / "run", progress=False, dataset=blobs) == first
    assert (tmp_path / "run" / "ledger.json").read_bytes() == ledger_before


def test_crash_between_labels_and_ledger_records_the_spend_once(blobs, tmp_path, monkeypatch) -> None:
    config = RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, train=FAST)
    monkeypatch.setattr(PrivacyLedger, "save", lambda *a, **k: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    monkeypatch.undo()
    assert (tmp_path / "run" / "noisy_labels" / "stage1.npz").exists()
    assert not (tmp_path / "run" / "ledger.json").exists()
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["stage1"] and summary["epsilon"] == pytest.approx(1.0, abs=2e-4)


def test_split_stages_is_a_deterministic_partition() -> None:
    parts = split_stages(1001, (0.3, 0.3, 0.4), seed=4)
    assert sorted(np.concatenate(parts).tolist()) == list(range(1001))
    assert all(abs(p.size - f * 1001) < 1 for p, f in zip(parts, (0.3, 0.3, 0.4)))
    assert all(np.array_equal(a, b) for a, b in zip(parts, split_stages(1001, (0.3, 0.3, 0.4), seed=4)))


def test_the_posterior_loss_pulls_back_a_confidently_wrong_model() -> None:
    """A cluster prior says class 1 (0.95), the model says class 0 with logit gap 10: the forward
    loss's gradient has all but vanished, the posterior loss's has not."""
    import torch

    from labeldp.training.losses import likelihood_loss, posterior_loss

    log_evidence = torch.tensor([[0.05, 0.95]]).log()
    gradients = {}
    for name, loss_of in (("forward", likelihood_loss), ("posterior", posterior_loss)):
        logits = torch.tensor([[10.0, 0.0]], requires_grad=True)
        loss_of(logits, log_evidence).sum().backward()
        gradients[name] = logits.grad.abs().max().item()
    assert gradients["forward"] < 1e-2
    assert gradients["posterior"] == pytest.approx(0.95, abs=1e-3)
    # right where the model agrees with the evidence: both losses are at a minimum direction-wise
    logits = torch.tensor([[-3.0, 3.0]])
    assert posterior_loss(logits, log_evidence) < posterior_loss(-logits, log_evidence)
