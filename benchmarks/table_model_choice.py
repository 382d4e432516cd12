"""How well the auto-tune's scores choose between the table network and gradient-boosted trees on one release.

Each seed runs ``labeldp train`` with the defaults on a table (one fresh release, ``--insecure-noise-seed``
so that the run can be repeated), recording every candidate's held-out probabilities. For the trees against the
network the auto-tune chose, it prints the paired differences the run could see (the log-likelihood of the
held-out *released* labels, and the clean log-loss estimated from them) and what it could not (their AUC and
log-loss on the held-out rows' true labels), then the final run's test AUC.

    python benchmarks/table_model_choice.py --data-dir ../shared/datasets --task adult/income --seeds 4

``hillstrom/visit`` is ``tabular.py``'s split written as two tables (``visit``, the other outcomes dropped).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.metrics import log_loss, roc_auc_score

from labeldp.cli import main as labeldp
from labeldp.errors import InsecureNoiseWarning
from labeldp.experiments.held_out import HeldOutScorer
from labeldp.released_metrics import _ranked, channel_weights, log_loss_terms, mean_and_error

SCORED: list[tuple[np.ndarray, HeldOutScorer]] = []


def _recording(score):
    def recorded(self, model, inputs, batch_size):
        from labeldp.training.predictions import predict_proba

        SCORED.append((predict_proba(model, inputs, batch_size=batch_size), self))
        return score(self, model, inputs, batch_size)

    return recorded


def _auc_gain(p_net: np.ndarray, p_trees: np.ndarray, positive: np.ndarray) -> tuple[float, float]:
    """The trees' AUC less the network's on labels weighted ``positive`` (the clean ones' unbiased weights, or the
    released labels themselves), paired, with its standard error (the U-statistics' per-row shares)."""
    (a_net, b), (a_trees, _) = _ranked(p_net[:, 1], positive), _ranked(p_trees[:, 1], positive)
    return (a_trees - a_net).mean() / b.mean(), np.sqrt(4 * np.var(a_trees - a_net, ddof=1) / len(b)) / b.mean()


def tables(task: str, data_dir: Path, folder: Path) -> tuple[list[str], np.ndarray]:
    """The command's table options and the training rows' true labels (as 0/1, in the table's order)."""
    if task == "adult/income":
        train = pd.read_csv(data_dir / "adult" / "adult-train.csv.gz")
        options = ["--data-dir", str(data_dir), "--table", "adult/adult-train.csv.gz"]
        options += ["--test-table", "adult/adult-test.csv.gz", "--label-column", "income", "--classes", "<=50K", ">50K"]
        return options, (train["income"] == ">50K").to_numpy(int)
    hillstrom = pd.read_csv(data_dir / "hillstrom" / "hillstrom.csv.gz")
    order = np.random.default_rng(0).permutation(len(hillstrom))  # tabular.py's split
    test, train = hillstrom.iloc[order[:16000]], hillstrom.iloc[order[16000:]]
    dropped = ["conversion", "spend"]
    train.drop(columns=dropped).to_csv(folder / "train.csv", index=False)
    test.drop(columns=dropped).to_csv(folder / "test.csv", index=False)
    options = ["--table", str(folder / "train.csv"), "--test-table", str(folder / "test.csv")]
    return options + ["--label-column", "visit", "--classes", "0", "1"], train["visit"].to_numpy(int)


def one(task_options: list[str], truth: np.ndarray, epsilon: float, seed: int, out: Path, method: str | None) -> dict:
    SCORED.clear()
    argv = ["train", "--dataset", "csv", *task_options, "--epsilon", f"{epsilon:g}", "--insecure-noise-seed", str(seed)]
    argv += ["--method", method] if method else []
    labeldp([*argv, "--threads", "1", "--quiet", "--out", str(out)])
    record = json.loads((out / "auto_tune.json").read_text())
    summary = json.loads((out / "summary.json").read_text())
    keys = [r["key"] for r in record["results"]]
    (p_net, scorer), (p_trees, _) = SCORED[keys.index(record["trees"]["versus"])], SCORED[-1]
    y = truth[scorer.held_out]
    weights = channel_weights(scorer.labels, scorer.likelihood)
    released = mean_and_error(scorer.log_likelihood_terms(p_trees) - scorer.log_likelihood_terms(p_net))
    clean = mean_and_error(log_loss_terms(p_net, weights) - log_loss_terms(p_trees, weights))
    auc_gain = _auc_gain(p_net, p_trees, weights[:, 1])
    released_auc_gain = _auc_gain(p_net, p_trees, (scorer.labels == 1).astype(float))
    return {
        "seed": seed,
        "released_ll": released,
        "estimated_log_loss_gain": clean,
        "estimated_auc_gain": auc_gain,
        "released_auc_gain": released_auc_gain,
        "true_auc": (roc_auc_score(y, p_net[:, 1]), roc_auc_score(y, p_trees[:, 1])),
        "true_log_loss": (log_loss(y, p_net), log_loss(y, p_trees)),
        "chosen": record["chosen"],
        "test_auc": summary["test_auc"],
        "seconds": summary["seconds"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/datasets"))
    parser.add_argument("--task", default="adult/income", choices=("adult/income", "hillstrom/visit"))
    parser.add_argument("--epsilon", type=float, default=1.0)
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--first-seed", type=int, default=1)
    parser.add_argument("--method", help="a method other than the table's default (lp-1st)")
    args = parser.parse_args()
    warnings.simplefilter("ignore", InsecureNoiseWarning)
    HeldOutScorer.score = _recording(HeldOutScorer.score)
    print(f"{args.task} {args.method or 'defaults'} epsilon {args.epsilon:g}, load average {os.getloadavg()[0]:.1f}")
    print(
        "seed  released-LL(trees-net)   est.log-loss gain     est.AUC gain       released AUC gain  "
        "held-out AUC net/trees  "
        "log-loss net/trees  chosen"
    )
    with tempfile.TemporaryDirectory() as folder:
        options, truth = tables(args.task, args.data_dir.resolve(), Path(folder))
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            r = one(options, truth, args.epsilon, seed, Path(folder) / f"run{seed}", args.method)
            print(
                f"{r['seed']:>4}  {r['released_ll'][0]:+.5f} +- {r['released_ll'][1]:.5f}  "
                f"{r['estimated_log_loss_gain'][0]:+.5f} +- {r['estimated_log_loss_gain'][1]:.5f}  "
                f"{r['estimated_auc_gain'][0]:+.4f} +- {r['estimated_auc_gain'][1]:.4f}  "
                f"{r['released_auc_gain'][0]:+.4f} +- {r['released_auc_gain'][1]:.4f}  "
                f"{r['true_auc'][0]:.4f} / {r['true_auc'][1]:.4f}         "
                f"{r['true_log_loss'][0]:.4f} / {r['true_log_loss'][1]:.4f}    {r['chosen']}  "
                f"test AUC {r['test_auc']}  {r['seconds']:.0f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
