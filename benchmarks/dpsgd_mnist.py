"""Full DP against label DP on MNIST: DP-SGD and LP-2ST at the same epsilons, with wall time per run.

DP-SGD protects inputs and labels ((epsilon, 1e-5)-DP, add-or-remove one example); LP-2ST protects
labels only (pure epsilon-label-DP, replace one label). The runs are the built-in profiles
``mnist/e{epsilon}/{dp-sgd,lp-2st}/run{seed}``, executed by the sweep runner as ``labeldp sweep``
would; finished runs in --out are read back and unfinished ones resume.

Usage: python benchmarks/dpsgd_mnist.py [--data-dir ../shared/datasets/mnist] [--epsilons 1 2 4]
"""

from __future__ import annotations

import argparse
import platform

import torch

from labeldp.experiments.sweep_runner import SweepJob, run_sweep
from labeldp.recipes import get_profile
from labeldp.training import resolve_device


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/datasets/mnist")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--methods", nargs="+", default=["dp-sgd", "lp-2st"], choices=["dp-sgd", "lp-1st", "lp-2st"])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--workers", type=int, default=1, help="parallel runs (each then gets fewer threads)")
    parser.add_argument("--out", default="runs/dpsgd-mnist")
    parser.add_argument(
        "--device", default="auto", help="torch device for every run (default %(default)s: GPU if present)"
    )
    args = parser.parse_args()
    device = resolve_device(args.device)
    hardware = (
        torch.cuda.get_device_name(device)
        if device.type == "cuda"
        else f"{torch.get_num_threads()} CPU threads ({platform.machine()})"
    )

    keys = [f"mnist/e{e:g}/{m}/run{s}" for m in args.methods for e in args.epsilons for s in args.seeds]
    rows = run_sweep(
        [SweepJob(key, get_profile(key).config) for key in keys],
        args.out,
        workers=args.workers,
        data_dir=args.data_dir,
        device=str(device),
    )
    print(
        f"\nMNIST test accuracy; epsilon from each run's ledger; seconds = wall time of the run on "
        f"{hardware}, {args.workers} run(s) at a time:\n"
    )
    print(f"{'method':<8}{'epsilon':>8}{'delta':>8}{'seed':>6}{'accuracy %':>12}{'seconds':>9}  protects")
    for row in rows:
        if row["status"] != "done":
            print(f"{row['method']:<8}{row['target_epsilon']:>8}{'':>8}{row['seed']:>6}  failed: {row['error']}")
            continue
        full = row["method"] == "dp-sgd"
        print(
            f"{row['method']:<8}{float(row['epsilon']):>8.3g}{'1e-5' if full else '0':>8}{row['seed']:>6}"
            f"{100 * float(row['test_accuracy']):>12.2f}{float(row['seconds']):>9.0f}  "
            f"{'inputs and labels' if full else 'labels'}"
        )


if __name__ == "__main__":
    main()
