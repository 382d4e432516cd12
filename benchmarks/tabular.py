"""Label DP on the tables its users bring: UCI Adult (``income``) and the Hillstrom e-mail campaign
(``visit`` 14.7 % positive, ``conversion`` 0.9 % positive, the other outcomes dropped), at several
epsilons and without privacy.

Rows: ``baseline`` is the plain recipe (scikit-learn's histogram gradient boosting with its defaults
trained on labels flipped by randomized response); ``labeldp`` is :class:`LabelDPClassifier` with a
regularised gradient boosting, whose probabilities are the clean labels' (the RR
channel inverted); ``labeldp-tuned`` (with ``--tuned``) releases the labels once and lets
``GridSearchCV`` choose the trees' size on the release, scored by ``released_log_likelihood`` (free:
post-processing); ``marginals`` is :class:`LabelDPLogisticRegression`, a logistic regression over
the features' bins fitted from noisy label marginals (noise on sums over rows, not on each label);
``non-private`` is the baseline's learner on the true labels, and ``marginals`` without an epsilon the
marginals' model on the exact counts (its ceiling). Each cell is the mean
and spread over seeds of accuracy, ROC AUC and log-loss on the public test rows, with the seconds of a
run (release and fit). The noise is drawn from fresh OS entropy, as a private run draws it.

    python benchmarks/tabular.py --data-dir ../shared/datasets [--epsilons 0.5 1 2 4 8] [--seeds 3] [--tuned]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.special import softmax
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.metrics import accuracy_score, log_loss, roc_auc_score
from sklearn.model_selection import GridSearchCV

from labeldp.boundary import PrivateLabels, privatize
from labeldp.estimators import LabelDPClassifier, ReleasedLabels, released_log_likelihood
from labeldp.estimators.logistic import DEFAULT_L2, LabelDPLogisticRegression, fit_from_marginals
from labeldp.estimators.public_bins import PublicBins, bin_indicators
from labeldp.mechanisms import randomized_response
from labeldp.mechanisms.label_marginals import marginal_counts
from labeldp.training.fit_trees import TREE_SETTINGS

#: the regularised learner: smaller trees, more leaves' support, a slower rate, early stopping on the
#: released labels' log-loss (a proper score for them); chosen on Adult at epsilon 1 with released labels
REGULARISED = TREE_SETTINGS  # LabelDPClassifier's default trees
#: what ``labeldp-tuned`` searches, 3-fold on the released labels
TUNED_GRID = {"estimator__min_samples_leaf": [40, 200, 800], "estimator__max_leaf_nodes": [7, 15, 31]}


def _categorical(frame: pd.DataFrame, reference: pd.DataFrame) -> pd.DataFrame:
    frame = frame.copy()
    for column in frame.columns:
        if not pd.api.types.is_numeric_dtype(reference[column]):
            frame[column] = frame[column].astype(pd.CategoricalDtype(sorted(reference[column].dropna().unique())))
    return frame


def tasks(data_dir: Path) -> dict[str, tuple]:
    adult_train = pd.read_csv(data_dir / "adult" / "adult-train.csv.gz")
    adult_test = pd.read_csv(data_dir / "adult" / "adult-test.csv.gz")
    found = {
        "adult/income": (
            adult_train.drop(columns="income"),
            (adult_train["income"] == ">50K").to_numpy(int),
            adult_test.drop(columns="income"),
            (adult_test["income"] == ">50K").to_numpy(int),
        )
    }
    hillstrom = pd.read_csv(data_dir / "hillstrom" / "hillstrom.csv.gz")
    order = np.random.default_rng(0).permutation(len(hillstrom))  # a split by position: public
    test, train = hillstrom.iloc[order[:16000]], hillstrom.iloc[order[16000:]]
    features = [c for c in hillstrom.columns if c not in ("visit", "conversion", "spend")]
    for label in ("visit", "conversion"):
        found[f"hillstrom/{label}"] = (
            train[features],
            train[label].to_numpy(int),
            test[features],
            test[label].to_numpy(int),
        )
    return {name: (_categorical(x, x), y, _categorical(xt, x), yt) for name, (x, y, xt, yt) in found.items()}


def scores(y: np.ndarray, p: np.ndarray) -> tuple[float, float, float]:
    return accuracy_score(y, p > 0.5), roc_auc_score(y, p), log_loss(y, np.clip(p, 1e-6, 1 - 1e-6))


def run(method: str, epsilon: float | None, x, y, x_test, seed: int) -> np.ndarray:
    if method == "non-private":
        return (
            HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed)
            .fit(x, y)
            .predict_proba(x_test)[:, 1]
        )
    if method == "baseline":
        flipped = randomized_response(y, 2, epsilon)
        return (
            HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed)
            .fit(x, flipped)
            .predict_proba(x_test)[:, 1]
        )
    if method == "marginals" and epsilon is None:  # the same model on the exact marginals: its ceiling
        bins = PublicBins().fit(x)
        codes, sizes = bins.transform(x), bins.bins_per_feature_
        coef, intercept = fit_from_marginals(
            codes, sizes, marginal_counts(y, codes, sizes, 2).astype(float), DEFAULT_L2
        )
        return softmax(bin_indicators(bins.transform(x_test), sizes) @ coef + intercept, axis=1)[:, 1]
    if method == "marginals":
        return LabelDPLogisticRegression(epsilon=epsilon).fit(x, PrivateLabels(y, [0, 1])).predict_proba(x_test)[:, 1]
    learner = HistGradientBoostingClassifier(categorical_features="from_dtype", **REGULARISED)
    if method == "labeldp-tuned":
        release = ReleasedLabels.from_release(privatize(y, classes=[0, 1], epsilon=epsilon))
        search = GridSearchCV(
            LabelDPClassifier(learner, random_state=seed), TUNED_GRID, scoring=released_log_likelihood, cv=3
        )
        return search.fit(x, release).predict_proba(x_test)[:, 1]
    model = LabelDPClassifier(learner, epsilon=epsilon, random_state=seed).fit(x, PrivateLabels(y, [0, 1]))
    return model.predict_proba(x_test)[:, 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/datasets"))
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1, 2, 4, 8])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", help="a subset of adult/income, hillstrom/visit, hillstrom/conversion")
    parser.add_argument("--tuned", action="store_true", help="also the labeldp-tuned row (about 10x the time)")
    parser.add_argument("--methods", nargs="+", help="a subset of baseline, labeldp, marginals, labeldp-tuned")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'task':<22} {'method':<13} {'epsilon':>7}  {'accuracy %':>14}  {'AUC':>15}  {'log-loss':>15}  seconds")
    for name, (x, y, x_test, y_test) in tasks(args.data_dir).items():
        if args.tasks and name not in args.tasks:
            continue
        methods = ("baseline", "labeldp", "marginals") + (("labeldp-tuned",) if args.tuned else ())
        methods = [m for m in methods if not args.methods or m in args.methods]
        plan = (
            [("non-private", None)]
            + [("marginals", None)] * ("marginals" in methods)
            + [(m, e) for e in args.epsilons for m in methods]
        )
        for method, epsilon in plan:
            results, seconds = [], []
            for seed in range(args.seeds):
                start = time.perf_counter()
                results.append(scores(y_test, run(method, epsilon, x, y, x_test, seed)))
                seconds.append(time.perf_counter() - start)
            mean, spread = np.mean(results, axis=0), np.std(results, axis=0)
            cells = [
                f"{100 * mean[0]:6.2f} ± {100 * spread[0]:4.2f}",
                f"{mean[1]:.4f} ± {spread[1]:.4f}",
                f"{mean[2]:.4f} ± {spread[2]:.4f}",
            ]
            print(
                f"{name:<22} {method:<13} {'-' if epsilon is None else f'{epsilon:g}':>7}  {cells[0]:>14}  "
                f"{cells[1]:>15}  {cells[2]:>15}  {np.mean(seconds):7.1f}",
                flush=True,
            )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
