"""`labeldp audit` (cli/audit.py): the audit leaves the run alone and shows what it spent, a run on a
dataset passed in memory says how to audit it, and options of another kind of audit are refused."""

from __future__ import annotations

import json

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.cli import main


def test_audit_command_leaves_the_run_alone_and_shows_what_it_spent(tmp_path, capsys) -> None:
    """The audit re-releases the real labels: its spend is recorded on the run's examples and the total
    over the run folder is shown; its noise is not the run's (even when the run's noise is seeded)."""
    run = tmp_path / "run"
    assert (
        main(
            [
                "train",
                "--method",
                "lp-1st",
                "--epsilon",
                "2",
                "--epochs",
                "3",
                "--out",
                str(run),
                "--quiet",
                "--insecure-noise-seed",
                "3",
            ]
        )
        == 0
    )
    ledger = (run / "ledger.json").read_bytes()
    labels = (run / "noisy_labels" / "stage1.npz").read_bytes()
    assert main(["audit", str(run), "--canaries", "100"]) == 0
    printed = capsys.readouterr().out
    assert "epsilon lower bound" in printed
    folder = run / "audit" / "mislabeled-canaries100-seed0"  # one folder per audit setting
    assert (folder / "audit.json").exists()
    assert (run / "ledger.json").read_bytes() == ledger and (run / "noisy_labels" / "stage1.npz").read_bytes() == labels
    spent = PrivacyLedger.load(folder / "audit_ledger.json")
    assert spent.epsilon() == pytest.approx(2.0, abs=1e-3) and spent.entries[0].num_members == 1347
    assert f"Everything in {run} together is epsilon 4" in printed and f"Delete {run / 'audit'}" in printed
    report = json.loads((folder / "audit.json").read_text())
    assert report["spent"]["run_and_audit_epsilon"] == pytest.approx(4.0, abs=1e-3)
    with (
        np.load(run / "noisy_labels" / "stage1.npz") as original,
        np.load(folder / "canary_run" / "noisy_labels" / "stage1.npz") as audit,
    ):
        assert np.mean(original["labels"] == audit["labels"]) < 0.9  # fresh noise: not the run's flips
    # a second audit with other canaries trains its own canary run, and the folder's total grows
    assert main(["audit", str(run), "--canaries", "100", "--seed", "1"]) == 0
    assert (run / "audit" / "mislabeled-canaries100-seed1" / "canary_run" / "model.pt").exists()
    assert f"Everything in {run} together is epsilon 6" in capsys.readouterr().out
    assert main(["audit", str(tmp_path / "nothing")]) == 2
    capsys.readouterr()
    assert main(["audit", str(run), "--targets", "50", "--shadows", "2"]) == 2  # options of --membership alone
    assert "--shadows, --targets apply only with --membership" in capsys.readouterr().err


def test_a_run_on_a_dataset_in_memory_reloads_and_says_how_to_audit_it(blobs, tmp_path, capsys) -> None:
    from labeldp.runs import RunConfig, load_run_model, train_run
    from labeldp.training import TrainConfig, accuracy

    summary = train_run(
        RunConfig(dataset="csv", method="lp-1st", epsilon=4.0, train=TrainConfig(epochs=2)),
        tmp_path / "run",
        progress=False,
        dataset=blobs,
    )
    model = load_run_model(tmp_path / "run")  # no dataset needed
    assert accuracy(model, blobs.x_test, blobs.y_test) == summary["test_accuracy"]
    assert main(["audit", str(tmp_path / "run")]) == 2
    assert "passed in memory" in capsys.readouterr().err


def test_a_membership_audit_of_a_per_user_run_is_refused_before_anything_is_released(tmp_path, capsys) -> None:
    """Its targets are rows, the run's members whole users: refused before the label audit spends."""
    import pandas as pd

    rng = np.random.default_rng(0)
    users = np.repeat(np.arange(60), 2)
    x = rng.normal(size=users.size)
    pd.DataFrame({"user": users, "x": x, "label": (x > 0).astype(int)}).to_csv(tmp_path / "t.csv", index=False)
    run = tmp_path / "run"
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--classes", "0", "1"]
    argv += ["--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--tune-budget", "0", "--quiet"]
    assert main([*argv, "--privacy-unit", "user", "--max-rows-per-unit", "2", "--out", str(run)]) == 0
    assert main(["audit", str(run), "--membership", "--canaries", "20"]) == 2
    assert "privacy unit 'user'" in capsys.readouterr().err and not (run / "audit").exists()


def test_an_audit_stopped_after_releasing_is_finished_or_refused_never_left_out_of_the_total(tmp_path, capsys) -> None:
    """An audit folder whose run released labels but whose audit ledger was never written (a Ctrl-C):
    another audit is refused before it spends, and the folder's total is refused rather than printed
    without it; the same audit run again finishes it."""
    from labeldp.audit.spend import folder_epsilon
    from labeldp.errors import RunDirectoryError

    run = tmp_path / "run"
    assert main(["train", "--method", "lp-1st", "--epsilon", "2", "--epochs", "1", "--out", str(run), "--quiet"]) == 0
    assert main(["audit", str(run), "--canaries", "50"]) == 0
    stopped = run / "audit" / "mislabeled-canaries50-seed0"
    (stopped / "audit_ledger.json").unlink()  # as if stopped between its canary run and its ledger
    with pytest.raises(RunDirectoryError, match="stopped after its runs released labels"):
        folder_epsilon(run)
    capsys.readouterr()
    assert main(["audit", str(run), "--canaries", "50", "--seed", "1"]) == 2
    assert "Run the same audit again" in capsys.readouterr().err
    assert not (run / "audit" / "mislabeled-canaries50-seed1").exists()
    released = (stopped / "canary_run" / "noisy_labels" / "stage1.npz").read_bytes()
    assert main(["audit", str(run), "--canaries", "50"]) == 0  # finished: its run read back, not drawn again
    assert (stopped / "canary_run" / "noisy_labels" / "stage1.npz").read_bytes() == released
    assert f"Everything in {run} together is epsilon 4" in capsys.readouterr().out
