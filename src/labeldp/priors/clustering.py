"""Priors from public features (Algorithm 4 of Ghazi et al. 2021): cluster public representations
with k-means and use each cluster's noisy label histogram as its members' prior.

Only the histogram reads labels (through :func:`labeldp.release_noisy_histogram`, which
records its epsilon); the representations and clusters come from public inputs alone.
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
    """Public representations of ``inputs``.

    The inputs, flattened, then PCA-whitened to ``n_components`` (``pca``), a neighbour-graph
    embedding of them (``spectral``: :func:`spectral_embedding`), the codes of an autoencoder trained
    on them (``autoencoder``, ``n_components`` code dimensions; :mod:`labeldp.priors.autoencoder`),
    left as they are (``raw``); or the outputs of a user's own encoder saved with
    ``torch.export.save`` (a path ending in ``.pt2``; it receives the inputs in their shape, in
    batches, and must return one row of features per input). An encoder is public computation only if
    it was fitted without the private labels (on the public inputs, or on other data): one trained on
    these labels would carry them into the prior uncounted. Any (n, d) array a user computes with their
    own encoder works too.

    Parameters
    ----------
    inputs : numpy.ndarray
        Public inputs of shape (n, ...).
    encoder : str, optional
        One of :data:`ENCODERS` or the path of a ``.pt2`` file (default ``"pca"``).
    n_components : int, optional
        Dimensions of the PCA features or of the autoencoder's code (default 50).
    seed : int, optional
        Seed of PCA, the spectral embedding and the autoencoder (default 0).
    progress : bool, optional
        Show the autoencoder's progress bar (default False).

    Returns
    -------
    numpy.ndarray
        float32 array of shape (n, d).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``encoder`` is unknown, an encoder file cannot be loaded or returns values that are not
        finite, or the spectral encoder gets fewer than 3 examples.
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
    """A neighbour-graph embedding of the rows of ``flat`` (Laplacian eigenmaps, as in spectral clustering).

    PCA to ``pca_components`` dimensions, the symmetrised graph of each row's ``n_neighbors`` nearest
    neighbours, the ``n_components`` leading eigenvectors of its normalised Laplacian (scikit-learn's
    ``SpectralEmbedding``, LOBPCG), each row scaled to unit length.

    Rows close along the data's manifold land close together even where the manifold curves away
    in pixel space, so k-means on the embedding finds purer clusters than on PCA features (MNIST,
    100 clusters: 96.4 % against 82.3 %; ``benchmarks/cluster_purity.py``). It reads the inputs
    only, so it is public computation; about 15 s for MNIST's 60,000 images on 2 cores.

    Parameters
    ----------
    flat : numpy.ndarray
        Public inputs of shape (n, D), n >= 3.
    n_components : int, optional
        Dimensions of the embedding (default 20; at most n - 2).
    n_neighbors : int, optional
        Neighbours of each row in the graph (default 10; at most n - 1).
    pca_components : int, optional
        Dimensions kept by PCA before the graph is built (default 50).
    seed : int, optional
        Seed of PCA and of the eigensolver (default 0).

    Returns
    -------
    numpy.ndarray
        float32 array of shape (n, n_components), rows of unit length.

    Raises
    ------
    labeldp.errors.ConfigError
        If there are fewer than 3 rows.
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
    """Features of ``inputs`` from the exported module at ``path`` (batches of at most ``batch_size``)."""
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
    """k-means cluster index of every row (scikit-learn, k-means++ initialisation).

    Parameters
    ----------
    representations : numpy.ndarray
        Public representations of shape (n, d).
    n_clusters : int
        Number of clusters, in [1, n].
    seed : int, optional
        Seed of the initialisation (default 0).

    Returns
    -------
    numpy.ndarray
        Integer array of shape (n,) with values in [0, n_clusters).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``n_clusters`` is not in [1, n].
    """
    if not 1 <= n_clusters <= len(representations):
        raise ConfigError(f"n_clusters must lie in [1, {len(representations)}], got {n_clusters}")
    return KMeans(n_clusters, n_init=1, random_state=seed).fit_predict(representations)


def histogram_epsilon(epsilon: float, examples: int, clusters: int, relative_noise: float = 0.05) -> float:
    """A split of ``epsilon`` for a cluster prior: the histogram's share.

    The share is the smallest epsilon at which a noisy count's standard deviation (discrete Laplace of
    scale 2 / epsilon_h: about 2 sqrt(2) / epsilon_h) is ``relative_noise`` of an average cluster's
    size, ``examples / clusters``, but never more than half of ``epsilon``. Every cluster's shares
    are then known to within a few percentage points, and the rest of the budget goes to the labels.
    The rule reads only public quantities (the number of training examples, the number of
    clusters). MNIST, 60,000 examples in 50 clusters: 0.047 (rounded to 3 decimals), or half the
    budget below 0.094.

    Parameters
    ----------
    epsilon : float
        The whole budget.
    examples : int
        Number of training examples.
    clusters : int
        Number of clusters.
    relative_noise : float, optional
        Target standard deviation of a count, as a fraction of an average cluster's size (default 0.05).

    Returns
    -------
    float
        The histogram's epsilon, rounded to 3 decimals, at most ``epsilon / 2``.
    """
    share = 2 * np.sqrt(2) * clusters / (relative_noise * examples)
    return float(min(round(share, 3), epsilon / 2))


def consistent_counts(noisy_counts: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """The non-negative counts closest to ``noisy_counts`` whose rows sum to ``totals``.

    Closest in Euclidean distance, row by row: the projection onto the scaled simplex, which
    subtracts one constant per row and clips at zero (Duchi et al. 2008; "Norm-Sub" in Wang et al.,
    NDSS 2020).

    The totals are public: each row is a group of examples chosen from public inputs, and every
    example has exactly one label, so a group's true counts sum to its size. Using them is
    post-processing of the noisy counts and costs nothing. It matters where most cells are empty:
    clipping noise at zero there adds about half the noise's scale to every empty cell (for MNIST's
    clusters at epsilon 0.047, a 96 % share shrinks to 85 %; for a zero-inflated numeric label, the
    rare large values swell), while the projection takes that floor away again. A row whose total is
    zero stays zero.

    Parameters
    ----------
    noisy_counts : numpy.ndarray
        Noisy counts of shape (groups, K).
    totals : numpy.ndarray
        The public size of each group, shape (groups,), >= 0.

    Returns
    -------
    numpy.ndarray
        float64 array of shape (groups, K), non-negative, row i summing to ``totals[i]``.

    Raises
    ------
    ValueError
        If the shapes do not match or a total is negative.
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
    """Rows of probabilities from noisy counts.

    :func:`consistent_counts` with the groups' public sizes ``totals``, normalised (uniform for an
    empty group). Post-processing: costs no privacy beyond the counts' release.

    Parameters
    ----------
    noisy_counts : numpy.ndarray
        Noisy counts of shape (groups, K).
    totals : numpy.ndarray
        The public size of each group, shape (groups,).

    Returns
    -------
    numpy.ndarray
        float64 array of shape (groups, K), each row a distribution.

    Raises
    ------
    ValueError
        If the shapes do not match or a total is negative.
    """
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
    """Each member's prior: its cluster's noisy label histogram (epsilon-label-DP, recorded on ``ledger``).

    The histogram is epsilon-DP provided the clusters come from public inputs only; every member's
    label is read, so the ledger records the histogram event for all members
    (:func:`labeldp.release_noisy_histogram`). The priors are then post-processing.

    Parameters
    ----------
    ledger : labeldp.accounting.PrivacyLedger
        The ledger that records the histogram.
    labels : labeldp.boundary.PrivateLabels
        The true labels of ``members``, in index order, in [0, num_classes).
    members : numpy.ndarray
        The examples whose labels are counted: indices or a boolean mask over the ledger's dataset.
    clusters : numpy.ndarray
        Public cluster of each member, integers in [0, n_clusters).
    n_clusters : int
        Number of clusters.
    num_classes : int
        K, the number of classes.
    epsilon : float
        Privacy parameter of the histogram, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        Source of the noise (see :mod:`labeldp.randomness`).
    tag : str or None, optional
        The ledger entry's tag.

    Returns
    -------
    priors : numpy.ndarray
        float64 array of shape (len(members), K).
    release : labeldp.release.Release
        The histogram's release; the noisy counts, of shape (n_clusters, K), are
        ``release.arrays["counts"]``.

    Raises
    ------
    labeldp.errors.ConfigError
        If an argument is invalid (epsilon, labels, clusters, members, lengths) or ``tag`` is already on
        the ledger; nothing is drawn or recorded then.
    """
    release = release_noisy_histogram(ledger, labels, members, clusters, n_clusters, num_classes, epsilon, rng, tag)
    sizes = np.bincount(np.asarray(clusters), minlength=n_clusters)  # public: clusters of public inputs
    return histogram_priors(release.arrays["counts"], sizes)[clusters], release
