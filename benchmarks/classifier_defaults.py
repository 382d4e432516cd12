"""LabelDPClassifier's defaults against the earlier ones, paired on the same release of each seed's labels.

``earlier``: scikit-learn's gradient boosting with its own settings, the randomized response channel inverted
and no round of posterior weighting; ``now``: ``LabelDPClassifier()`` (small, regularised trees and one round).
Each seed draws one release (a fixed insecure noise seed, so that both fit the same release: a paired
difference) on UCI Adult and the Hillstrom tasks of ``tabular.py``; test AUC and log-loss, mean and spread.

    python benchmarks/classifier_defaults.py --data-dir ../shared/datasets [--epsilon 1] [--seeds 8]
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from tabular import scores, tasks

from labeldp.boundary import PrivateLabels
from labeldp.errors import InsecureNoiseWarning
from labeldp.estimators import LabelDPClassifier


def fitted(name: str, epsilon: float, seed: int) -> LabelDPClassifier:
    if name == "now":
        return LabelDPClassifier(epsilon=epsilon, random_state=seed, insecure_noise_seed=seed)
    earlier = HistGradientBoostingClassifier(categorical_features="from_dtype")
    return LabelDPClassifier(earlier, epsilon=epsilon, em_iterations=0, random_state=seed, insecure_noise_seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/datasets"))
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    warnings.simplefilter("ignore", InsecureNoiseWarning)
    print(f"load average {os.getloadavg()[0]:.2f}; epsilon {args.epsilon:g}; {args.seeds} paired releases")
    for task, (x, y, x_test, y_test) in tasks(args.data_dir).items():
        found: dict[str, list[tuple[float, float, float]]] = {}
        for seed in range(args.seeds):
            for name in ("earlier", "now"):
                started = time.perf_counter()
                model = fitted(name, args.epsilon, seed).fit(x, PrivateLabels(y, [0, 1]))
                _, auc, loss = scores(y_test, model.predict_proba(x_test)[:, 1])
                found.setdefault(name, []).append((auc, loss, time.perf_counter() - started))
        earlier, now = np.array(found["earlier"]), np.array(found["now"])
        gain = now[:, 0] - earlier[:, 0]
        for name, rows in (("earlier", earlier), ("now", now)):
            print(
                f"{task:20s} {name:8s} AUC {rows[:, 0].mean():.4f} ± {rows[:, 0].std(ddof=1):.4f}  "
                f"log-loss {rows[:, 1].mean():.4f}  {np.median(rows[:, 2]):.1f} s"
            )
        ahead = int((gain > 0).sum())
        print(f"{task:20s} paired AUC difference {gain.mean():+.4f} ± {gain.std(ddof=1):.4f}, ahead in {ahead}")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
