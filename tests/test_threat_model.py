"""The attacker who reads everything a run writes: what it must not learn, and the run folder's own
defences (a release is never drawn twice, damaged files are named, nothing is released before every
option is checked). DP-SGD's batches and logs, ALIBI's grid and RR at huge epsilons have their tests
next to their mechanisms (tests/dpsgd/test_sampling.py and test_trainer.py, tests/mechanisms/test_laplace.py
and test_rr.py)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

import labeldp.runs.context as run_module
from labeldp.accounting import PrivacyLedger
from labeldp.boundary import unseal
from labeldp.cli import main
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.pate_config import PATEConfig
from labeldp.data import load_dataset
from labeldp.dpsgd import PoissonSampler, gaussian_noise
from labeldp.dpsgd.noise import noise_generator
from labeldp.dpsgd.sampling import sampling_generator
from labeldp.errors import ConfigError, InsecureNoiseWarning, RunDirectoryError
from labeldp.experiments.sweep_runner import SweepJob, run_sweep
from labeldp.mechanisms import change_probability, keep_probability
from labeldp.randomness import NoiseSource, SecureGenerator
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig

ONE_EPOCH = TrainConfig(epochs=1, batch_size=64)


def _replay_rr(generator, released: np.ndarray, num_classes: int, epsilon: float) -> np.ndarray:
    """Invert K-ary RR given the generator that drew it, with either order of the keep decision."""
    uniforms = generator.random(released.size)
    shift = generator.integers(1, num_classes, size=released.size)
    changed = uniforms < change_probability(epsilon, num_classes)
    return np.where(changed, (released - shift) % num_classes, released)


def _generators_from_the_folder(seed: int, stage: int) -> list:
    """Every generator an attacker can derive from the run folder's seed: labeldp's old stream, the
    seed itself, and the noise stream the insecure mode would derive from it."""
    return [
        np.random.default_rng([seed, 1, stage]),
        np.random.default_rng(seed),
        NoiseSource(insecure_seed=seed).generator("label-release", stage),
    ]


def test_an_attacker_who_reads_the_run_folder_cannot_regenerate_the_noise(tmp_path) -> None:
    """LP-1ST at epsilon 1 on the digits: the attacker reads config.json, replays the coin flips from
    every generator it can derive from it, and inverts RR. It must not beat what epsilon 1 allows
    (Pr[correct] <= e / (e + 9) = 23 %), while the same attack on a run made with the explicitly
    insecure noise seed recovers every label."""
    truth = unseal(load_dataset("digits").y_train)
    default_run = tmp_path / "run"
    train_run(RunConfig(method="lp-1st", epsilon=1.0, train=ONE_EPOCH), default_run, progress=False)
    insecure_run = tmp_path / "insecure"
    with pytest.warns(InsecureNoiseWarning, match="NOT PRIVATE"):
        train_run(
            RunConfig(method="lp-1st", epsilon=1.0, train=ONE_EPOCH, insecure_noise_seed=0),
            insecure_run,
            progress=False,
        )

    bound = keep_probability(1.0, 10) + 5 * math.sqrt(0.25 / truth.size)
    for folder, leaks in ((default_run, False), (insecure_run, True)):
        config = json.loads((folder / "config.json").read_text())
        with np.load(folder / "noisy_labels" / "stage1.npz") as release:
            indices, released = release["indices"], release["labels"]
        seeds = {config["seed"]} | (
            {config["insecure_noise_seed"]} if config["insecure_noise_seed"] is not None else set()
        )
        best = max(
            np.mean(_replay_rr(generator, released, 10, 1.0) == truth[indices])
            for seed in seeds
            for generator in _generators_from_the_folder(seed, 1)
        )
        if leaks:
            assert best == 1.0
        else:
            assert best <= bound
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["noise_private"] is not leaks and ("NOT PRIVATE" in summary["noise"]) is leaks


def test_the_cli_says_when_a_run_is_not_private(tmp_path, capsys) -> None:
    assert (
        main(
            [
                "train",
                "--method",
                "lp-1st",
                "--epsilon",
                "2",
                "--epochs",
                "1",
                "--insecure-noise-seed",
                "1",
                "--out",
                str(tmp_path / "run"),
                "--quiet",
            ]
        )
        == 0
    )
    assert "NOT PRIVATE: the noise is reproducible from insecure_noise_seed 1" in capsys.readouterr().out
    assert (
        main(
            [
                "train",
                "--method",
                "lp-1st",
                "--epsilon",
                "2",
                "--secure-rng",
                "--insecure-noise-seed",
                "1",
                "--out",
                str(tmp_path / "both"),
                "--quiet",
            ]
        )
        == 2
    )
    assert "choose one" in capsys.readouterr().err


def _crash_after_the_first_release(monkeypatch) -> None:
    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_module, "train_stage", crash)


def test_a_deleted_release_cannot_make_a_rerun_draw_again(tmp_path, monkeypatch) -> None:
    config = RunConfig(method="lp-1st", epsilon=1.0, train=ONE_EPOCH)
    run = tmp_path / "run"
    _crash_after_the_first_release(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        train_run(config, run, progress=False)
    monkeypatch.undo()
    ledger = (run / "ledger.json").read_bytes()
    (run / "noisy_labels" / "stage1.npz").unlink()
    for _ in range(2):  # and not on a second try either
        with pytest.raises(RunDirectoryError, match=r"records the release 'stage1', but .*stage1.npz is missing"):
            train_run(config, run, progress=False)
        assert not (run / "noisy_labels" / "stage1.npz").exists()
        assert (run / "ledger.json").read_bytes() == ledger


def test_changed_training_options_continue_from_the_saved_release(tmp_path, monkeypatch) -> None:
    """A run whose training failed after stage 1's release continues under corrected training options
    from that release (no second draw); a change the release depends on is refused."""
    run = tmp_path / "run"
    _crash_after_the_first_release(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        train_run(RunConfig(method="lp-2st", epsilon=2.0, train=ONE_EPOCH), run, progress=False)
    monkeypatch.undo()
    with np.load(run / "noisy_labels" / "stage1.npz") as release:
        stage1 = release["labels"].copy()
    with pytest.raises(RunDirectoryError, match=r"differs in: epsilon, first_release\) whose releases stage1 depend"):
        train_run(RunConfig(method="lp-2st", epsilon=1.0, train=ONE_EPOCH), run, progress=False)
    corrected = RunConfig(method="lp-2st", epsilon=2.0, train=TrainConfig(epochs=2, batch_size=32, lr=0.02))
    summary = train_run(corrected, run, progress=False)
    with np.load(run / "noisy_labels" / "stage1.npz") as release:
        assert np.array_equal(release["labels"], stage1)
    assert [e.tag for e in PrivacyLedger.load(run / "ledger.json").entries] == ["stage1", "stage2"]
    assert summary["epsilon"] == pytest.approx(2.0, abs=2e-4)
    assert json.loads((run / "config.json").read_text())["train"]["epochs"] == 2
    with pytest.raises(RunDirectoryError, match="holds a finished run with a different configuration"):
        train_run(RunConfig(method="lp-2st", epsilon=2.0, train=ONE_EPOCH), run, progress=False)


def test_a_resume_that_would_change_the_automatic_first_release_is_refused(tmp_path, monkeypatch) -> None:
    """--first-release auto reads the loss and consensus: a resume whose change of them would turn stage 1's
    saved vectors into labels is refused, not trained on the wrong release."""
    run = tmp_path / "run"
    _crash_after_the_first_release(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        train_run(RunConfig(method="lp-2st", epsilon=1.0, train=ONE_EPOCH), run, progress=False)
    monkeypatch.undo()
    assert json.loads((run / "config.json").read_text())["first_release"] == "vlp"  # as resolved on 10 classes
    with pytest.raises(RunDirectoryError, match=r"differs in: consensus, first_release\) whose releases stage1"):
        train_run(
            RunConfig(method="lp-2st", epsilon=1.0, options={"consensus": True}, train=ONE_EPOCH), run, progress=False
        )
    summary = train_run(
        RunConfig(method="lp-2st", epsilon=1.0, train=TrainConfig(epochs=2, batch_size=64)), run, progress=False
    )
    assert summary["epsilon"] == pytest.approx(1.0, abs=2e-4)


@pytest.mark.parametrize("method, epsilon", [("lp-1st", 1.0), ("lp-2st", 2.0)])
def test_a_run_saved_before_the_automatic_first_release_reads_as_it_ran(tmp_path, method, epsilon) -> None:
    """config.json before --first-release auto: every method recorded rr, or (older) nothing. Such a finished
    run is the same run, and its configuration still resolves (labeldp budget import and audit read it)."""
    config, run = RunConfig(method=method, epsilon=epsilon, train=ONE_EPOCH), tmp_path / "run"
    summary = train_run(config, run, progress=False)
    saved = json.loads((run / "config.json").read_text())
    for legacy in ({**saved, "first_release": "rr"}, {k: v for k, v in saved.items() if k != "first_release"}):
        (run / "config.json").write_text(json.dumps(legacy))
        assert train_run(config, run, progress=False) == summary
        RunConfig.from_dict(legacy).resolved()


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(train=TrainConfig(momentum=-1.0)), "momentum must lie in"),
        (dict(train=TrainConfig(weight_decay=float("nan"))), "weight_decay must be a finite number"),
        (dict(train=TrainConfig(lr=float("inf"))), "lr must be a finite number"),
        (dict(stages=(0.9999, 0.0001)), "leave stage 2 without any of the 1347"),
        (dict(model="tanh-cnn"), "model 'tanh-cnn' needs 28x28 images"),
        (dict(prior="cluster", clusters=5000), "clusters .* exceeds"),
    ],
)
def test_options_that_cannot_train_are_refused_before_the_first_release(tmp_path, changes, message) -> None:
    with pytest.raises(ConfigError, match=message):
        train_run(RunConfig(method="lp-2st", epsilon=1.0, **changes), tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_damaged_files_are_named_not_tracebacks(tmp_path, capsys) -> None:
    args = ["train", "--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--quiet"]
    run = tmp_path / "run"

    def rerun() -> str:
        assert main([*args, "--out", str(run)]) == 2
        return capsys.readouterr().err

    assert main([*args, "--out", str(run)]) == 0
    (run / "summary.json").unlink()
    release = (run / "noisy_labels" / "stage1.npz").read_bytes()
    (run / "noisy_labels" / "stage1.npz").write_bytes(release[: len(release) // 2])
    assert "stage1.npz is damaged" in rerun()
    (run / "noisy_labels" / "stage1.npz").write_bytes(release)
    ledger = json.loads((run / "ledger.json").read_text())
    (run / "ledger.json").write_text(json.dumps({k: v for k, v in ledger.items() if k != "entries"}))
    assert "ledger.json is damaged" in rerun()
    (run / "ledger.json").write_text("{not json")
    assert "ledger.json is damaged" in rerun()
    (tmp_path / "file").write_text("")
    assert main([*args, "--out", str(tmp_path / "file" / "run")]) == 2
    assert "a file is in the way" in capsys.readouterr().err


def test_a_sweep_does_not_take_another_configuration_for_done(tmp_path) -> None:
    """A recipe changed between two sweeps into the same folder: the finished run of the old recipe
    is not reported as the new one's result."""
    train_run(
        RunConfig(method="lp-1st", epsilon=2.0, train=TrainConfig(epochs=1)), tmp_path / "s" / "t__run0", progress=False
    )  # what an earlier sweep of the old recipe left
    (row,) = run_sweep(
        [SweepJob("t/run0", RunConfig(method="lp-1st", epsilon=2.0, train=TrainConfig(epochs=2)))],
        tmp_path / "s",
        progress=False,
    )
    assert row["status"] == "failed" and "holds a finished run with a different configuration" in row["error"]
    assert "differs in: train" in row["error"]


def test_models_are_initialised_without_touching_global_state() -> None:
    state = torch.random.get_rng_state()
    from labeldp.models import build_model

    first = build_model("mlp", (4,), 3, seed=5)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(a, b) for a, b in zip(first.parameters(), build_model("mlp", (4,), 3, seed=5).parameters()))


def test_dpsgd_noise_and_batches_come_from_a_source_no_seed_search_finds() -> None:
    """torch's CPU generator keeps 32 bits of any seed (a search of minutes): on the CPU the default
    noise and batches come from ChaCha20; every torch deviate is drawn in float64 (float32 sampling
    stops at 5.77 standard deviations, a delta of about 1e-4 over a DP-SGD run)."""
    same = [torch.randn(3, generator=torch.Generator().manual_seed(seed)) for seed in (5, 5 + 2**32)]
    assert torch.equal(*same)  # why a fresh 63-bit seed is not enough for torch's CPU generator
    assert noise_generator(NoiseSource(), "dpsgd-noise", 1, device="cpu") == "secure"
    assert isinstance(sampling_generator(NoiseSource(), 1), SecureGenerator)
    assert isinstance(PoissonSampler(10, 0.5, 1).generator, SecureGenerator)
    seeded = noise_generator(NoiseSource(insecure_seed=3), "dpsgd-noise", 1)
    expected = torch.randn(1000, generator=torch.Generator().manual_seed(seeded.initial_seed()), dtype=torch.float64)
    assert torch.equal(gaussian_noise(torch.zeros(1000), 1.0, seeded), expected.float())


def test_pate_votes_of_another_configuration_are_never_reused(tmp_path, monkeypatch) -> None:
    """Teachers trained under one partition (seed) must not vote beside teachers of another: a run
    continued under a changed configuration trains all its teachers afresh."""
    import labeldp.teachers as pate_module

    config = RunConfig(
        method="pate", epsilon=8.0, train=ONE_EPOCH, options=PATEConfig(teachers=4, teacher_epochs=1, queries=50)
    )
    real, calls = pate_module.train_stage, []

    def crash_after_two(*args, **kwargs):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pate_module, "train_stage", crash_after_two)
    with pytest.raises(KeyboardInterrupt):
        train_run(config, tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "private" / "teachers.npz").exists()
    monkeypatch.setattr(pate_module, "train_stage", lambda *a, **k: calls.append(2) or real(*a, **k))
    calls.clear()
    train_run(dataclasses.replace(config, seed=1), tmp_path / "run", progress=False)
    assert calls.count(2) == 4  # all four teachers trained again, not the two missing ones
    assert not (tmp_path / "run" / "private").exists()


def test_a_dpsgd_checkpoint_that_went_missing_is_not_retrained(tmp_path) -> None:
    """DP-SGD's steps are the release: after epochs were written, a missing or older checkpoint would
    make a rerun take those steps again with fresh noise, outside the recorded event."""
    config = RunConfig(
        method="dp-sgd",
        epsilon=2.0,
        model="mlp",
        train=TrainConfig(epochs=2, batch_size=256),
        options=DPSGDConfig(noise_multiplier=2.0),  # epsilon 1.54 here: no calibration (seconds) to wait for
    )
    run = tmp_path / "run"
    train_run(config, run, progress=False)
    (run / "summary.json").unlink()
    (run / "checkpoints" / "stage1.pt").unlink()
    with pytest.raises(RunDirectoryError, match="records more epochs of stage 1 than .*stage1.pt holds"):
        train_run(config, run, progress=False)


def test_a_damaged_checkpoint_is_named(tmp_path) -> None:
    config = RunConfig(method="lp-1st", epsilon=1.0, train=TrainConfig(epochs=2, batch_size=64))
    run = tmp_path / "run"
    train_run(config, run, progress=False)
    (run / "summary.json").unlink()
    (run / "checkpoints" / "stage1.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(RunDirectoryError, match="stage1.pt is damaged"):
        train_run(config, run, progress=False)


def test_a_table_without_a_test_file_writes_no_metric_of_a_private_label(tmp_path, monkeypatch) -> None:
    """The held-out fifth of a table's rows has private labels: the run releases them once (RR at its
    epsilon, on its ledger beside the training rows) and estimates its test metrics from that release.
    An attacker who knows every other label can no longer read a test row's label off an exact
    log-loss: poisoning the true test labels right after their release changes nothing the run
    writes, no epoch reports a test metric, and the run's epsilon stays the one it was given."""
    import pandas as pd

    from labeldp.runs import config_dataset
    from labeldp.runs.context import RunContext
    from tests.helpers import poison_in_place

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 3))
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(y=(x[:, 0] + 0.3 * rng.normal(size=400) > 0).astype(int))
    frame.to_csv(tmp_path / "t.csv", index=False)
    config = RunConfig(
        dataset="csv",
        table=str(tmp_path / "t.csv"),
        label_column="y",
        classes=("0", "1"),
        method="lp-1st",
        epsilon=2.0,
        insecure_noise_seed=3,
        train=TrainConfig(epochs=2, batch_size=32),
    )
    clean = train_run(config, tmp_path / "clean", progress=False, dataset=config_dataset(config.resolved()))

    release_once = RunContext.test_release

    def release_then_poison(self):
        released = release_once(self)
        poison_in_place(self.data.y_test)  # every holder of the true test labels sees it
        return released

    monkeypatch.setattr(RunContext, "test_release", release_then_poison)
    poisoned = train_run(config, tmp_path / "poisoned", progress=False, dataset=config_dataset(config.resolved()))
    monkeypatch.undo()
    metrics = {name: value for name, value in clean.items() if name.startswith("test_")}
    assert {"test_accuracy", "test_accuracy_se", "test_log_loss", "test_auc", "test_brier"} <= set(metrics)
    assert metrics == {name: poisoned[name] for name in metrics}
    assert clean["test_labels"].startswith("estimated from their release")
    rows = [json.loads(line) for line in (tmp_path / "clean" / "metrics.jsonl").read_text().splitlines()]
    assert rows and all(row["test_accuracy"] is None for row in rows)
    ledger = PrivacyLedger.load(tmp_path / "clean" / "ledger.json")
    assert [entry.tag for entry in ledger.entries] == ["stage1", "test"] and ledger.dataset_size == 400
    assert np.flatnonzero(ledger.entries[1].members).tolist() == list(range(320, 400))
    assert clean["epsilon"] == pytest.approx(2.0, abs=1e-3)

    public = train_run(dataclasses.replace(config, test_labels="public"), tmp_path / "public", progress=False)
    assert "NOT covered by the epsilon" in public["test_labels"] and "test_accuracy_se" not in public
    with pytest.raises(ConfigError, match="test set of 'digits' is public"):
        RunConfig(method="lp-1st", epsilon=1.0, test_labels="none").resolved()
