"""The frozen baseline of a change that promises no behaviour change: every method of ``labeldp train`` on the
embedded digits and on a slice of UCI Adult (classes and a numeric label), each on fixed seeds and a fixed
insecure noise seed, and ``labeldp train --help``; then every file the runs wrote compared with another
checkout's (configurations, ledgers, summaries, metrics, released labels, the budget's ledgers).

Run it on the code before the change and on the code after (a ``git worktree`` of the old commit works:
``PYTHONPATH`` picks the checkout), then compare; ``differences: 0`` is the promise kept. About three
minutes of CPU a checkout.

A change that records the configuration another way (``config.json``'s layout) compares with ``--configs-as-read``:
each configuration written (``config.json``, a release's ``config``, a tune's ``base``) is then compared as this
checkout's ``RunConfig.from_dict`` reads it, written again.

Usage:
  python benchmarks/frozen_baseline.py run CHECKOUT OUT [--adult ../shared/datasets/adult/adult-train.csv.gz]
  python benchmarks/frozen_baseline.py compare BEFORE AFTER [--configs-as-read]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

#: what differs between two runs of the same code: times, and the folders' own paths and random release ids
TIMES = {"seconds", "elapsed", "wall_seconds", "started", "finished", "time", "timestamp", "recorded_at", "created"}
ADULT_ROWS = 6000
COMMON = ["--seed", "3", "--threads", "1", "--quiet"]
NOISE = ["--insecure-noise-seed", "7"]
DIGITS = ["--dataset", "digits", "--epochs", "2"]
ADULT = ["--dataset", "csv", "--label-column", "income", "--classes", "<=50K", ">50K", "--no-recipe"]
HOURS = ["--dataset", "csv", "--label-column", "hours-per-week", "--drop", "income", "--label-range", "1", "99"]


def runs() -> dict[str, list[str]]:
    """Each run's name and its ``labeldp train`` options (the table's path added by :func:`run`)."""
    found = {"digits-non-private": [*DIGITS, "--method", "non-private"]}
    for method in ("lp-1st", "lp-2st", "lp-mst", "alibi", "vlp", "dp-sgd"):
        found[f"digits-{method}"] = [*DIGITS, "--method", method, "--epsilon", "2", *NOISE]
    found["digits-pate"] = [*DIGITS, "--method", "pate", "--epsilon", "2", *NOISE]
    found["digits-pate"] += ["--teachers", "5", "--queries", "200", "--teacher-epochs", "2"]
    found["digits-mst-opts"] = [*DIGITS, "--method", "lp-mst", "--epsilon", "1", "--stages", "0.3", "0.3", "0.4"]
    found["digits-mst-opts"] += ["--temperature", "2", "--loss", "ce", "--consensus", "--first-release", "rr", *NOISE]
    found["digits-2st-cluster"] = [*DIGITS, "--method", "lp-2st", "--epsilon", "1", "--prior", "cluster"]
    found["digits-2st-cluster"] += ["--clusters", "20", "--combine-priors", "--no-reuse-labels", *NOISE]
    for method in ("lp-2st-counts", "marginals", "lp-2st"):
        training = [] if method == "marginals" else ["--epochs", "2", "--lr", "0.01"]
        found[f"adult-{method}"] = [*ADULT, "--method", method, "--epsilon", "1", *training, *NOISE]
    for method in ("rr-on-bins", "laplace-regression"):
        found[f"hours-{method}"] = [*HOURS, "--method", method, "--epsilon", "2", "--epochs", "2", "--lr", "0.01"]
        found[f"hours-{method}"] += ["--no-recipe", *NOISE]
    return found


def run(checkout: Path, out: Path, adult: Path) -> None:
    """Every run of :func:`runs` with ``checkout``'s code, into ``out`` (emptied first)."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    with gzip.open(adult, "rt") as source:
        (out / "adult.csv").write_text("".join(line for _, line in zip(range(ADULT_ROWS + 1), source)))
    env = {**os.environ, "PYTHONPATH": str(checkout / "src"), "OMP_NUM_THREADS": "1"}
    labeldp = [sys.executable, "-m", "labeldp", "train"]
    for name, options in runs().items():
        table = ["--table", str(out / "adult.csv")] if options[1] == "csv" else []
        command = [*labeldp, *options, *table, *COMMON, "--budget-dir", str(out / "budget"), "--out", str(out / name)]
        done = subprocess.run(command, env=env, capture_output=True, text=True)
        (out / f"{name}.log").write_text(done.stdout + done.stderr)
        print(f"{name}: {'ok' if done.returncode == 0 else 'FAILED, see its .log'}")
        if done.returncode != 0:
            with (out / "failed.txt").open("a") as failed:
                failed.write(f"{name}\n")
    help_text = subprocess.run([*labeldp, "--help"], env=env, capture_output=True, text=True, check=True).stdout
    (out / "train-help.txt").write_text(help_text)


def _normal(value, root: Path):
    if hasattr(value, "tolist"):  # a tensor or an array: compared by value
        return _normal(value.tolist(), root)
    if isinstance(value, tuple):
        return _normal(list(value), root)
    if isinstance(value, dict):
        return {key: _normal(item, root) for key, item in value.items() if key not in TIMES}
    if isinstance(value, list):
        return [_normal(item, root) for item in value]
    if isinstance(value, str):
        return re.sub(r"#[0-9a-f]{12}", "#ID", value.replace(str(root), "ROOT"))
    return value


def _as_read(data: dict) -> dict:
    from labeldp.config.run_config import RunConfig

    return RunConfig.from_dict(data).to_dict()


def _read(path: Path, root: Path, as_read: bool = False):
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        if as_read and path.name == "config.json":
            data = _as_read(data)
        if as_read and path.name == "auto_tune.json" and data.get("base") is not None:
            data["base"] = _as_read(data["base"])
        return _normal(data, root)
    if path.suffix == ".jsonl":
        return [_normal(json.loads(line), root) for line in path.read_text().splitlines() if line.strip()]
    if path.suffix == ".npz":
        with np.load(path, allow_pickle=False) as arrays:
            found = {key: _normal(arrays[key].tolist(), root) for key in arrays.files}
        if as_read and "config" in found:
            found["config"] = _as_read(json.loads(found["config"]))
        return found
    if path.suffix == ".pt":  # the model and the checkpoints (their history holds each epoch's seconds)
        import torch

        return _normal(torch.load(path, weights_only=False), root)  # written by the runs above
    data = path.read_bytes()  # the help, the release ids; the people files and the preprocessor byte for byte
    try:
        return _normal(data.decode(), root)
    except UnicodeDecodeError:
        return data


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.is_file() else []


#: what is no result: the logs (their lines hold times) and the lock files
SKIPPED = {".log", ".lock"}


def compare(before: Path, after: Path, as_read: bool = False) -> int:
    """The files that one of ``before`` and ``after`` lacks or that they hold otherwise (the configurations as
    read with ``as_read``), and the runs that failed in either, printed; their number."""
    names = {path.relative_to(folder) for folder in (before, after) for path in folder.rglob("*") if path.is_file()}
    names = sorted(name for name in names if name.suffix not in SKIPPED)
    different = 0
    for name in names:
        one, other = before / name, after / name
        if not (one.is_file() and other.is_file()) or _read(one, before, as_read) != _read(other, after, as_read):
            different += 1
            print(f"differs: {name}")
    failed = [f"{folder}: {name}" for folder in (before, after) for name in _lines(folder / "failed.txt")]
    for run in failed:
        print(f"failed: {run}")
    print(f"{len(names)} files compared, differences: {different}, runs failed: {len(failed)}")
    return different + len(failed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    running = commands.add_parser("run")
    running.add_argument("checkout", type=Path)
    running.add_argument("out", type=Path)
    running.add_argument("--adult", type=Path, default=Path("../shared/datasets/adult/adult-train.csv.gz"))
    comparing = commands.add_parser("compare")
    comparing.add_argument("before", type=Path)
    comparing.add_argument("after", type=Path)
    comparing.add_argument("--configs-as-read", action="store_true")
    args = parser.parse_args()
    if args.command == "run":
        run(args.checkout.resolve(), args.out.resolve(), args.adult)
    else:
        sys.exit(1 if compare(args.before, args.after, args.configs_as_read) else 0)


if __name__ == "__main__":
    main()
