"""Labels per second of RR and RR-with-prior, against a straightforward per-example implementation.

Both run in this process on the same machine; the per-example baseline (a Python loop, numpy per
row) runs on a smaller sample and is reported per label. Usage: python benchmarks/mechanisms_speed.py
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from labeldp.mechanisms import randomized_response, rr_with_prior


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


def rate(function, count: int, repeats: int) -> float:
    best = math.inf
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return count / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=10**6, help="labels per vectorised call (default 10^6)")
    parser.add_argument("--n-loop", type=int, default=20000, help="labels for the per-example baseline")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
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
            fast = rate(ours, args.n, args.repeats)
            slow = rate(loop, args.n_loop, 1)
            rows.append((name, num_classes, fast, slow, fast / slow))
            print(f"  measured {name} K={num_classes}", flush=True)
    print(
        f"\nLabels per second, epsilon={args.epsilon:g}, one process (numpy is single-threaded here); "
        f"ours on {args.n:,} labels, per-example loop on {args.n_loop:,}:\n"
    )
    print(f"{'mechanism':<22}{'K':>5}{'ours (labels/s)':>18}{'per-example (labels/s)':>25}{'speed-up':>11}")
    for name, num_classes, fast, slow, ratio in rows:
        print(f"{name:<22}{num_classes:>5}{fast:>18,.0f}{slow:>25,.0f}{ratio:>10,.0f}x")


if __name__ == "__main__":
    main()
