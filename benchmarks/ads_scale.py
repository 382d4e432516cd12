"""Label DP for an ads table at scale: hashed sparse features, rare conversions, four private routes.

The data are :mod:`labeldp.data.synthetic_ads` tables (a ground-truth logistic model over Zipf
categoricals, base rate 2 %, about 5 rows per user), hashed into 7 slots (advertiser, campaign, site,
device, hour, advertiser x site, campaign x device; 1.6 M buckets) by :mod:`labeldp.data.hashing`,
streamed from Parquet block by block. Routes, each at every epsilon:

- ``rr-lr``   (a) randomized response on every label, logistic regression on the buckets with the
  forward loss (-log sum_y p(y | x) Pr[z | y]), trained out of core;
- ``rr-fm``   (b) the same labels, a factorization machine (d = 8);
- ``counts-lo`` (c) noisy label counts of every bucket (one release, discrete Laplace calibrated to the
  exact L1 sensitivity), the naive-Bayes-like log-odds model fitted by post-processing;
- ``counts-lr`` (c) the same release, the logistic regression whose likelihood reads the counts,
  warm-started from ``counts-lo``;
- ``source-lr`` (d) labels from a noisy source that flips each label with rate 1 / (1 + e^epsilon)
  (``ReleasedLabels.from_noisy_source``; the flips are simulated through the boundary), logistic
  regression with the forward loss. For two classes this channel is randomized response itself, so
  (d) matches (a) in distribution; it is run at the row level only (a source's reports are not
  bounded per user: its ledger composes a user's reports).
- ``non-private``: LR and FM on the true labels (``release_true_labels``: the ledger says infinite).

Metrics, on a public test table of the same model (other users): AUC, log-loss, NE (normalized
entropy: the log-loss over the entropy of the test set's base rate; 1 is the base rate's
log-loss) and RLL (the log-loss over the non-private LR's at the same number of rows; 1 is
non-private). Privacy units: ``--units 0`` is the row level (each row its own unit); ``m`` > 0 keeps
at most m rows per user (``bound_contributions``), the user's epsilon is the one printed (each row's
RR epsilon is epsilon / c, the counts' noise covers c rows). The training settings were chosen on the
non-private LR and FM at 10^6 rows and are fixed for every route, but for two public functions of the
release: the penalty is divided by (2p - 1)^2 under randomized response keeping a label with
probability p (the information a label keeps), and every model's intercept is calibrated after
training so that its mean prediction over the training rows is the base rate estimated from the
release (RR's released positive share through its channel; the counts' positives). Noise is fresh OS entropy: the
figures change a little from one run to the next.

The routes are composed from :mod:`labeldp.ads.run_pieces`, the pieces of ``labeldp hashed train``
(:func:`labeldp.ads.fit_hashed`), with its settings (:class:`labeldp.config.hashed_config.HashedConfig`'s
defaults): the benchmark scores what a user's run trains.

``--speed N`` measures, on a table of N rows, each phase in a fresh process (its own peak RSS):
generation, reading, hashing, the RR release of the label column end to end (``privatize_table``),
the counts release end to end, one training epoch of LR and FM, prediction.

    PYTHONPATH=src python benchmarks/ads_scale.py --rows 100000 1000000 --png /tmp/ads_rll.png
    PYTHONPATH=src python benchmarks/ads_scale.py --speed 10000000
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import log_loss, roc_auc_score

from labeldp.accounting import PrivacyLedger
from labeldp.ads.run_pieces import HashedTable, fit_counts, release_counts, train_on_channel, unit_members
from labeldp.boundary import (
    PrivateLabels,
    privatize_table,
    release_external_labels,
    release_hashed_counts,
    release_randomized_response,
    release_true_labels,
)
from labeldp.config.hashed_config import HashedConfig
from labeldp.data.hashed_table import (
    PositionTargets,
    labelled_blocks,
    read_column,
    read_private_labels,
    released_blocks,
)
from labeldp.data.hashing import HashSpec, Slot, hashed_blocks
from labeldp.data.synthetic_ads import AdsSpec, write_ads_table
from labeldp.mechanisms import flip_channel
from labeldp.models.sparse import HashedFM, HashedLogistic
from labeldp.randomness import NoiseSource
from labeldp.training.from_counts import CountStatistics
from labeldp.training.out_of_core import SparseTrainConfig, forward_loss, predict_sparse, train_sparse

SLOTS = (("advertiser", 12), ("campaign", 15), ("site", 18), ("device", 6), ("hour", 6))
CROSSES = ((("advertiser", "site"), 20), (("campaign", "device"), 17))
SPEC = HashSpec(tuple(Slot(columns, bits) for columns, bits in SLOTS + CROSSES))
BLOCK_ROWS = 1 << 18
NOISE = NoiseSource()


def load() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg())


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def table(folder: Path, rows: int, part: str) -> Path:
    path = folder / f"{part}-{rows}.parquet"
    if not path.exists():
        write_ads_table(path.with_suffix(".tmp"), rows, AdsSpec(), part, BLOCK_ROWS).rename(path)
    return path


def config(m: int = 0) -> HashedConfig:
    """The ads route's settings (labeldp.config.hashed_config's defaults), at most m rows per user (0: row level)."""
    units = {"unit_column": "user_id", "max_rows_per_unit": m} if m else {}
    return HashedConfig(block_rows=BLOCK_ROWS, **units)


class Bench:
    """One training table, its test table and the public facts every route shares."""

    def __init__(self, folder: Path, rows: int, test_rows: int, models=("lr", "fm")):
        self.models = tuple(models)
        self.rows, self.train, self.test = rows, table(folder, rows, "train"), table(folder, test_rows, "test")
        self.table = HashedTable(self.train, SPEC, BLOCK_ROWS)
        self.labels = read_private_labels(self.train, "converted", [0, 1])
        self.y_test = read_column(self.test, "converted").astype(np.int64)  # public test labels (synthetic)
        rate = self.y_test.mean()
        self.entropy = -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))
        self.reference = None
        self.table.sizes  # noqa: B018 (counted once, before any route is timed)

    def evaluate(self, model) -> dict:
        positions, probability = predict_sparse(model, hashed_blocks(self.test, SPEC, BLOCK_ROWS))
        labels = self.y_test[positions]
        loss = log_loss(labels, np.clip(probability, 1e-7, 1 - 1e-7))
        reference = self.reference or loss
        return {
            "auc": roc_auc_score(labels, probability),
            "log_loss": loss,
            "ne": loss / self.entropy,
            "rll": loss / reference,
        }


def run_non_private(bench: Bench) -> list[dict]:
    ledger = PrivacyLedger(bench.rows)
    release = release_true_labels(ledger, bench.labels, np.arange(bench.rows), 2)
    rows = []
    for kind in bench.models:
        started = time.perf_counter()
        model = train_on_channel(bench.table, kind, release, config())[0]
        metrics = bench.evaluate(model)
        if kind == "lr":
            bench.reference = metrics["log_loss"]
            metrics["rll"] = 1.0
        rows.append(
            {
                "route": f"non-private-{kind}",
                "m": 0,
                "epsilon": float("inf"),
                **metrics,
                "s": time.perf_counter() - started,
            }
        )
    return rows


def run_rr(bench: Bench, epsilon: float, m: int) -> list[dict]:
    ledger, members = unit_members(bench.table, config(m))
    started = time.perf_counter()
    release = release_randomized_response(
        ledger, bench.labels[members], members, 2, epsilon, NOISE.generator("label-release")
    )
    rows = []
    for kind in bench.models:  # the penalty's bucket sizes are all rows' (with units, a little weaker)
        model = train_on_channel(bench.table, kind, release, config(m))[0]
        seconds, started = time.perf_counter() - started, time.perf_counter()
        rows.append({"route": f"rr-{kind}", "m": m, "epsilon": ledger.epsilon(), **bench.evaluate(model), "s": seconds})
    return rows


def run_counts(bench: Bench, epsilon: float, m: int) -> list[dict]:
    ledger, members = unit_members(bench.table, config(m))
    started = time.perf_counter()
    release = release_counts(bench.table, "converted", [0, 1], ledger, members, epsilon, NOISE.generator("histogram"))
    statistics = CountStatistics.from_release(release, SPEC)
    mask = np.zeros(bench.rows, dtype=bool)
    mask[members] = True
    rows = []

    def log_odds(model) -> None:  # scored before it is trained further
        row = {"route": "counts-lo", "m": m, "epsilon": ledger.epsilon(), **bench.evaluate(model)}
        rows.append({**row, "s": time.perf_counter() - started})

    model, _ = fit_counts(bench.table, statistics, mask, config(m), after_log_odds=log_odds)
    rows.append(
        {
            "route": "counts-lr",
            "m": m,
            "epsilon": ledger.epsilon(),
            **bench.evaluate(model),
            "s": time.perf_counter() - started - rows[0]["s"],
        }
    )
    return rows


def run_source(bench: Bench, epsilon: float) -> list[dict]:
    flip = 1 / (1 + np.exp(epsilon))
    started = time.perf_counter()
    # the source's own randomisation, simulated through the boundary (for two classes the flip channel is RR)
    simulated = release_randomized_response(
        PrivacyLedger(bench.rows), bench.labels, np.arange(bench.rows), 2, epsilon, NOISE.generator("label-release")
    )
    ledger = PrivacyLedger(bench.rows)
    reports = PrivateLabels.from_indices(simulated.labels, 2)  # the source's reports, as a loader wraps them
    released = release_external_labels(ledger, reports, np.arange(bench.rows), flip_channel(flip))
    model = train_on_channel(bench.table, "lr", released, config())[0]
    row = {"route": "source-lr", "m": 0, "epsilon": ledger.epsilon(), **bench.evaluate(model)}
    return [{**row, "s": time.perf_counter() - started}]


def print_rows(rows: list[dict], rows_count: int) -> None:
    print(f"\n{rows_count:,} training rows; load average {load()} (1, 5, 15 min) on {os.cpu_count()} cores")
    print(f"{'route':<16}{'m':>4}{'epsilon':>9}{'AUC':>8}{'logloss':>9}{'NE':>8}{'RLL':>8}{'s':>7}")
    for row in rows:
        print(
            f"{row['route']:<16}{row['m']:>4}{row['epsilon']:>9.3g}{row['auc']:>8.4f}{row['log_loss']:>9.5f}"
            f"{row['ne']:>8.4f}{row['rll']:>8.4f}{row['s']:>7.1f}"
        )
    sys.stdout.flush()


def benchmark(args) -> None:
    folder = Path(args.dir)
    results = {}
    for rows in args.rows:
        started = time.perf_counter()
        bench = Bench(folder, rows, args.test_rows, args.models)
        print(f"\n== {rows:,} rows (tables ready in {time.perf_counter() - started:.0f} s)", flush=True)
        found = run_non_private(bench)
        print_rows(found, rows)
        for m in args.units:
            for epsilon in args.epsilons:
                batch = []
                if "rr" in args.routes:
                    batch += run_rr(bench, epsilon, m)
                if "counts" in args.routes:
                    batch += run_counts(bench, epsilon, m)
                if "source" in args.routes and m == 0:
                    batch += run_source(bench, epsilon)
                for row in batch:
                    row["target_epsilon"] = epsilon
                print_rows(batch, rows)
                found += batch
        results[rows] = found
        print(f"peak RSS so far {peak_mb():.0f} MB", flush=True)
    Path(args.json).write_text(json.dumps({str(k): v for k, v in results.items()}, indent=1, default=float))
    if args.png:
        plot(results, args.png)


def plot(results: dict, png: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epsilons = sorted({row["target_epsilon"] for rows in results.values() for row in rows if "target_epsilon" in row})
    figure, axes = plt.subplots(1, len(epsilons), figsize=(3.2 * len(epsilons), 3.2), sharey=True)
    for axis, epsilon in zip(np.atleast_1d(axes), epsilons):
        for route in ("rr-lr", "rr-fm", "counts-lo", "counts-lr", "source-lr", "non-private-fm"):
            points = [
                (n, row["rll"])
                for n, rows in sorted(results.items())
                for row in rows
                if row["route"] == route and row["m"] == 0 and row.get("target_epsilon", epsilon) == epsilon
            ]
            if points:
                axis.plot(*zip(*points), marker="o", label=route)
        axis.set_xscale("log")
        axis.set_title(f"epsilon {epsilon:g} (row level)")
        axis.set_xlabel("training rows")
        axis.axhline(1.0, color="grey", lw=0.5)
    np.atleast_1d(axes)[0].set_ylabel("log-loss / non-private LR's")
    np.atleast_1d(axes)[-1].legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(png, dpi=120)
    print(f"wrote {png}")


def phase(name: str, rows: int, folder: Path) -> dict:
    """One timed phase on the table of ``rows`` rows, in this (fresh) process."""
    train = folder / f"train-{rows}.parquet"
    started = time.perf_counter()
    if name == "generate":
        shutil.rmtree(folder / "speed-gen.parquet", ignore_errors=True)
        write_ads_table(folder / "speed-gen.parquet", rows, AdsSpec(), "train", BLOCK_ROWS)
        (folder / "speed-gen.parquet").unlink()
    elif name == "read":
        for _ in hashed_blocks(train, HashSpec(("hour",)), BLOCK_ROWS, [c for c, _ in SLOTS]):
            pass
    elif name == "read+hash":
        for _ in hashed_blocks(train, SPEC, BLOCK_ROWS):
            pass
    elif name == "privatize_table (RR)":
        out = folder / "speed-release"
        shutil.rmtree(out, ignore_errors=True)
        privatize_table(train, out, label_column="converted", id_column="row_id", classes=[0, 1], epsilon=1.0)
        shutil.rmtree(out)
    elif name == "release_hashed_counts":
        blocks = labelled_blocks(train, SPEC, "converted", [0, 1], BLOCK_ROWS)
        members = np.ones(rows, dtype=bool)
        release_hashed_counts(PrivacyLedger(rows), blocks, members, SPEC.num_buckets, SPEC.num_slots, 2, 1.0)
    elif name in ("train LR (1 epoch)", "train FM (1 epoch)"):
        labels = read_private_labels(train, "converted", [0, 1])
        release = release_randomized_response(PrivacyLedger(rows), labels, np.arange(rows), 2, 2.0)
        targets = PositionTargets.from_channel(rows, release.members, release.likelihood)
        model = HashedLogistic(SPEC.num_buckets) if "LR" in name else HashedFM(SPEC.num_buckets)
        config = SparseTrainConfig(epochs=1, batch_rows=8192, lr=0.1)
        tiny = lambda epoch: [(np.zeros((8, SPEC.num_slots), np.int64), np.zeros((8, 2), np.float32))]  # noqa: E731
        train_sparse(type(model)(SPEC.num_buckets), tiny, forward_loss, config)  # torch's lazy imports, untimed
        started = time.perf_counter()  # the epoch alone
        train_sparse(model, released_blocks(train, SPEC, targets, BLOCK_ROWS), forward_loss, config)
    elif name == "predict LR":
        predict_sparse(HashedLogistic(SPEC.num_buckets), hashed_blocks(train, SPEC, BLOCK_ROWS))
    seconds = time.perf_counter() - started
    return {"phase": name, "seconds": seconds, "rows_per_second": rows / seconds, "peak_mb": peak_mb()}


PHASES = (
    "generate",
    "read",
    "read+hash",
    "privatize_table (RR)",
    "release_hashed_counts",
    "train LR (1 epoch)",
    "train FM (1 epoch)",
    "predict LR",
)


def speed(rows: int, folder: Path) -> None:
    table(folder, rows, "train")
    print(f"\n{rows:,} rows; load average at start {load()} (1, 5, 15 min) on {os.cpu_count()} cores")
    print(f"{'phase':<26}{'seconds':>9}{'rows/s':>12}{'peak MB':>9}{'load':>7}")
    for name in PHASES:
        command = [sys.executable, __file__, "--phase", name, "--speed", str(rows), "--dir", str(folder)]
        found = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        print(
            f"{name:<26}{found['seconds']:>9.1f}{found['rows_per_second']:>12,.0f}{found['peak_mb']:>9.0f}"
            f"{os.getloadavg()[0]:>7.2f}",
            flush=True,
        )
    print(f"load average at the end {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--test-rows", type=int, default=200_000)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1, 2, 4, 8])
    parser.add_argument(
        "--units", type=int, nargs="+", default=[0], help="0: row level; m > 0: at most m rows per user"
    )
    parser.add_argument("--routes", nargs="+", default=["rr", "counts", "source"])
    parser.add_argument("--models", nargs="+", default=["lr", "fm"], help="the models trained on released labels")
    parser.add_argument("--dir", default="/tmp/labeldp-ads")
    parser.add_argument("--json", default="/tmp/labeldp-ads/results.json")
    parser.add_argument("--png", default=None)
    parser.add_argument(
        "--speed", type=int, default=None, help="measure each phase's speed on a table of this many rows"
    )
    parser.add_argument("--phase", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    Path(args.dir).mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)  # training and prediction: one torch thread, the block reader on the other core
    if args.phase:
        print(json.dumps(phase(args.phase, args.speed, Path(args.dir))))
    elif args.speed:
        speed(args.speed, Path(args.dir))
    else:
        print(f"load average at start {load()} (1, 5, 15 min) on {os.cpu_count()} cores; torch {torch.__version__}")
        benchmark(args)
        print(f"load average at the end {load()}")


if __name__ == "__main__":
    main()
