"""LP-1ST and LP-2ST on MNIST at several epsilons, next to Ghazi et al. (2021), with wall time per run.

Usage: python benchmarks/mnist_table.py [--data-dir ../shared/datasets/mnist] [--epsilons 1 2 4]
Runs go to --out (default runs/mnist_table); a finished run is read back, an interrupted one resumes.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from labeldp.data import load_dataset
from labeldp.training import RunConfig, TrainConfig, train_run

#: Test accuracy (%) reported by Ghazi et al. (NeurIPS 2021) for MNIST.
PAPER = {
    "lp-1st": {1.0: 95.34, 2.0: 98.16, 3.0: 98.94, 4.0: 99.08},
    "lp-2st": {1.0: 95.82, 2.0: 98.78, 3.0: 99.14, 4.0: 99.24},
}
#: The recipe: the default small CNN, SGD with Nesterov momentum and a cosine schedule, +-2 px
#: translations; each stage trains this many epochs.
RECIPE = TrainConfig(epochs=12, batch_size=128, lr=0.05, weight_decay=5e-4)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/datasets/mnist")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--methods", nargs="+", default=["lp-1st", "lp-2st"], choices=sorted(PAPER))
    parser.add_argument("--epochs", type=int, default=RECIPE.epochs, help="epochs per stage")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="runs/mnist_table")
    args = parser.parse_args()

    data = load_dataset("mnist", args.data_dir)
    recipe = TrainConfig(**{**RECIPE.__dict__, "epochs": args.epochs})
    rows = []
    for method in args.methods:
        for epsilon in args.epsilons:
            config = RunConfig(dataset="mnist", data_dir=str(Path(args.data_dir)), method=method,
                               epsilon=epsilon, seed=args.seed, train=recipe)
            start = time.perf_counter()
            summary = train_run(config, Path(args.out) / f"{method}-eps{epsilon:g}-seed{args.seed}", progress=False,
                                dataset=data)
            print(f"  {method} eps={epsilon:g}: {100 * summary['test_accuracy']:.2f}% "
                  f"(ledger epsilon {summary['epsilon']}, {summary['seconds']:.0f}s; this call {time.perf_counter() - start:.0f}s)",
                  flush=True)
            rows.append((method, epsilon, summary))
    print(f"\nMNIST test accuracy, label-DP epsilon from the ledger; wall time per run on "
          f"{torch.get_num_threads()} CPU threads ({platform.processor() or platform.machine()}):\n")
    print(f"{'method':<8}{'epsilon':>8}{'labeldp %':>11}{'paper %':>9}{'diff':>7}{'seconds':>9}")
    for method, epsilon, summary in rows:
        ours = 100 * summary["test_accuracy"]
        paper = PAPER[method].get(epsilon)
        diff = f"{ours - paper:+.2f}" if paper is not None else ""
        paper_text = f"{paper:.2f}" if paper is not None else "-"
        print(f"{method:<8}{summary['epsilon']:>8.3g}{ours:>11.2f}{paper_text:>9}{diff:>7}{summary['seconds']:>9.0f}")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "table.json").write_text(json.dumps(
        [{"method": m, "epsilon": e, **s} for m, e, s in rows], indent=2))


if __name__ == "__main__":
    main()
