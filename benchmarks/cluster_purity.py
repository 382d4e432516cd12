"""Cluster purity of the public representations a cluster prior can use, on MNIST's training images.

For each encoder (PCA-whitened pixels, a neighbour-graph embedding, the codes of an autoencoder
trained on the images, the raw pixels, or your own encoder saved with ``torch.export.save``), the
images are clustered by k-means as ``--prior cluster`` clusters them, and the purity is the share of
images whose label is their cluster's most frequent one: an upper bound on how often a cluster's
(noise-free) histogram would name the right label with k = 1. Purity reads the true labels: it is a
measurement of the encoders, not something a private run computes or writes. Prints the purity and
the seconds of encoding and clustering, with the machine's load.

    python benchmarks/cluster_purity.py --data-dir ../shared/datasets/mnist [--clusters 100] \\
        [--encoders pca spectral autoencoder raw my_encoder.pt2]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from labeldp.data import load_dataset
from labeldp.priors import cluster, encode


def purity(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Share of the examples whose label is the most frequent one in their cluster."""
    counts = np.zeros((clusters.max() + 1, labels.max() + 1), dtype=np.int64)
    np.add.at(counts, (clusters, labels), 1)
    return float(counts.max(axis=1).sum() / len(labels))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default="../shared/datasets/mnist")
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--clusters", type=int, default=100)
    parser.add_argument("--encoders", nargs="+", default=["pca", "spectral", "autoencoder", "raw"])
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    data = load_dataset(args.dataset, args.data_dir)
    print(f"{args.dataset}: {len(data.y_train)} training images, {args.clusters} k-means clusters; "
          f"load average at start {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'encoder':<24} {'purity %':>9} {'encode s':>9} {'k-means s':>10}")
    for encoder in args.encoders:
        start = time.perf_counter()
        features = encode(data.x_train, encoder, seed=args.seed)
        encoded = time.perf_counter()
        assignment = cluster(features, args.clusters, seed=args.seed)
        clustered = time.perf_counter()
        print(f"{encoder:<24} {100 * purity(assignment, data.y_train):9.2f} {encoded - start:9.1f} "
              f"{clustered - encoded:10.1f}", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
