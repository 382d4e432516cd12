"""Cluster purity of the public representations a cluster prior can use, on MNIST's training images.

For each encoder (PCA-whitened pixels, a neighbour-graph embedding, the codes of an autoencoder
trained on the images, the raw pixels, or your own encoder saved with ``torch.export.save``), the
images are clustered by k-means as ``--prior cluster`` clusters them, and the purity is the share of
images whose label is their cluster's most frequent one: an upper bound on how often a cluster's
(noise-free) histogram would name the right label with k = 1. With ``--histogram-epsilons``, it
also prints how often the *noisy* histogram's top class is an image's label: the histogram released
at that epsilon (labeldp's discrete Laplace mechanism), projected onto the clusters' sizes as a run
does, mean of ``--draws`` draws; the budget left for the labels is then what the prior cannot fix.
Purity reads the true labels: it is a measurement of the encoders, not something a private run
computes or writes. Prints the purity and the seconds of encoding and clustering, with the
machine's load.

    python benchmarks/cluster_purity.py --data-dir ../shared/datasets/mnist [--clusters 50 100 200] \\
        [--encoders pca spectral autoencoder raw my_encoder.pt2] [--histogram-epsilons 0.047 0.2 0.5]
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
import torch

from labeldp.data import load_dataset
from labeldp.mechanisms import noisy_histogram
from labeldp.priors import cluster, encode, histogram_priors


def purity(clusters: np.ndarray, labels: np.ndarray) -> float:
    """Share of the examples whose label is the most frequent one in their cluster."""
    counts = np.zeros((clusters.max() + 1, labels.max() + 1), dtype=np.int64)
    np.add.at(counts, (clusters, labels), 1)
    return float(counts.max(axis=1).sum() / len(labels))


def noisy_prior_accuracy(
    clusters: np.ndarray, labels: np.ndarray, num_clusters: int, num_classes: int, epsilon: float, draws: int
) -> float:
    """How often the top class of the cluster prior from a histogram released at ``epsilon`` (projected
    onto the clusters' sizes) is an image's label, mean over ``draws`` draws of the noise."""
    sizes = np.bincount(clusters, minlength=num_clusters)
    hits = []
    for draw in range(draws):
        counts = noisy_histogram(labels, clusters, num_clusters, num_classes, epsilon, np.random.default_rng(draw))
        hits.append(np.mean(histogram_priors(counts, sizes)[clusters].argmax(axis=1) == labels))
    return float(np.mean(hits))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default="../shared/datasets/mnist")
    parser.add_argument("--dataset", default="mnist")
    parser.add_argument("--clusters", type=int, nargs="+", default=[100])
    parser.add_argument("--encoders", nargs="+", default=["pca", "spectral", "autoencoder", "raw"])
    parser.add_argument("--histogram-epsilons", type=float, nargs="*", default=[])
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(os.cpu_count() or 1)
    data = load_dataset(args.dataset, args.data_dir)
    labels = np.asarray(data.y_train)
    print(
        f"{args.dataset}: {len(labels)} training images; load average at start {os.getloadavg()[0]:.2f} on "
        f"{os.cpu_count()} cores"
    )
    noisy = "".join(f"  top-1 % at e={e:g}" for e in args.histogram_epsilons)
    print(f"{'encoder':<24} {'clusters':>8} {'purity %':>9} {'encode s':>9} {'k-means s':>10}{noisy}")
    for encoder in args.encoders:
        start = time.perf_counter()
        features = encode(data.x_train, encoder, seed=args.seed)
        encoded = time.perf_counter() - start
        for clusters in args.clusters:
            start = time.perf_counter()
            assignment = cluster(features, clusters, seed=args.seed)
            clustered = time.perf_counter() - start
            shares = "".join(
                f"{100 * noisy_prior_accuracy(assignment, labels, clusters, data.num_classes, e, args.draws):19.2f}"
                for e in args.histogram_epsilons
            )
            print(
                f"{encoder:<24} {clusters:>8} {100 * purity(assignment, labels):9.2f} {encoded:9.1f} "
                f"{clustered:10.1f}{shares}",
                flush=True,
            )
    print(f"load average at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
