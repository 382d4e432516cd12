"""Sweeps (experiments/sweep_runner.py): a grid expanded into jobs, a sweep that runs in parallel, resumes
after it was killed and reports, a failing run recorded while the others finish, and a data folder
given only to the runs that read one."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time

import pytest
import torch

from labeldp.cli import main
from labeldp.experiments.sweep_report import aggregate
from labeldp.experiments.sweep_runner import SweepJob, grid_jobs, run_sweep
from labeldp.recipes import get_profile
from labeldp.runs import RunConfig
from labeldp.training import TrainConfig
from tests.helpers import table_config, write_table


def sweep_command(out, workers: int = 2) -> list[str]:
    return [
        sys.executable,
        "-m",
        "labeldp.cli",
        "sweep",
        "--grid",
        "method=lp-1st,lp-2st",
        "epsilon=1,8",
        "epochs=2",
        "--base",
        "digits/e1/lp-1st/run0",
        "--workers",
        str(workers),
        "--quiet",
        "--out",
        str(out),
    ]


def test_grid_expansion() -> None:
    jobs = grid_jobs({"method": ["lp-1st", "non-private"], "epsilon": ["1", "2"], "seed": ["0"], "lr": ["0.1"]})
    assert [j.key for j in jobs] == [
        "digits/e1/lp-1st/lr0.1/run0",
        "digits/e2/lp-1st/lr0.1/run0",
        "digits/non-private/lr0.1/run0",
    ]
    assert jobs[0].config.train.lr == 0.1
    # an option that one of the methods does not use: that method runs once, at the default
    jobs = grid_jobs({"method": ["lp-1st", "lp-2st"], "epsilon": ["1"], "temperature": ["1", "2"]})
    assert [j.key for j in jobs] == [
        "digits/e1/lp-1st/run0",
        "digits/e1/lp-2st/temperature1.0/run0",
        "digits/e1/lp-2st/temperature2.0/run0",
    ]
    assert [getattr(j.config.options, "temperature", None) for j in jobs] == [None, 1.0, 2.0]
    dpsgd_base = get_profile("mnist/e2/dp-sgd/run0").config
    (lp2st,) = grid_jobs({"method": ["lp-2st"]}, dpsgd_base)
    assert lp2st.config.options == RunConfig().options and lp2st.config.train == dpsgd_base.train
    with pytest.raises(ValueError, match="unknown option"):
        grid_jobs({"learning_rate": ["0.1"]})
    with pytest.raises(ValueError, match="epsilon='one' is not of type float"):
        grid_jobs({"epsilon": ["one"]})
    # optional fields: a number, or none; a seeded (not private) run is reported as such
    seeded, fresh = grid_jobs({"method": ["lp-1st"], "epsilon": ["1"], "insecure_noise_seed": ["7", "none"]})
    assert seeded.config.insecure_noise_seed == 7 and fresh.config.insecure_noise_seed is None
    rows = [
        {
            "key": "digits/e1/lp-1st/insecure_noise_seed7/run0",
            "status": "done",
            "dataset": "digits",
            "method": "lp-1st",
            "target_epsilon": "1",
            "test_accuracy": "0.9",
            "noise_private": "False",
        }
    ]
    assert aggregate(rows)[0]["method"].endswith("(NOT PRIVATE)")


def test_sweep_is_parallel_resumable_and_reports(tmp_path, capsys) -> None:
    out = tmp_path / "sweep"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(sweep_command(out, workers=1), env=env, start_new_session=True)
    deadline = time.time() + 240
    while len(list(out.glob("*/summary.json"))) < 2:
        assert time.time() < deadline and process.poll() is None, "sweep ended or stalled before the interruption"
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)  # the sweep, mid-way
    process.wait()
    finished = {p: p.stat().st_mtime_ns for p in out.glob("*/summary.json")}
    assert 2 <= len(finished) < 4

    assert main(sweep_command(out)[3:]) == 0  # resumed, in this process (its workers are processes)
    printed = capsys.readouterr().out
    assert all(p.stat().st_mtime_ns == mtime for p, mtime in finished.items()), "a finished run was run again"
    with open(out / "results.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 4 and all(r["status"] == "done" for r in rows)
    assert {r["method"] for r in rows} == {"lp-1st", "lp-2st"}
    assert {float(r["target_epsilon"]) for r in rows} == {1.0, 8.0}
    assert all(abs(float(r["epsilon"]) - float(r["target_epsilon"])) < 1e-3 for r in rows)
    png = (out / "privacy_utility.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert "lp-2st" in printed and "± " in printed


def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path, capsys) -> None:
    recipes = tmp_path / "recipes.py"
    recipes.write_text(
        "from labeldp.recipes import register\n"
        "from labeldp.runs import RunConfig\nfrom labeldp.training import TrainConfig\n"
        "register('t/ok', RunConfig(method='lp-1st', epsilon=2.0, train=TrainConfig(epochs=2)))\n"
        f"register('t/bad', RunConfig(dataset='csv', table={str(tmp_path / 'missing.csv')!r}, classes=('0', '1'),"
        " method='lp-1st', epsilon=2.0))\n"
    )
    assert main(["sweep", "--profiles", "^t/", "--recipes", str(recipes), "--out", str(tmp_path / "s"), "--quiet"]) == 0
    with open(tmp_path / "s" / "results.csv", newline="") as handle:
        rows = {r["key"]: r for r in csv.DictReader(handle)}
    assert rows["t/ok"]["status"] == "done" and rows["t/ok"]["neighboring_relation"] == "replace-one label"
    assert rows["t/bad"]["status"] == "failed" and "does not exist" in rows["t/bad"]["error"]
    assert (tmp_path / "s" / "t__bad" / "error.txt").exists()
    assert "1 run(s) failed" in capsys.readouterr().out


def test_sweep_data_dir_goes_to_the_runs_that_read_a_folder(tmp_path) -> None:
    jobs = [
        SweepJob("digits", get_profile("digits/e1/lp-1st/run0").config.with_overrides(train=TrainConfig(epochs=1))),
        SweepJob("mnist", get_profile("mnist/e1/lp-1st/run0").config),
    ]
    rows = {row["key"]: row for row in run_sweep(jobs, tmp_path, data_dir=str(tmp_path / "no-mnist"), progress=False)}
    assert rows["digits"]["status"] == "done"  # the embedded digits take no folder
    assert rows["mnist"]["status"] == "failed" and "no-mnist" in rows["mnist"]["error"]


def test_a_sweep_of_tables_runs_on_one_thread_and_logs_each_run_when_not_on_a_terminal(
    tmp_path, capsys, restore_threads
) -> None:
    write_table(tmp_path / "t.csv")
    jobs = [SweepJob(f"t/run{seed}", table_config(tmp_path / "t.csv", seed=seed)) for seed in (0, 1)]
    torch.set_num_threads(2)
    rows = run_sweep(jobs, tmp_path / "sweep")
    assert [row["status"] for row in rows] == ["done", "done"] and rows[0]["table"] == "t"
    assert torch.get_num_threads() == 1
    err = capsys.readouterr()
    lines = [line for line in (err.out + err.err).splitlines() if line.startswith("[")]
    assert [line.split()[:3] for line in lines] == [["[1/2]", "t/run0", "done"], ["[2/2]", "t/run1", "done"]]


def test_ctrl_c_stops_a_sweeps_workers_rather_than_waiting_for_their_runs(tmp_path, monkeypatch) -> None:
    import multiprocessing
    import signal
    import time

    from labeldp.experiments import sweep_runner

    write_table(tmp_path / "t.csv")
    jobs = [SweepJob(f"t/run{seed}", table_config(tmp_path / "t.csv", seed=seed)) for seed in (0, 1)]
    handler = signal.getsignal(signal.SIGINT)

    def interrupted(futures):
        raise KeyboardInterrupt
        yield

    monkeypatch.setattr(sweep_runner, "as_completed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(jobs, tmp_path / "sweep", workers=2, progress=False)
    assert signal.getsignal(signal.SIGINT) is handler  # ignored only while the workers started
    deadline = time.monotonic() + 30
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not multiprocessing.active_children()
    assert not list((tmp_path / "sweep").rglob("summary.json"))  # stopped, not waited for


def test_workers_take_their_sweeps_environment(tmp_path, monkeypatch) -> None:
    """The server the workers fork from outlives a sweep; the next sweep's runs still spend in its own ledgers."""
    write_table(tmp_path / "t.csv")
    for name in ("first", "second"):
        monkeypatch.setenv("LABELDP_BUDGET_DIR", str(tmp_path / name))
        jobs = [SweepJob(f"t/run{seed}", table_config(tmp_path / "t.csv", seed=seed)) for seed in (0, 1)]
        run_sweep(jobs, tmp_path / f"sweep-{name}", workers=2, progress=False)
        assert len(list((tmp_path / name).glob("*.jsonl"))) == 1
