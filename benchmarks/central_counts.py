"""Central label counts against randomized response on a table: can noisy counts per public cell beat RR?

Randomized response is the best *local* mechanism for a binary label; a table run can spend its epsilon
centrally instead. Here every training row falls in one cell computed without its label, the positive
count of each cell is released once with discrete Laplace noise (``noisy_marginals`` with one feature:
a cell's size is public, so one replaced label moves one count by one), and a gradient boosting learns
each row's cell fraction as a soft label (every row twice, weighted by the fraction and its complement).
The candidates, all at the same epsilon, each label released once:

- ``rr``: :class:`LabelDPClassifier` (randomized response on every label, the channel inverted), the
  regularised gradient boosting of ``tabular.py``; ``lp-2st`` the same with ``stages=2``; ``counts`` with
  ``second_stage="counts"`` as well: the library's version of ``leaf-0.4-10``.
- ``kmeans-M``: cells of about M rows by k-means on the encoded public features, counts on every row.
- ``leaf-F-M``: two stages. A share F of the rows is released by RR and ``rr``'s model fitted on them;
  the other rows are cut into the leaves (at least M rows each) of a regression tree of that model's
  log-odds over the encoded features: regions of the inputs where the first model is nearly constant,
  computed from public inputs and the first release. Their counts are released; the final model learns
  the first rows' posteriors under the first model and the other rows' cell fractions.
- ``leaf3-F-G-M``: three stages: RR on a share F, counts per leaf of the first model's tree on a share G,
  then counts on the rest per leaf of a tree of the model of the first two stages.
- ``oracle-M``: the leaves of the same tree fitted on a non-private model's out-of-fold log-odds: the
  cells a perfect first stage would draw (a ceiling, not a private method).

``--no-noise`` drops the counts' noise (and draws RR at the given epsilon where a candidate uses it):
the cells' own ceiling. The noise is drawn from fresh OS entropy, as a private run draws it.

    python benchmarks/central_counts.py --data-dir ../shared/datasets [--task adult/income] [--epsilon 1]
        [--seeds 3] [--candidates rr leaf-0.3-10 ...]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.cluster import MiniBatchKMeans
from sklearn.compose import make_column_selector, make_column_transformer
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.impute import SimpleImputer
from sklearn.model_selection import cross_val_predict
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.tree import DecisionTreeRegressor
from tabular import REGULARISED, scores, tasks

from labeldp.boundary import PrivateLabels
from labeldp.estimators import LabelDPClassifier
from labeldp.mechanisms import randomized_response
from labeldp.mechanisms.label_marginals import noisy_marginals


def learner() -> HistGradientBoostingClassifier:
    return HistGradientBoostingClassifier(categorical_features="from_dtype", **REGULARISED)


def encoded(x: pd.DataFrame) -> np.ndarray:
    """Numbers standardised, categories one-hot (rare ones pooled): the cells' space, public."""
    categories = make_pipeline(
        SimpleImputer(strategy="most_frequent"),
        OneHotEncoder(handle_unknown="ignore", sparse_output=False, min_frequency=20),
    )
    numbers = make_pipeline(SimpleImputer(), StandardScaler())
    return make_column_transformer(
        (categories, make_column_selector(dtype_include="category")),
        (numbers, make_column_selector(dtype_include="number")),
    ).fit_transform(x)


def cell_fractions(y: np.ndarray, cells: np.ndarray, epsilon: float | None) -> np.ndarray:
    """Each row's cell's positive fraction from the (noisy) counts, clipped to [0, 1]."""
    num_cells = int(cells.max()) + 1
    if epsilon is None:
        counts = np.bincount(cells, weights=y, minlength=num_cells)
    else:
        counts = noisy_marginals(y, cells[:, None], [num_cells], 2, epsilon)[:, 1]
    return np.clip(counts / np.maximum(np.bincount(cells, minlength=num_cells), 1), 0.0, 1.0)[cells]


def fit_soft(x: pd.DataFrame, fraction: np.ndarray, seed: int) -> HistGradientBoostingClassifier:
    """Gradient boosting on soft labels: every row once as positive, once as negative, so weighted."""
    both = pd.concat([x, x], ignore_index=True)
    labels = np.r_[np.ones(len(x)), np.zeros(len(x))].astype(int)
    weights = np.r_[fraction, 1.0 - fraction]
    keep = weights > 0
    model = HistGradientBoostingClassifier(categorical_features="from_dtype", random_state=seed, **REGULARISED)
    return model.fit(both[keep], labels[keep], sample_weight=weights[keep])


def leaves(z: np.ndarray, target: np.ndarray, size: int, seed: int) -> np.ndarray:
    tree = DecisionTreeRegressor(min_samples_leaf=size, random_state=seed).fit(z, target)
    return np.unique(tree.apply(z), return_inverse=True)[1]


def log_odds(p: np.ndarray) -> np.ndarray:
    p = np.clip(p, 1e-3, 1 - 1e-3)
    return np.log(p / (1 - p))


def run(candidate: str, epsilon: float, noise: bool, data: tuple, z: np.ndarray, seed: int) -> np.ndarray:
    x, y, x_test, _ = data
    count_epsilon = epsilon if noise else None
    name, *settings = candidate.split("-")
    if candidate in ("rr", "lp-2st", "counts"):
        stages = 1 if candidate == "rr" else 2
        second = "counts" if candidate == "counts" else "rr-with-prior"
        model = LabelDPClassifier(learner(), epsilon=epsilon, stages=stages, second_stage=second, random_state=seed)
        return model.fit(x, PrivateLabels(y, [0, 1])).predict_proba(x_test)[:, 1]
    if name == "kmeans":
        size = int(settings[0])
        kmeans = MiniBatchKMeans(len(y) // size, random_state=seed, n_init=1, batch_size=4096, max_iter=50)
        fraction = cell_fractions(y, kmeans.fit(z).labels_, count_epsilon)
        return fit_soft(x, fraction, seed).predict_proba(x_test)[:, 1]
    if name == "oracle":
        score = cross_val_predict(learner(), x, y, cv=3, method="predict_proba")[:, 1]
        fraction = cell_fractions(y, leaves(z, log_odds(score), int(settings[0]), seed), count_epsilon)
        return fit_soft(x, fraction, seed).predict_proba(x_test)[:, 1]
    if name in ("leaf", "leaf3"):
        share, size = float(settings[0]), int(settings[-1])
        order = np.random.default_rng(seed).permutation(len(y))  # the stages' split: public
        first, second = np.sort(order[: int(share * len(y))]), np.sort(order[int(share * len(y)) :])
        if name == "leaf3":  # a third stage: the second's share of the rows, then the rest
            cut = int((share + float(settings[1])) * len(y))
            second, third = np.sort(order[int(share * len(y)) : cut]), np.sort(order[cut:])
        flipped = randomized_response(y[first], 2, epsilon)
        q = 1.0 / (1.0 + np.exp(epsilon))
        # the first model inverts RR's channel, as LabelDPClassifier does
        raw = learner().set_params(random_state=seed).fit(x.iloc[first], flipped).predict_proba(x)[:, 1]
        prior = np.clip((raw - q) / (1 - 2 * q), 1e-3, 1 - 1e-3)
        cells = leaves(z[second], log_odds(prior[second]), size, seed)
        fraction = cell_fractions(y[second], cells, count_epsilon)
        # the first rows' posterior of a positive given their released label, under the first model
        like_positive = np.where(flipped == 1, 1 - q, q)
        posterior = (
            prior[first] * like_positive / (prior[first] * like_positive + (1 - prior[first]) * (1 - like_positive))
        )
        both = pd.concat([x.iloc[second], x.iloc[first]], ignore_index=True)
        model = fit_soft(both, np.r_[fraction, posterior], seed)
        if name == "leaf":
            return model.predict_proba(x_test)[:, 1]
        # the third stage's cells come from the model of the first two
        cells = leaves(z[third], log_odds(model.predict_proba(x.iloc[third])[:, 1]), size, seed)
        more = cell_fractions(y[third], cells, count_epsilon)
        every = pd.concat([both, x.iloc[third]], ignore_index=True)
        return fit_soft(every, np.r_[fraction, posterior, more], seed).predict_proba(x_test)[:, 1]
    raise SystemExit(f"unknown candidate {candidate}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/datasets"))
    parser.add_argument("--task", default="adult/income")
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--no-noise", action="store_true", help="exact counts: the cells' own ceiling")
    parser.add_argument("--candidates", nargs="+", default=["rr", "lp-2st", "kmeans-5", "leaf-0.3-10", "oracle-5"])
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    data = tasks(args.data_dir)[args.task]
    z = encoded(data[0])
    for candidate in args.candidates:
        results, seconds = [], []
        for seed in range(args.seeds):
            start = time.perf_counter()
            results.append(scores(data[3], run(candidate, args.epsilon, not args.no_noise, data, z, seed)))
            seconds.append(time.perf_counter() - start)
        mean, spread, auc = np.mean(results, axis=0), np.std(results, axis=0), [r[1] for r in results]
        print(
            f"{args.task} {candidate:<12} epsilon {args.epsilon:g}{' (exact counts)' * args.no_noise}: "
            f"AUC {mean[1]:.4f} ± {spread[1]:.4f} ({' '.join(f'{a:.4f}' for a in auc)}), "
            f"accuracy {100 * mean[0]:.2f} ± {100 * spread[0]:.2f} %, log-loss {mean[2]:.4f}, "
            f"{np.mean(seconds):.0f} s",
            flush=True,
        )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
