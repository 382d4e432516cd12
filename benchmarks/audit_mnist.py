"""Model-level label-inference audits of MNIST runs: LP-1ST at several epsilons and non-private runs
(the augmented, weight-decayed recipe, and one fitted to its training set).

Each audit retrains the profile's recipe with canaries (by default training examples given random
wrong labels), guesses the canaries' labels from the model, calibrated by a reference model of the
same recipe without canaries, and prints the empirical epsilon lower bound. Finished runs are reused.

Usage: python benchmarks/audit_mnist.py [--data-dir ../shared/datasets/mnist] [--canaries 1000]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from labeldp.audit import audit_config
from labeldp.data import load_dataset
from labeldp.recipes import get_profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="../shared/datasets/mnist")
    parser.add_argument("--epsilons", type=float, nargs="*", default=[1.0, 2.0, 4.0])
    parser.add_argument(
        "--non-private",
        nargs="*",
        default=["mnist/non-private/run0", "mnist/non-private-fit/run0"],
        metavar="PROFILE",
        help="non-private profiles to audit (default: %(default)s)",
    )
    parser.add_argument("--canaries", type=int, default=1000)
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument("--canary-kind", choices=("mislabeled", "noise"), default="mislabeled")
    parser.add_argument("--out", default="runs/audit-mnist")
    parser.add_argument(
        "--references",
        default="runs/paper-mnist",
        help="sweep folder whose finished runs of the same profiles serve as reference models "
        "(missing ones are trained)",
    )
    args = parser.parse_args()

    data = load_dataset("mnist", args.data_dir)
    keys = [f"mnist/e{e:g}/lp-1st/run0" for e in args.epsilons] + list(args.non_private)
    results = []
    for key in keys:
        config = get_profile(key).config.with_overrides(data_dir=args.data_dir)
        result = audit_config(
            config,
            Path(args.out) / key.replace("/", "__"),
            num_canaries=args.canaries,
            confidence=args.confidence,
            dataset=data,
            reference_dir=Path(args.references) / key.replace("/", "__"),
            canaries=args.canary_kind,
        )
        print(f"  {key}: epsilon >= {result['epsilon_lower_bound']:.3f} ({result['seconds']:.0f}s)", flush=True)
        results.append((key, result))
    print(
        f"\nLabel-inference audit of MNIST runs: {args.canaries} {args.canary_kind} canaries each, lower bounds at "
        f"{100 * args.confidence:g}% confidence (Bonferroni over the attacker's abstention thresholds):\n"
    )
    print(
        f"{'run':<26}{'claimed eps':>12}{'audited eps >=':>16}{'best: correct/answered':>24}"
        f"{'test acc %':>11}{'train s':>9}"
    )
    for key, r in results:
        best = max(r["thresholds"], key=lambda t: t["epsilon_lower_bound"])
        claimed = "inf" if r["claimed_epsilon"] is None else f"{r['claimed_epsilon']:.3g}"
        print(
            f"{key:<26}{claimed:>12}{r['epsilon_lower_bound']:>16.3f}{best['correct']:>15}/{best['answered']:<8}"
            f"{100 * r['canary_run_test_accuracy']:>11.2f}{r['canary_run_seconds']:>9.0f}"
        )


if __name__ == "__main__":
    main()
