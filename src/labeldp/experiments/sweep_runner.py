"""Run many runs in parallel worker processes; resumable, and one failure does not stop the others.

Each run gets its own directory under the sweep folder (named after its key), so a sweep that is
interrupted and started again skips finished runs and resumes unfinished ones from their checkpoints
and saved noisy labels. ``results.csv`` collects one row per run.
"""

from __future__ import annotations

import contextlib
import csv
import ctypes
import dataclasses
import itertools
import math
import multiprocessing
import multiprocessing.forkserver
import os
import signal
import sys
import threading
import traceback
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from labeldp import runtime
from labeldp.accounting.datasets import DatasetLedger
from labeldp.accounting.policy import BudgetPolicy
from labeldp.config.method_registry import BUILTIN_METHODS, get_method
from labeldp.config.overrides import apply_overrides, parse_value, resolve_name
from labeldp.data import folder_datasets, get_dataset
from labeldp.data.table import table_name
from labeldp.errors import BudgetError, ConfigError, LabelDPError
from labeldp.files import write_atomic
from labeldp.recipes.applied import AppliedRecipe
from labeldp.recipes.profile_registry import load_recipes, loaded_recipes
from labeldp.runs import RunConfig, RunDirectory, train_run
from labeldp.runs.plan import compared_configs

RESULT_COLUMNS = (
    "key",
    "status",
    "dataset",
    "table",
    "method",
    "target_epsilon",
    "epsilon",
    "dataset_epsilon",
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
    "dataset_key",
    "num_classes",
)


@dataclass(frozen=True)
class SweepJob:
    """One run of a sweep.

    Parameters
    ----------
    key : str
        The run's name, ``<dataset>/e<epsilon>/<method>[/<option><value>...]/run<seed>`` for a grid's (the
        budget part is the method alone for a non-private one).
    recipe : AppliedRecipe or None, optional
        The recipe its options came from, which its summary names.
    """

    key: str
    config: RunConfig
    recipe: AppliedRecipe | None = None

    @property
    def folder(self) -> str:
        """The run's folder under the sweep folder: ``key`` with each ``/`` as ``__``."""
        return self.key.replace("/", "__")


def grid_jobs(
    grid: dict[str, list[str]], base: RunConfig | None = None, recipe: AppliedRecipe | None = None
) -> list[SweepJob]:
    """One job per distinct run of every combination of ``grid``'s values (parsed as overrides,
    :mod:`labeldp.config.overrides`) over ``base`` (None: the library's defaults), in order.

    A method's runs leave the options it does not use at their defaults, as a non-private method's have no
    epsilon, so such combinations are one run. ``recipe`` is what ``base`` is (a profile given as ``--base``);
    each job's recipe is it with the grid's options over it."""
    base = base or RunConfig()
    names = list(grid)
    given = [name for name in names if name not in ("dataset", "method", "epsilon", "seed")]  # the run's own
    recipe = (recipe or AppliedRecipe(None, "none: the library's defaults")).with_typed(given)
    jobs: dict[str, SweepJob] = {}
    for values in itertools.product(*(grid[name] for name in names)):
        chosen = {name: parse_value(name, value) for name, value in zip(names, values)}
        method = chosen.get("method", base.method)
        start, unused = _for_method(base, method), _unused_by(method, chosen)
        config = apply_overrides(start, {name: value for name, value in chosen.items() if name not in unused})
        if not config.method_spec.private:
            config = replace(config, epsilon=None)
        elif config.epsilon is None:  # the grid has no --epsilon flag: say how a grid gives one
            raise ConfigError(
                f"method {config.method!r} needs an epsilon: add epsilon=E1,E2,... to the --grid "
                "(or start from a profile that has one: --base KEY)"
            )
        config.resolved()
        key = _grid_key(
            config, {k: v for k, v in chosen.items() if k not in ("dataset", "method", "epsilon", "seed", *unused)}
        )
        jobs.setdefault(key, SweepJob(key, config, recipe))
    return list(jobs.values())


def _shared_unused_by(method: str) -> dict[str, Any]:
    """The shared settings ``method`` does not use, with their defaults."""
    spec = get_method(method)
    unused = {} if spec.private else {"secure_rng": False, "insecure_noise_seed": None}
    return unused | ({} if spec.takes_prior else {"prior": None}) | ({} if spec.gaussian else {"delta": None})


def _for_method(config: RunConfig, method: str) -> RunConfig:
    """``config`` run by ``method``, with what that method does not use at its default."""
    takes = {f.name for f in dataclasses.fields(get_method(method).options)}
    kept = {f.name: getattr(config.options, f.name) for f in dataclasses.fields(config.options) if f.name in takes}
    return replace(config, method=method, options=kept, **_shared_unused_by(method))


def _unused_by(method: str, chosen: dict[str, Any]) -> set[str]:
    """The names of ``chosen`` that ``method`` does not use (temperature for lp-1st: it runs once, with the
    default)."""
    takes = {f.name for f in dataclasses.fields(get_method(method).options)}
    return {
        name
        for name in chosen
        if (resolve_name(name)[0] == "options" and resolve_name(name)[1] not in takes)
        or name.replace("-", "_") in _shared_unused_by(method)
    }


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
    (``adult-income``, which names the table and its label; ``csv`` for a grid's), another by its name."""
    return job.key.split("/")[0] if _is_table(job.config) and "/" in job.key else job.config.dataset


def _reads_folder(config: RunConfig) -> bool:
    """Whether a run takes the sweep's ``--data-dir``: a folder dataset, or a table named by a path relative
    to it (a profile's); a table named by an absolute path keeps its configuration."""
    if config.dataset in folder_datasets():
        return True
    return _is_table(config) and config.table is not None and not Path(config.table).expanduser().is_absolute()


def _worker_init(recipes: tuple[Path, ...], environ: dict[str, str]) -> None:
    """Each worker has the sweep's environment as it is now (a forkserver's is as it was when it started),
    knows the methods, datasets and profiles of the
    ``recipes`` files the sweep executed, reuses freed memory (:mod:`labeldp.runtime`) and dies with the
    sweep process (Linux)."""
    os.environ.clear()
    os.environ.update(environ)
    for path in recipes:
        load_recipes(path)
    runtime.reuse_freed_memory()
    try:
        ctypes.CDLL("libc.so.6").prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _run_job(
    config: RunConfig,
    run_dir: str,
    device: str,
    threads: int | None,
    cores: int,
    policy: BudgetPolicy,
    recipe: AppliedRecipe | None = None,
) -> dict[str, Any]:
    """Run one job with ``threads`` torch threads, or its dataset's default within ``cores``; its summary, or
    its error (the traceback in ``error.txt``)."""
    try:
        runtime.set_threads(threads, config.dataset, cores)
        run: dict[str, Any] = dict(device=device, progress=False, recipe=recipe, policy=policy)
        return {"status": "done", **train_run(config, run_dir, **run)}
    except (Exception, BudgetError) as error:  # recorded; the sweep goes on (a refused budget is the job's)
        Path(run_dir).mkdir(parents=True, exist_ok=True)
        (Path(run_dir) / "error.txt").write_text(traceback.format_exc())
        return {"status": "failed", "error": f"{type(error).__name__}: {error}"}


def _row(job: SweepJob, run_dir: Path, outcome: dict[str, Any]) -> dict[str, Any]:
    return {
        "key": job.key,
        "status": outcome.get("status"),
        "dataset": _dataset_column(job),
        "table": table_name(job.config.table) if _is_table(job.config) and job.config.table else "",
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
        "dataset_key": (outcome.get("dataset_ledger") or {}).get("key", ""),
        "num_classes": (RunDirectory(run_dir).read_data_facts() or {}).get("num_classes", "")
        if run_dir.exists()
        else "",
    }


def _finished_as_configured(folder: RunDirectory, config: RunConfig) -> bool:
    try:
        summary, saved, facts = folder.read_summary(), folder.read_config(), folder.read_data_facts()
        if summary is None or saved is None or facts is None:
            return False
        existing, new = compared_configs(saved, facts, config.resolved(), tuple(facts["input_shape"]))
        return existing == new
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
    threads: int | None = None,
    policy: BudgetPolicy | None = None,
) -> list[dict[str, Any]]:
    """Run ``jobs`` into ``out/<job.folder>/`` and write ``out/results.csv`` (:data:`RESULT_COLUMNS`); one
    after the other in this process where one worker or one run to make is left, else in ``workers`` processes
    at most, one per run.

    Each job is :func:`~labeldp.runs.run.train_run` in its own folder, releasing and recording as a run does;
    one finished under the same configuration is read back, an unfinished one resumed. A failed job is
    recorded (status ``failed``, its error) and the others go on.

    Parameters
    ----------
    data_dir : str or None, optional
        The data folder of the jobs whose dataset is read from a folder (it replaces theirs).
    progress : bool, optional
        A bar on a terminal; elsewhere (a log, a pipe) one line per finished run.
    threads : int or None, optional
        Torch threads of each run; None: one for a table, else its worker's share of the cores free when
        the sweep starts (:func:`labeldp.runtime.free_cores`).
    policy : BudgetPolicy or None, optional
        Every run's dataset ledgers and cap, as :func:`~labeldp.runs.run.train_run` takes it.
    """
    policy = policy or BudgetPolicy.from_environment()
    if workers < 1:
        raise ConfigError(f"workers must be at least 1, got {workers}")
    if threads is not None and threads < 1:
        raise ConfigError(f"threads must be at least 1, got {threads}")
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
        folder = RunDirectory(out / job.folder)
        summary = folder.read_summary() if _finished_as_configured(folder, job.config) else None
        if summary is not None:
            outcomes[job.key] = {"status": "done", **summary}
        else:  # unfinished, damaged or another configuration's run (train_run says which, as the job's error)
            pending.append(job)
    workers = min(workers, max(1, len(pending)))  # a process and its share of the cores for each run, no more
    cores = max(1, runtime.free_cores() // workers) if pending and threads is None else 1
    finished = _progress(len(jobs), len(jobs) - len(pending), outcomes, progress)
    if workers == 1:
        for job in pending:
            finished(job, _run_job(job.config, str(out / job.folder), device, threads, cores, policy, job.recipe))
    elif pending:
        _run_in_workers(pending, out, workers, finished, (device, threads, cores, policy))
    finished(None, None)
    rows = [_row(job, out / job.folder, outcomes[job.key]) for job in jobs]
    keys = {row["dataset_key"] for row in rows} - {""}
    spent = {key: DatasetLedger(key, "", policy.folder).worst().epsilon for key in keys}
    for row in rows:  # each run's epsilon beside its dataset's, every release on it composed
        row["dataset_epsilon"] = "" if not row["dataset_key"] else _epsilon_cell(spent[row["dataset_key"]])
    write_results(rows, out / "results.csv")
    return rows


def _epsilon_cell(epsilon: float) -> float | str:
    return "inf" if math.isinf(epsilon) else math.ceil(epsilon * 1e6) / 1e6


@contextlib.contextmanager
def _interrupts_ignored() -> Iterator[None]:
    """Ctrl-C ignored meanwhile (in the main thread): worker processes started then inherit it, so that the
    sweep alone answers it, with one line rather than a traceback each."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _worker_context() -> multiprocessing.context.BaseContext:
    """Workers forked from a server that imported the run code and the built-in methods once, where there is
    one: a spawned worker imports torch, scikit-learn and labeldp anew, seconds of CPU each."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    context = multiprocessing.get_context("forkserver")
    methods = sorted({f"labeldp.methods.{module}" for module in BUILTIN_METHODS.values()})
    # torch's optimisers import torch._dynamo when the first one is built: seconds, in every worker
    context.set_forkserver_preload([__name__, *methods, "torch._dynamo"])
    with _interrupts_ignored():  # the server keeps Ctrl-C ignored and so do the workers it forks
        multiprocessing.forkserver.ensure_running()  # returns at once, before the server's imports
    return context


def _run_in_workers(
    pending: list[SweepJob], out: Path, workers: int, finished, options: tuple[str, int | None, int, BudgetPolicy]
) -> None:
    """Run ``pending`` in ``workers`` processes (``options``: device, threads, cores, policy), reporting each to
    ``finished``; on Ctrl-C or an error the workers are stopped rather than waited for (their runs resume with
    the sweep)."""
    initargs = (loaded_recipes(), dict(os.environ))
    context = _worker_context()
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_worker_init, initargs=initargs)
    try:
        # spawned workers start during the submissions; forked ones too, but once the server has imported the
        # run code, and Ctrl-C must stop that wait
        spawned = context.get_start_method() == "spawn"
        with _interrupts_ignored() if spawned else contextlib.nullcontext():
            futures = {
                pool.submit(_run_job, job.config, str(out / job.folder), *options, job.recipe): job for job in pending
            }
        for future in as_completed(futures):
            finished(futures[future], future.result())
    except BaseException:
        processes = list((pool._processes or {}).values())  # the pool has no public handle on them
        pool.shutdown(wait=False, cancel_futures=True)
        for process in processes:
            process.terminate()
        raise
    pool.shutdown()


def _progress(total: int, done: int, outcomes: dict[str, dict[str, Any]], progress: bool):
    """The callback ``finished(job, outcome)`` that records each finished run in ``outcomes`` and shows it (a
    bar on a terminal, a line per run elsewhere, only failures without ``progress``); ``finished(None, None)``
    closes the bar."""
    terminal = sys.stderr.isatty()
    bar = tqdm(total=total, initial=done, desc="sweep", unit="run", disable=not (progress and terminal))
    count = [done]

    def finished(job: SweepJob | None, outcome: dict[str, Any] | None) -> None:
        if job is None:
            bar.close()
            return
        assert outcome is not None  # a finished job's
        outcomes[job.key] = outcome
        count[0] += 1
        if outcome["status"] != "done":
            tqdm.write(f"run {job.key} failed: {outcome['error']}")
        elif progress and not terminal:
            seconds = outcome.get("seconds")
            took = f" in {seconds:.1f}s" if isinstance(seconds, (int, float)) else ""
            print(f"[{count[0]}/{total}] {job.key} done{took}", flush=True)
        bar.update()

    return finished


def folder_rows(folder: Path) -> list[dict[str, Any]]:
    """The ``results.csv`` rows of every finished run in ``folder`` (itself, or the runs under it: a demo's);
    an auto-tune's candidates and an audit's runs are not the folder's runs."""
    rows = []
    for path in sorted(Path(folder).rglob("summary.json")):
        run_dir = path.parent
        if {"candidates", "audit"} & set(run_dir.relative_to(folder).parts):
            continue
        saved = RunDirectory(run_dir).read_config()
        if saved is None:  # not a run of `labeldp train` (a hashed run's)
            continue
        key = run_dir.name if run_dir == Path(folder) else str(run_dir.relative_to(folder))
        job = SweepJob(key, RunConfig.from_dict(saved))
        summary = RunDirectory(run_dir).read_summary()
        assert summary is not None  # its summary.json was just found
        rows.append(_row(job, run_dir, {"status": "done", **summary}))
    return rows


def write_results(rows: list[dict[str, Any]], path: Path) -> None:
    """Write a sweep's rows as CSV, in :data:`RESULT_COLUMNS`."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=RESULT_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)

    write_atomic(path, write)
