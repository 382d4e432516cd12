"""Cluster and histogram priors (priors/clustering.py, and priors/encoders.py, which has little logic
and shares this module): consistent counts are the projection onto the groups' sizes, histogram
priors and clusters, the spectral and a user's own encoder, and the histogram's share of the budget."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import PrivateLabels
from labeldp.mechanisms import discrete_laplace
from labeldp.priors import cluster, cluster_priors, consistent_counts, encode, histogram_priors
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig


def test_consistent_counts_are_the_projection_onto_the_groups_sizes() -> None:
    rng = np.random.default_rng(3)
    noisy = rng.laplace(0, 20, size=(200, 7)) + rng.integers(0, 50, size=(200, 7))
    totals = rng.integers(0, 300, size=200)
    counts = consistent_counts(noisy, totals)
    assert counts.min() >= 0
    np.testing.assert_allclose(counts.sum(axis=1), totals, atol=1e-9)
    # the Euclidean projection: no point of the feasible set is closer (checked against random ones)
    for row in range(0, 200, 20):
        if totals[row] == 0:
            continue
        others = rng.dirichlet(np.full(7, 0.3), size=2000) * totals[row]
        assert np.linalg.norm(others - noisy[row], axis=1).min() >= np.linalg.norm(counts[row] - noisy[row]) - 1e-9
    # the optimality conditions: one shift per row on the cells kept, the cells set to zero below it
    for row in np.flatnonzero(totals > 0):
        kept = counts[row] > 0
        shift = noisy[row, kept] - counts[row, kept]
        np.testing.assert_allclose(shift, shift[0])
        assert np.all(noisy[row, ~kept] <= shift[0] + 1e-9)


def test_consistent_counts_undo_the_floor_that_clipping_adds_to_empty_cells() -> None:
    """A zero-inflated histogram, 2 full cells and 49 empty ones at epsilon 0.1: clipping the noise at
    zero puts ~10 counts into each empty cell, the projection almost none."""
    true = np.zeros((400, 51))
    true[:, 0] = 10_000
    true[:, 1] = 100
    noisy = true + discrete_laplace(0.05, true.shape, np.random.default_rng(0))
    clipped = np.clip(noisy, 0, None)
    projected = consistent_counts(noisy, true.sum(axis=1))
    assert clipped[:, 2:].sum(axis=1).mean() > 400
    assert projected[:, 2:].sum(axis=1).mean() < 0.25 * clipped[:, 2:].sum(axis=1).mean()


def test_histogram_priors_and_clusters() -> None:
    # the rows' public sizes 4 and 0: the first keeps its noisy shape, the empty group is uniform
    priors = histogram_priors(np.array([[3, -2, 1], [-1, -5, 0]]), [4, 0])
    np.testing.assert_allclose(priors, [[0.75, 0.0, 0.25], [1 / 3, 1 / 3, 1 / 3]])
    rng = np.random.default_rng(0)
    points = np.concatenate([rng.normal(-5, 1, (50, 2)), rng.normal(5, 1, (50, 2))])
    groups = cluster(points, 2, seed=0)
    assert len(set(groups[:50])) == 1 and len(set(groups[50:])) == 1 and groups[0] != groups[-1]
    assert encode(rng.normal(size=(30, 1, 4, 4)), "pca", n_components=5).shape == (30, 5)
    ledger = PrivacyLedger(100)
    labels = PrivateLabels.from_indices(np.repeat([0, 1], 50), 2)
    rows, release = cluster_priors(ledger, labels, np.arange(100), groups, 2, 2, 20.0, rng=0)
    counts = release.arrays["counts"]
    assert rows.shape == (100, 2) and counts.shape == (2, 2)
    assert np.all(rows[:50].argmax(axis=1) == 0) and np.all(rows[50:].argmax(axis=1) == 1)


def test_a_users_own_encoder_file_gives_the_cluster_features(blobs, tmp_path) -> None:
    """An encoder saved with torch.export.save is loaded from its path, applied in batches to the
    inputs in their shape, and its features are clustered; the run records its absolute path and spends
    exactly epsilon (the encoder is public computation)."""
    import torch

    weights = torch.randn(20, 4, generator=torch.Generator().manual_seed(0))

    class Projection(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.tanh(x @ weights)

    path = tmp_path / "encoder.pt2"
    torch.export.save(
        torch.export.export(Projection(), (torch.zeros(3, 20),), dynamic_shapes=({0: torch.export.Dim("batch")},)), path
    )
    features = encode(blobs.x_train, str(path))
    expected = torch.tanh(torch.from_numpy(blobs.x_train.astype(np.float32)) @ weights).numpy()
    np.testing.assert_allclose(features, expected, rtol=1e-5, atol=1e-6)
    config = RunConfig(
        dataset="csv",
        method="lp-1st",
        epsilon=2.0,
        prior="cluster",
        clusters=10,
        encoder=str(path),
        train=TrainConfig(epochs=1),
    )
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    assert summary["epsilon"] == pytest.approx(2.0, abs=1e-3)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        RunConfig(method="lp-1st", epsilon=1.0, prior="cluster", encoder=str(tmp_path / "missing.pt2")).resolved()
    with pytest.raises(ValueError, match="torch.export.save"):
        RunConfig(method="lp-1st", epsilon=1.0, prior="cluster", encoder="simclr").resolved()


def test_the_spectral_encoder_follows_curved_clusters() -> None:
    """Two concentric rings: k-means on PCA features cuts across them, k-means on the neighbour-graph
    embedding keeps each cluster on one ring."""
    from sklearn.datasets import make_circles

    inputs, rings = make_circles(2000, noise=0.05, factor=0.5, random_state=0)
    inputs = inputs.astype(np.float32)

    def purity(features: np.ndarray) -> float:
        counts = np.zeros((8, 2), dtype=np.int64)
        np.add.at(counts, (cluster(features, 8, seed=0), rings), 1)
        return counts.max(axis=1).sum() / len(rings)

    features = encode(inputs, "spectral")
    assert features.shape == (2000, 20) and features.dtype == np.float32
    assert purity(encode(inputs, "pca")) < 0.9
    assert purity(features) > 0.99


def test_the_histogram_share_keeps_a_counts_noise_small_and_leaves_half_for_the_labels() -> None:
    from labeldp.mechanisms import discrete_laplace
    from labeldp.priors import histogram_epsilon

    share = histogram_epsilon(2.0, examples=60_000, clusters=50)
    assert share == pytest.approx(0.047, abs=1e-3)
    noise = discrete_laplace(share / 2, 200_000, np.random.default_rng(0))  # the histogram's noise
    assert noise.std() == pytest.approx(0.05 * 60_000 / 50, rel=0.03)
    assert histogram_epsilon(0.05, examples=60_000, clusters=50) == 0.025  # at most half the budget
    assert histogram_epsilon(2.0, examples=600_000, clusters=50) < share  # more examples per cluster: less
