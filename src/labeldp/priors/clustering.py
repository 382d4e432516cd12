"""Cluster priors (Algorithm 4 of Ghazi et al. 2021): k-means over public representations, each
cluster's noisy label histogram its members' prior.

Only the histogram reads labels (:func:`labeldp.release_noisy_histogram`, which records its epsilon).
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.cluster import KMeans
from sklearn.decomposition import PCA
from sklearn.manifold import SpectralEmbedding
from sklearn.neighbors import kneighbors_graph
from sklearn.preprocessing import normalize

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release, release_noisy_histogram
from labeldp.errors import ConfigError
from labeldp.priors.autoencoder import autoencoder_codes
from labeldp.priors.encoders import ENCODER_FILE_SUFFIX, ENCODERS, is_encoder_file
from labeldp.randomness import RandomSource


def encode(
    inputs: np.ndarray, encoder: str = "pca", n_components: int = 50, seed: int = 0, progress: bool = False
) -> np.ndarray:
    """Public representations (n, d) float32 of ``inputs``, by ``encoder``.

    ``pca`` (whitened to ``n_components``), ``spectral`` (:func:`spectral_embedding`), ``autoencoder``
    (``n_components`` code dimensions), ``raw``, or the path of a user's module saved with
    ``torch.export.save`` (``.pt2``: it gets the inputs in their shape, in batches, and returns one row per
    input). An encoder is public only if it was fitted without the private labels: one trained on them
    would carry them into the prior uncounted.
    """
    if is_encoder_file(encoder):
        return _encoder_file_features(encoder, np.asarray(inputs, dtype=np.float32))
    flat = np.asarray(inputs, dtype=np.float32).reshape(len(inputs), -1)
    if encoder == "raw":
        return flat
    if encoder == "autoencoder":
        return autoencoder_codes(flat, code_dim=n_components, seed=seed, progress=progress)
    if encoder == "spectral":
        return spectral_embedding(flat, seed=seed)
    if encoder == "pca":
        components = min(n_components, flat.shape[1], flat.shape[0])
        return PCA(components, whiten=True, random_state=seed).fit_transform(flat).astype(np.float32)
    raise ConfigError(f"unknown encoder {encoder!r}; choose one of {ENCODERS} or a {ENCODER_FILE_SUFFIX} file")


def spectral_embedding(
    flat: np.ndarray, n_components: int = 20, n_neighbors: int = 10, pca_components: int = 50, seed: int = 0
) -> np.ndarray:
    """A neighbour-graph embedding of the rows of ``flat`` (Laplacian eigenmaps), rows of unit length.

    PCA to ``pca_components``, the symmetrised ``n_neighbors`` graph, the leading eigenvectors of its
    normalised Laplacian. Rows close along the data's manifold land close even where it curves away in
    pixel space, so k-means finds purer clusters than on PCA features (docs/methods.md). Public computation.
    """
    n = len(flat)
    pca_components = min(pca_components, flat.shape[1], n)
    reduced = PCA(pca_components, random_state=seed).fit_transform(flat) if flat.shape[1] > pca_components else flat
    n_neighbors = min(n_neighbors, n - 1)
    n_components = min(n_components, n - 2)
    if n_neighbors < 1 or n_components < 1:
        raise ConfigError(f"the spectral encoder needs at least 3 examples, got {n}")
    graph = kneighbors_graph(reduced, n_neighbors, include_self=False)
    with warnings.catch_warnings():
        # a graph of several components is what well-separated groups give: each component's rows
        # then share an embedding, which is what clustering needs
        warnings.filterwarnings("ignore", "Graph is not fully connected", UserWarning)
        embedding = SpectralEmbedding(
            n_components,
            affinity="precomputed_nearest_neighbors",
            n_neighbors=n_neighbors,
            eigen_solver="lobpcg",
            random_state=seed,
        ).fit_transform(graph)
    return normalize(embedding).astype(np.float32)


def _encoder_file_features(path: str, inputs: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    """Features of ``inputs`` from the exported module at ``path``, in batches."""
    import torch

    try:
        module = torch.export.load(path).module()
    except (OSError, RuntimeError, ValueError) as error:
        raise ConfigError(f"cannot load the encoder {path} (a module saved with torch.export.save): {error}") from None
    with torch.no_grad():
        parts = [
            module(torch.from_numpy(inputs[start : start + batch_size])) for start in range(0, len(inputs), batch_size)
        ]
    features = torch.cat(parts).reshape(len(inputs), -1).numpy().astype(np.float32)
    if not np.isfinite(features).all():
        raise ConfigError(f"the encoder {path} returned values that are not finite")
    return features


def cluster(representations: np.ndarray, n_clusters: int, seed: int = 0) -> np.ndarray:
    """k-means cluster index of every row (k-means++ initialisation)."""
    if not 1 <= n_clusters <= len(representations):
        raise ConfigError(f"n_clusters must lie in [1, {len(representations)}], got {n_clusters}")
    return KMeans(n_clusters, n_init=1, random_state=seed).fit_predict(representations)


def histogram_epsilon(epsilon: float, examples: int, clusters: int, relative_noise: float = 0.05) -> float:
    """The histogram's share of ``epsilon`` for a cluster prior, at most ``epsilon / 2``.

    The smallest epsilon at which a noisy count's standard deviation (about 2 sqrt(2) / epsilon_h) is
    ``relative_noise`` of an average cluster's size, ``examples / clusters``, rounded to 3 decimals. It
    reads only public quantities.
    """
    share = 2 * np.sqrt(2) * clusters / (relative_noise * examples)
    return float(min(round(share, 3), epsilon / 2))


def consistent_counts(noisy_counts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """The non-negative counts closest to ``noisy_counts`` (Euclidean, row by row) whose rows sum to ``totals``.

    The projection onto the scaled simplex (Duchi et al. 2008; "Norm-Sub" in Wang et al., NDSS 2020). The
    totals are public (a group is chosen from public inputs and every example has one label), so this is
    post-processing. Where most cells are empty it removes the floor that clipping noise at zero would
    add to each of them. A row whose total is zero stays zero.
    """
    counts = np.asarray(noisy_counts, dtype=np.float64)
    totals = np.asarray(totals, dtype=np.float64).reshape(-1)
    if counts.ndim != 2 or totals.shape != (counts.shape[0],) or np.any(totals < 0):
        raise ValueError(f"need (groups, K) counts and one total >= 0 per group, got {counts.shape} and {totals.shape}")
    descending = -np.sort(-counts, axis=1)
    excess = np.cumsum(descending, axis=1) - totals[:, None]  # over the total, keeping the j largest
    kept = np.arange(1, counts.shape[1] + 1)
    positive = descending - excess / kept > 0  # true for j = 1..rho, false after
    rho = positive.sum(axis=1)
    shift = np.take_along_axis(excess, np.maximum(rho - 1, 0)[:, None], axis=1)[:, 0] / np.maximum(rho, 1)
    return np.where(totals[:, None] > 0, np.maximum(counts - shift[:, None], 0.0), 0.0)


def histogram_priors(noisy_counts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """Rows of probabilities from noisy counts: :func:`consistent_counts`, normalised (uniform for an empty group)."""
    counts = consistent_counts(noisy_counts, totals)
    sums = counts.sum(axis=1, keepdims=True)
    uniform = np.full_like(counts, 1.0 / counts.shape[1])
    return np.where(sums > 0, counts / np.where(sums > 0, sums, 1.0), uniform)


def cluster_priors(
    ledger: PrivacyLedger,
    labels: np.ndarray,
    members: np.ndarray,
    clusters: np.ndarray,
    n_clusters: int,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> tuple[np.ndarray, Release]:
    """Each member's prior, its cluster's noisy label histogram, and the histogram's release.

    epsilon-label-DP for all ``members`` (recorded on ``ledger`` by
    :func:`labeldp.release_noisy_histogram`) provided ``clusters`` come from public inputs only; the
    priors are post-processing. The noisy counts are ``release.arrays["counts"]``.
    """
    release = release_noisy_histogram(ledger, labels, members, clusters, n_clusters, num_classes, epsilon, rng, tag)
    sizes = np.bincount(np.asarray(clusters), minlength=n_clusters)  # public: clusters of public inputs
    return histogram_priors(release.arrays["counts"], sizes)[clusters], release
