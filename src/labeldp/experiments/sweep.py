"""Run many runs in parallel worker processes; resumable, and one failure does not stop the others.

Each run gets its own directory under the sweep folder (named after its key), so a sweep that is
interrupted and started again skips finished runs and resumes unfinished ones from their checkpoints
and saved noisy labels. ``results.csv`` collects one row per run.
"""

from __future__ import annotations

import csv
import ctypes
import itertools
import multiprocessing
import os
import signal
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from labeldp import runtime
from labeldp.config.overrides import apply_overrides, parse_value
from labeldp.config.run import options_unused_by
from labeldp.data import folder_datasets, get_dataset
from labeldp.errors import ConfigError, LabelDPError
from labeldp.files import write_atomic
from labeldp.recipes.profiles import load_recipes, loaded_recipes
from labeldp.runs import RunConfig, RunDirectory, train_run

RESULT_COLUMNS = (
    "key",
    "status",
    "dataset",
    "method",
    "target_epsilon",
    "epsilon",
    "delta",
    "neighboring_relation",
    "seed",
    "test_accuracy",
    "test_auc",
    "test_log_loss",
    "test_rmse",
    "test_mse",
    "test_mae",
    "seconds",
    "noise_private",
    "run_dir",
    "error",
)


@dataclass(frozen=True)
class SweepJob:
    key: str
    config: RunConfig

    @property
    def folder(self) -> str:
        return self.key.replace("/", "__")


def grid_jobs(grid: dict[str, list[str]], base: RunConfig | None = None) -> list[SweepJob]:
    """Jobs for every combination of the grid's values, each overriding ``base`` (default: the
    library defaults). Names and values are parsed as every override is (:mod:`labeldp.config.overrides`:
    ``epsilon``, ``method``, ``seed``, ``epochs``, ``lr``, ``stages`` as ``0.3:0.7`` ...). A method's
    runs leave the options it does not use at their defaults (``temperature`` for ``lp-1st``, the base's
    DP-SGD settings for ``lp-2st``), as a non-private method's runs have no epsilon, so such a
    combination is one run, not several."""
    base = base or RunConfig()
    names = list(grid)
    defaults = RunConfig()
    jobs: dict[str, SweepJob] = {}
    for values in itertools.product(*(grid[name] for name in names)):
        chosen = {name: parse_value(name, value) for name, value in zip(names, values)}
        config = apply_overrides(base, chosen)
        if not config.method_spec.private:
            config = replace(config, epsilon=None)
        unused = options_unused_by(config.method)  # e.g. temperature for lp-1st: it runs once, with the default
        config = replace(config, **{name: getattr(defaults, name) for name in unused})
        config.resolved()
        key = _grid_key(
            config, {k: v for k, v in chosen.items() if k not in ("dataset", "method", "epsilon", "seed", *unused)}
        )
        jobs.setdefault(key, SweepJob(key, config))
    return list(jobs.values())


def _grid_key(config: RunConfig, extra: dict[str, Any]) -> str:
    budget = config.method if not config.method_spec.private else f"e{config.epsilon:g}/{config.method}"
    suffix = "".join(
        f"/{name}{':'.join(map(str, v)) if isinstance(v, tuple) else v}" for name, v in sorted(extra.items())
    )
    return f"{config.dataset}/{budget}{suffix}/run{config.seed}"


def _is_table(config: RunConfig) -> bool:
    return get_dataset(config.dataset).source == "table"


def _dataset_column(job: SweepJob) -> str:
    """What ``results.csv`` and reports name a job's dataset: a table run's by the first part of its key
    (``adult`` for the profile ``adult/e1/marginals/run0``; ``csv`` for a grid's runs), so that two
    tables' profiles are not averaged together as ``csv``; another dataset by its name."""
    return job.key.split("/")[0] if _is_table(job.config) and "/" in job.key else job.config.dataset


def _reads_folder(config: RunConfig) -> bool:
    """Whether a run takes the sweep's ``--data-dir``: a folder dataset, or a table named by a path
    relative to it (a profile's); a table named by an absolute path keeps its configuration."""
    if config.dataset in folder_datasets():
        return True
    return _is_table(config) and config.table is not None and not Path(config.table).expanduser().is_absolute()


def _worker_init(threads: int, recipes: tuple[Path, ...]) -> None:
    """Each worker uses ``threads`` torch threads, knows the methods, datasets and profiles of the
    ``recipes`` files the sweep executed, reuses freed memory (:mod:`labeldp.runtime`) and dies with the
    sweep process (Linux)."""
    import torch

    for path in recipes:
        load_recipes(path)
    torch.set_num_threads(threads)
    runtime.reuse_freed_memory()
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _run_job(config: RunConfig, run_dir: str, device: str) -> dict[str, Any]:
    try:
        return {"status": "done", **train_run(config, run_dir, device=device, progress=False)}
    except Exception as error:  # recorded; the sweep goes on
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / "error.txt").write_text(traceback.format_exc())
        return {"status": "failed", "error": f"{type(error).__name__}: {error}"}


def _row(job: SweepJob, run_dir: Path, outcome: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": job.key,
        "status": outcome.get("status"),
        "dataset": _dataset_column(job),
        "method": job.config.method,
        "target_epsilon": job.config.epsilon if job.config.epsilon is not None else "",
        "epsilon": outcome.get("epsilon")
        if outcome.get("epsilon") is not None
        else ("" if outcome.get("status") != "done" else "inf"),
        "delta": outcome.get("delta", ""),
        "neighboring_relation": outcome.get("neighboring_relation", ""),
        "seed": job.config.seed,
        "test_accuracy": outcome.get("test_accuracy", ""),
        **{name: outcome.get(name, "") for name in ("test_auc", "test_log_loss", "test_rmse", "test_mse", "test_mae")},
        "seconds": outcome.get("seconds", ""),
        "noise_private": outcome.get("noise_private", ""),
        "run_dir": str(run_dir),
        "error": outcome.get("error", ""),
    }


def _finished_as_configured(folder: RunDirectory, config: RunConfig) -> bool:
    try:
        summary, saved = folder.read_summary(), folder.read_config()
        return (
            summary is not None
            and saved is not None
            and RunConfig.from_dict(saved).to_dict() == config.resolved().to_dict()
        )
    except (LabelDPError, TypeError, KeyError):  # a damaged folder: the job reports it
        return False


def run_sweep(
    jobs: list[SweepJob],
    out: str | Path,
    *,
    workers: int = 1,
    device: str = "auto",
    data_dir: str | None = None,
    progress: bool = True,
) -> list[dict[str, Any]]:
    """Run ``jobs`` into ``out/<key>/`` and write ``out/results.csv``: one after the other in this
    process with one worker, else in ``workers`` processes."""
    if workers < 1:
        raise ConfigError(f"workers must be at least 1, got {workers}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    if data_dir is not None:  # for the runs whose dataset reads a folder, or a table under it
        jobs = [
            replace(job, config=replace(job.config, data_dir=data_dir)) if _reads_folder(job.config) else job
            for job in jobs
        ]
    outcomes: dict[str, dict[str, Any]] = {}
    pending = []
    for job in jobs:
        if _finished_as_configured(RunDirectory(out / job.folder), job.config):
            outcomes[job.key] = {"status": "done", **RunDirectory(out / job.folder).read_summary()}
        else:  # unfinished, damaged or another configuration's run (train_run says which, as the job's error)
            pending.append(job)
    threads = max(1, (os.cpu_count() or 1) // workers)
    bar = tqdm(
        total=len(jobs), initial=len(jobs) - len(pending), desc="sweep", unit="run", disable=None if progress else True
    )

    def finished(job: SweepJob, outcome: dict[str, Any]) -> None:
        outcomes[job.key] = outcome
        if outcome["status"] != "done":
            tqdm.write(f"run {job.key} failed: {outcome['error']}")
        bar.update()

    if workers == 1:
        for job in pending:
            finished(job, _run_job(job.config, str(out / job.folder), device))
    elif pending:
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(
            workers, mp_context=context, initializer=_worker_init, initargs=(threads, loaded_recipes())
        ) as pool:
            futures = {pool.submit(_run_job, job.config, str(out / job.folder), device): job for job in pending}
            for future in as_completed(futures):
                finished(futures[future], future.result())
    bar.close()
    rows = [_row(job, out / job.folder, outcomes[job.key]) for job in jobs]
    write_results(rows, out / "results.csv")
    return rows


def write_results(rows: list[dict[str, Any]], path: Path) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=RESULT_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)

    write_atomic(path, write)
