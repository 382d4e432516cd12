"""Does the auto-tune keep ``--flip`` where a mirror keeps the classes? A proxy built from the digits: every
training and test image mirrored left-right at random (a fixed public draw), so that mirrored training images
are as good as new ones, as on clothing. Each draw runs LP-2ST auto-tuned (``--no-recipe``'s path), then the
same release at the chosen rate with ``--flip`` the other way round, untuned, and prints both test
accuracies and the mirrored candidate's lead on the held-out released labels. NOT PRIVATE: the draws are
``insecure_noise_seed`` 1, 2 and 3, and every run of a draw releases the labels again (a fresh
``$LABELDP_BUDGET_DIR`` keeps its ledger apart).

    python benchmarks/mirror_proxy.py [--epsilons 2 4] [--out runs/mirror-proxy]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import warnings

import numpy as np

from labeldp.boundary import unseal
from labeldp.data import LabeledDataset
from labeldp.data.digits import load_digits_dataset
from labeldp.experiments.auto_tune import auto_tuned_run
from labeldp.runs import RunConfig, train_run


def mirrored_digits() -> LabeledDataset:
    digits, rng = load_digits_dataset(), np.random.default_rng(0)

    def mirror(images: np.ndarray) -> np.ndarray:
        flip = rng.random(len(images)) < 0.5
        return np.where(flip[:, None, None, None], images[..., ::-1], images).astype(np.float32)

    x_train, x_test = mirror(digits.x_train), mirror(digits.x_test)
    return LabeledDataset("digits-mirrored", x_train, unseal(digits.y_train), x_test, digits.y_test, num_classes=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[2.0, 4.0])
    parser.add_argument("--out", default="runs/mirror-proxy")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # the draws are insecure on purpose
    data = mirrored_digits()
    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    for epsilon in args.epsilons:
        for draw in (1, 2, 3):
            config = RunConfig(dataset="csv", method="lp-2st", epsilon=epsilon, insecure_noise_seed=draw)
            out = f"{args.out}/e{epsilon:g}-{draw}"
            tuned = auto_tuned_run(config, out, progress=False, dataset=data)
            with open(f"{out}/auto_tune.json") as file:
                record = json.load(file)
            chosen, mirror = record["chosen_options"], record["mirror"]
            other = {**chosen, "flip": not chosen.get("flip", False)}
            train = dataclasses.replace(config.resolved().train, **other)
            untuned = train_run(dataclasses.replace(config, train=train), f"{out}-other", progress=False, dataset=data)
            print(
                f"epsilon {epsilon:g} draw {draw}: chosen {record['chosen']} {100 * tuned['test_accuracy']:.2f} %, "
                f"flip {other['flip']} {100 * untuned['test_accuracy']:.2f} %; the mirrored candidate's lead "
                f"{100 * mirror['ahead']:+.2f} +- {100 * mirror['ahead_error']:.2f} points, kept {mirror['kept']}",
                flush=True,
            )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
