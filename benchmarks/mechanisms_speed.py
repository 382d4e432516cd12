"""Labels per second of RR and RR-with-prior, against a straightforward per-example implementation.

Both run in this process on the same machine; the per-example baseline (a Python loop, numpy per
row) runs on a smaller sample and is reported per label. Ours is the median of --repeats calls (and
the best of them); the machine's load average is printed before and after, since a shared machine's
other jobs slow every figure down. RR-with-prior computes its top-k sets on the cores no other
process keeps busy (labeldp's thread policy): the threads it used are printed with it.

``--previous REV`` times the package at an earlier git revision against ours (its whole source tree, so
the checks and the top-k sets it uses are its own), calls alternating in this process (CPU time, which
a busy machine disturbs less than the clock), and checks that both release the same labels for the
same seed. ``--previous FILE`` (a .py file) times an earlier rr.py alone, on this tree's other modules.
Usage: python benchmarks/mechanisms_speed.py [--previous HEAD~1]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import io
import math
import os
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

import numpy as np

from labeldp.mechanisms import randomized_response, rr_with_prior
from labeldp.mechanisms._top_k import worker_threads


def per_example_rr(labels: np.ndarray, num_classes: int, epsilon: float, rng: np.random.Generator) -> np.ndarray:
    keep = math.exp(epsilon) / (math.exp(epsilon) + num_classes - 1)
    out = np.empty_like(labels)
    for i, y in enumerate(labels):
        out[i] = y if rng.random() < keep else (y + rng.integers(1, num_classes)) % num_classes
    return out


def per_example_rr_with_prior(
    labels: np.ndarray, priors: np.ndarray, epsilon: float, rng: np.random.Generator
) -> np.ndarray:
    num_classes = priors.shape[1]
    weights = math.exp(epsilon) / (math.exp(epsilon) + np.arange(num_classes))
    out = np.empty_like(labels)
    for i, (y, prior) in enumerate(zip(labels, priors)):
        order = np.argsort(-prior, kind="stable")
        k = int(np.argmax(weights * np.cumsum(prior[order]))) + 1
        top = order[:k]
        if y in top and rng.random() < weights[k - 1]:
            out[i] = y
        else:
            others = top[top != y]
            out[i] = others[rng.integers(len(others))]
    return out


def rates(function, count: int, repeats: int) -> tuple[float, float, float]:
    """Labels per second: the median and the best of ``repeats`` calls, and the median per CPU second
    (this process's, all its threads together)."""
    seconds, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        function()
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return count / statistics.median(seconds), count / min(seconds), count / statistics.median(cpu)


def load() -> str:
    return "load average " + ", ".join(f"{value:.2f}" for value in os.getloadavg())


def previous_rr(previous: str):
    """rr.py at a git revision, with the rest of the package at that revision (imported under another
    name), or an rr.py file on this tree's other modules."""
    if previous.endswith(".py"):
        spec = importlib.util.spec_from_file_location("rr_before", previous)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    root = Path(__file__).resolve().parent.parent
    tree = subprocess.run(["git", "archive", previous, "src/labeldp"], cwd=root, check=True, capture_output=True)
    folder = Path(tempfile.mkdtemp(prefix="labeldp-previous-"))
    with tarfile.open(fileobj=io.BytesIO(tree.stdout)) as archive:
        archive.extractall(folder, filter="data")
    package = folder / "labeldp_previous"
    (folder / "src" / "labeldp").rename(package)
    for path in package.rglob("*.py"):  # every import of labeldp, and every module name in a string
        path.write_text(re.sub(r"\blabeldp\b", "labeldp_previous", path.read_text()))
    sys.path.insert(0, str(folder))
    return importlib.import_module("labeldp_previous.mechanisms.rr")


def compare_previous(path: str, n: int, epsilon: float, repeats: int) -> None:
    """CPU seconds of an earlier rr_with_prior (see :func:`previous_rr`) against ours, calls alternating;
    same releases."""
    previous = previous_rr(path)
    rng = np.random.default_rng(1)
    print(f"\nrr_with_prior against {path}, CPU ms per call (median of {repeats}, alternating; {load()}):")
    for num_classes in (10, 100):
        labels = rng.integers(0, num_classes, n)
        priors = rng.dirichlet(np.full(num_classes, 0.3), size=n)
        seconds: dict[str, list[float]] = {"previous": [], "ours": []}
        same = True
        for repeat in range(repeats):
            for name, function in (("previous", previous.rr_with_prior), ("ours", rr_with_prior)):
                start = time.process_time()
                released = function(labels, priors, epsilon, np.random.default_rng(repeat))
                seconds[name].append(time.process_time() - start)
                if name == "previous":
                    before = released
            same &= all(np.array_equal(a, b) for a, b in zip(before, released))
        old, new = (statistics.median(seconds[name]) for name in ("previous", "ours"))
        print(
            f"  K={num_classes:<4} previous {old * 1e3:7.0f}   ours {new * 1e3:7.0f}   {old / new:.2f}x   "
            f"same releases for the same seed: {same}"
        )
    print(f"  ({load()})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10**6, help="labels per vectorised call (default 10^6)")
    parser.add_argument("--n-loop", type=int, default=20000, help="labels for the per-example baseline")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--previous", help="a git revision (or an rr.py file) to time rr_with_prior against")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    before = load()
    for num_classes in (10, 100):
        labels = rng.integers(0, num_classes, args.n)
        priors = rng.dirichlet(np.full(num_classes, 0.3), size=args.n)  # peaked priors, as a model gives
        small = slice(0, args.n_loop)
        for name, ours, loop in (
            (
                "randomized_response",
                lambda: randomized_response(labels, num_classes, args.epsilon, rng),
                lambda: per_example_rr(labels[small], num_classes, args.epsilon, rng),
            ),
            (
                "rr_with_prior",
                lambda: rr_with_prior(labels, priors, args.epsilon, rng),
                lambda: per_example_rr_with_prior(labels[small], priors[small], args.epsilon, rng),
            ),
        ):
            fast, best, per_cpu = rates(ours, args.n, args.repeats)
            slow = rates(loop, args.n_loop, 1)[0]
            threads = worker_threads(args.n * num_classes) if name == "rr_with_prior" else 1
            rows.append((name, num_classes, fast, best, per_cpu, slow, threads))
            print(f"  measured {name} K={num_classes} ({load()})", flush=True)
    print(
        f"\nLabels per second, epsilon={args.epsilon:g}, one process; ours on {args.n:,} labels (median and best "
        f"of {args.repeats}), per-example loop on {args.n_loop:,}; {before} before, {load()} after:\n"
    )
    print(
        f"{'mechanism':<22}{'K':>5}{'ours (labels/s)':>18}{'best (labels/s)':>18}{'per CPU s':>14}{'per-example':>14}"
        f"{'speed-up':>10}{'threads':>9}"
    )
    for name, num_classes, fast, best, per_cpu, slow, threads in rows:
        print(
            f"{name:<22}{num_classes:>5}{fast:>18,.0f}{best:>18,.0f}{per_cpu:>14,.0f}{slow:>14,.0f}"
            f"{fast / slow:>9,.0f}x{threads:>9}"
        )
    if args.previous:
        compare_previous(args.previous, args.n, args.epsilon, args.repeats)


if __name__ == "__main__":
    main()
