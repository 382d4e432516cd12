"""How much of a binary label randomized response leaves, and what a learner could do with that much.

A label flipped with probability q = 1 / (1 + e^epsilon) is Bernoulli(r), r = q + (1 - 2q) p, when the
clean label is Bernoulli(p). Per row, the Fisher information it carries about the clean log-odds is
(1 - 2q)^2 (p (1 - p))^2 / (r (1 - r)), against p (1 - p) for the clean label. Their ratio is
(1 - 2q)^2 at p = 1/2 and falls towards 0 for confident rows. Averaged with weights p (1 - p), where
a model has most to learn, the ratio is the share f of clean rows that RR's labels are worth. The
yardstick is the same gradient boosting trained on f n random rows with their clean labels: what a
learner could reach with that much information, without noise to handle (p comes from out-of-fold
predictions on the clean labels; a measurement, not a private method).

    python benchmarks/rr_information.py --data-dir ../shared/datasets [--task adult/income] [--epsilon 1]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.model_selection import cross_val_predict
from tabular import scores, tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/datasets"))
    parser.add_argument("--task", default="adult/income")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    x, y, x_test, y_test = tasks(args.data_dir)[args.task]
    learner = HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=0)
    p = np.clip(cross_val_predict(learner, x, y, cv=5, method="predict_proba")[:, 1], 1e-4, 1 - 1e-4)
    q = 1.0 / (1.0 + np.exp(args.epsilon))
    r = q + (1 - 2 * q) * p
    ratio = (1 - 2 * q) ** 2 * p * (1 - p) / (r * (1 - r))
    share = float(np.average(ratio, weights=p * (1 - p)))
    rows = int(share * len(y))
    print(
        f"{args.task} at epsilon {args.epsilon:g}: (1 - 2q)^2 = {(1 - 2 * q) ** 2:.3f}, mean ratio {ratio.mean():.3f}, "
        f"information-weighted share {share:.3f} = {rows} of {len(y)} rows"
    )
    results = []
    for repeat in range(args.repeats):
        chosen = np.random.default_rng(repeat).choice(len(y), rows, replace=False)
        model = HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=repeat)
        results.append(scores(y_test, model.fit(x.iloc[chosen], y[chosen]).predict_proba(x_test)[:, 1]))
    mean, spread = np.mean(results, axis=0), np.std(results, axis=0)
    print(
        f"yardstick over {args.repeats} draws of {rows} clean rows: "
        f"accuracy {100 * mean[0]:.2f} ± {100 * spread[0]:.2f} %, "
        f"AUC {mean[1]:.4f} ± {spread[1]:.4f}, log-loss {mean[2]:.4f} ± {spread[2]:.4f}"
    )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
