"""Where RR-with-prior's time goes: CPU nanoseconds per label of each of its phases, on one thread.

Runs the phases of ``labeldp.mechanisms.rr_with_prior`` one after another, block by block as it does
(its internals, so the figures follow the code), on 10^6 labels with peaked priors (Dirichlet 0.3,
as in ``mechanisms_speed.py``); each phase's median over --repeats runs. "generator alone" replays
the very calls the draws make to the numpy generator (the same sizes and ranges) without anything
around them: the floor that no rearrangement of the rest can go below on the calling thread.
Usage: python benchmarks/rr_with_prior_phases.py [--classes 10 100] [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

from labeldp._validation import check_labels, check_priors
from labeldp.mechanisms import _top_k, rr


def phases(num_classes: int, n: int, epsilon: float, repeats: int) -> dict[str, float]:
    """CPU ns per label of each phase (median of ``repeats``), on the calling thread alone."""
    rng = np.random.default_rng(0)
    labels = rng.integers(0, num_classes, n)
    priors = rng.dirichlet(np.full(num_classes, 0.3), size=n)
    weights = rr.keep_probability(epsilon, np.arange(1, num_classes + 1))
    change = rr.change_probability(epsilon, np.arange(num_classes + 1))
    rows = rr._chunk_rows(num_classes)
    seconds: dict[str, list[float]] = {}
    for repeat in range(repeats):
        spent: dict[str, float] = {}
        clock = [time.process_time()]

        def done(name: str) -> None:
            now = time.process_time()
            spent[name] = spent.get(name, 0.0) + now - clock[0]
            clock[0] = now

        check_priors(priors)
        check_labels(labels, num_classes)
        done("checks (priors, labels)")
        noisy, ks, blocks = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64), []
        gen = np.random.default_rng(repeat)
        for start in range(0, n, rows):
            block = priors[start : start + rows]
            m = len(block)
            transposed = np.array(block.T, order="C") if num_classes <= _top_k._NETWORK_CLASSES else None
            done("transposing copy")
            column, kth = _top_k._descending_columns(block, transposed)
            done("sort (network, or np.sort above K = 32)")
            k = _top_k._choose_k(column, weights, m)
            done("scan for k")
            threshold = kth(k)
            k = k.astype(np.int64)
            member = transposed >= threshold if transposed is not None else (block >= threshold[:, None]).T
            if np.count_nonzero(member) != k.sum():
                member = _top_k.top_k(block, weights)[1]
            done("top-k sets")
            prepared = rr._Block(labels, change, ks, start, start + m, (k, member))
            done("label-dependent preparation")
            prepared.release(gen, noisy[start : start + m])
            done("draws and releases")
            blocks.append(prepared)
        calls, record = [], np.random.default_rng(repeat)
        for prepared in blocks:  # the draws' calls to the generator, recorded (untimed) for the replay below
            for first in range(0, prepared.y.size, rr._CHUNK_ROWS):
                last = min(first + rr._CHUNK_ROWS, prepared.y.size)
                changed = rr._changed(record, prepared.probability[first:last]) | prepared.outside[first:last]
                ranges = prepared.candidates[first:last][np.flatnonzero(changed)]
                calls.append((last - first, ranges))
                if ranges.size:
                    record.integers(0, ranges)
        replay = np.random.default_rng(repeat)
        clock[0] = time.process_time()
        for size, ranges in calls:  # the same calls, so the same numbers, with nothing around them
            replay.random(size)
            if ranges.size:
                replay.integers(0, ranges)
        done("generator alone (floor)")
        for name, value in spent.items():
            seconds.setdefault(name, []).append(value)
    return {name: statistics.median(values) / n * 1e9 for name, values in seconds.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--classes", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--n", type=int, default=10**6)
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    print(f"load average before: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")
    for num_classes in args.classes:
        figures = phases(num_classes, args.n, args.epsilon, args.repeats)
        floor = figures.pop("generator alone (floor)")
        print(f"\nK = {num_classes}, epsilon {args.epsilon:g}, CPU ns per label (median of {args.repeats}):")
        for name, value in figures.items():
            print(f"  {name:<42}{value:8.1f}")
        total = sum(figures.values())
        print(f"  {'total':<42}{total:8.1f}   ({1e3 / total:.2f} M labels per CPU second)")
        print(f"  {'of the draws, the generator alone':<42}{floor:8.1f}")
    print(f"\nload average after: {', '.join(f'{value:.2f}' for value in os.getloadavg())}")


if __name__ == "__main__":
    main()
