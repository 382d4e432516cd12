"""Noisy histograms (discrete Laplace) and cluster priors: distributions, epsilon, end to end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger, histogram_event
from labeldp.boundary import release_noisy_histogram, unseal
from labeldp.mechanisms import discrete_laplace, discrete_laplace_pmf, keep_probability, noisy_histogram
from labeldp.priors import cluster, cluster_priors, consistent_counts, encode, histogram_priors, temper
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig
from tests.helpers import frequencies_match


@pytest.mark.parametrize("parameter", [0.05, 0.5, 2.0])
@pytest.mark.parametrize("rng", [0, "secure"])
def test_discrete_laplace_matches_its_pmf(parameter: float, rng) -> None:
    width = int(np.ceil(10 / parameter))
    expected = discrete_laplace_pmf(np.arange(-width, width + 1), parameter)
    tail = np.tanh(parameter / 2) * np.exp(-parameter * width) / (1 - np.exp(-parameter))  # Pr[X >= width]
    expected[0] = expected[-1] = tail  # the edge cells collect the tails
    assert expected.sum() == pytest.approx(1.0, abs=1e-9)
    samples = np.clip(discrete_laplace(parameter, (20000, 1), rng=rng), -width, width) + width
    assert frequencies_match(samples, expected[None, :]).all()


def test_discrete_laplace_check_rejects_a_wrong_scale() -> None:
    expected = discrete_laplace_pmf(np.arange(-20, 21), 0.5)[None, :]
    samples = np.clip(discrete_laplace(0.6, (20000, 1), rng=0), -20, 20) + 20
    assert not frequencies_match(samples, expected).all()


@pytest.mark.parametrize("epsilon", [0.1, 1.0])
def test_histogram_likelihood_ratio_and_counts(epsilon: float) -> None:
    """Neighbouring label vectors move two cells by one: the pmf ratio of any noisy table is <= e^eps."""
    a = epsilon / 2
    values = np.arange(-30, 31)
    # cell A holds count c or c+1, cell B holds c'+1 or c'; noise independent per cell
    ratio = (discrete_laplace_pmf(values[:, None] - 1, a) * discrete_laplace_pmf(values[None, :], a)) / (
        discrete_laplace_pmf(values[:, None], a) * discrete_laplace_pmf(values[None, :] - 1, a)
    )
    assert ratio.max() == pytest.approx(math.exp(epsilon))
    labels = np.array([0, 1, 1, 2, 2, 2])
    groups = np.array([0, 0, 1, 1, 1, 0])
    draws = np.stack([noisy_histogram(labels, groups, 2, 3, 50.0, rng=s) for s in range(20)])
    assert np.all(draws == np.array([[1, 1, 1], [0, 1, 2]]))  # nearly noiseless at epsilon 50


def test_histogram_event_matches_the_mechanism() -> None:
    """The recorded event's delta(eps') equals the exact divergence of two unit-shifted cells."""
    from labeldp.accounting.ledger import event_pld

    epsilon = 0.6
    a = epsilon / 2
    values = np.arange(-200, 201)
    p1 = discrete_laplace_pmf(values, a)
    p_shift = discrete_laplace_pmf(values - 1, a)
    joint_p = np.outer(p1, p1)  # (A, B) = (c, c') + noise
    joint_q = np.outer(p_shift, p_shift)  # (c + 1, c' + 1): one cell each way, same law by symmetry
    pld = event_pld(histogram_event(epsilon))
    for eps_prime in (0.0, 0.2, 0.4):
        exact = np.maximum(joint_p - math.exp(eps_prime) * joint_q, 0).sum()
        assert pld.get_delta_for_epsilon(eps_prime) == pytest.approx(exact, abs=2e-3)
    assert pld.get_epsilon_for_delta(0.0) == pytest.approx(epsilon, abs=1e-3)


def test_release_and_sequential_composition() -> None:
    ledger = PrivacyLedger(6)
    release_noisy_histogram(ledger, [0, 1, 1, 2, 2, 2], np.arange(6), [0, 0, 1, 1, 1, 0], 2, 3, 0.2, rng=0, tag="prior")
    assert ledger.epsilon() == pytest.approx(0.2, abs=1e-3)
    with pytest.raises(ValueError, match="groups must lie in"):
        release_noisy_histogram(ledger, [0, 1], [0, 1], [0, 5], 2, 3, 0.2)
    assert len(ledger.entries) == 1


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
    rows, release = cluster_priors(ledger, np.repeat([0, 1], 50), np.arange(100), groups, 2, 2, 20.0, rng=0)
    counts = release.arrays["counts"]
    assert rows.shape == (100, 2) and counts.shape == (2, 2)
    assert np.all(rows[:50].argmax(axis=1) == 0) and np.all(rows[50:].argmax(axis=1) == 1)


def test_cluster_prior_run_spends_exactly_epsilon(blobs, tmp_path) -> None:
    config = RunConfig(
        dataset="csv",
        method="lp-2st",
        epsilon=0.5,
        prior="cluster",
        clusters=10,
        train=TrainConfig(epochs=3, batch_size=64),
        insecure_noise_seed=0,
    )  # a reproducible outcome
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["prior", "stage1", "stage2"]
    assert ledger.entries[0].num_members == 600
    assert summary["epsilon"] == pytest.approx(0.5, abs=1e-3)  # 0.05 histogram + 0.45 per label
    with np.load(tmp_path / "run" / "noisy_labels" / "stage1.npz") as stage1:
        assert stage1["k"].mean() < 10  # the cluster prior narrows RR to few labels
    # well-separated blobs: cluster priors make the stage-1 labels far more accurate than RR at 0.45
    with np.load(tmp_path / "run" / "noisy_labels" / "stage1.npz") as stage1:
        correct = np.mean(stage1["labels"] == unseal(blobs.y_train)[stage1["indices"]])
    assert correct > 2 * keep_probability(0.45, 10)


def test_autoencoder_codes_separate_public_clusters(blobs) -> None:
    codes = encode(blobs.x_train, "autoencoder", n_components=8, seed=0)
    assert codes.shape == (600, 8) and codes.dtype == np.float32
    assert np.array_equal(codes, encode(blobs.x_train, "autoencoder", n_components=8, seed=0))
    groups = cluster(codes, 10, seed=0)
    counts = np.zeros((10, 10))
    np.add.at(counts, (groups, unseal(blobs.y_train)), 1)
    assert counts.max(axis=1).sum() / 600 > 0.9  # clusters of the codes are nearly pure


def test_combined_priors_spend_the_same_budget(blobs, tmp_path) -> None:
    config = RunConfig(
        dataset="csv",
        method="lp-2st",
        epsilon=0.5,
        prior="cluster",
        clusters=10,
        combine_priors=True,
        train=TrainConfig(epochs=2, batch_size=64),
    )
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    # the histogram's 0.05 plus, where some example's k >= 2, the labels' 0.45: with clusters this pure
    # every k can be 1 (the release then says nothing), so the total lies between the two, never above
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [entry.tag for entry in ledger.entries] == ["prior", "stage1", "stage2"]
    assert 0.05 - 1e-3 <= summary["epsilon"] <= 0.5 + 1e-3
    with np.load(tmp_path / "run" / "noisy_labels" / "stage2.npz") as stage2:
        channel = stage2["likelihood"] / stage2["likelihood"].sum(axis=1, keepdims=True)
        # the cluster prior is folded into stage 2's targets, so they are sharper than its channel
        assert np.mean(stage2["evidence"].max(axis=1)) > np.mean(channel.max(axis=1)) + 0.05


def test_tempering_flattens_the_prior_and_widens_rr_with_prior(blobs, tmp_path) -> None:
    rows = np.array([[0.8, 0.15, 0.05, 0.0], [0.25, 0.25, 0.25, 0.25]])
    assert temper(rows, 1.0) is rows
    flat = temper(rows, 3.0)
    assert np.allclose(flat.sum(axis=1), 1.0) and np.allclose(flat[1], 0.25)
    assert flat[0, 0] < 0.8 and flat[0, 3] == 0.0 and np.all(np.diff(flat[0]) <= 0)
    assert np.allclose(temper(rows, 0.5)[0], rows[0] ** 2 / (rows[0] ** 2).sum())
    mean_k = {}
    for temperature in (1.0, 4.0):
        config = RunConfig(
            dataset="csv",
            method="lp-1st",
            epsilon=1.0,
            prior="cluster",
            clusters=10,
            prior_temperature=temperature,
            train=TrainConfig(epochs=1, batch_size=64),
        )
        summary = train_run(config, tmp_path / f"t{temperature}", progress=False, dataset=blobs)
        mean_k[temperature] = summary["stages"][0]["mean_k"]
    assert mean_k[4.0] > mean_k[1.0]


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(prior="cluster", method="non-private", epsilon=None), "needs a private method"),
        (dict(prior="cluster", epsilon=1.0, prior_epsilon=1.0), "must be smaller than epsilon"),
        (dict(prior="uniform", epsilon=1.0, prior_epsilon=0.1), "only with prior 'cluster'"),
        (dict(prior="knn", epsilon=1.0), "prior must be one of"),
        (dict(prior="uniform", epsilon=1.0, prior_temperature=2.0), "only with prior 'cluster'"),
        (dict(prior="uniform", epsilon=1.0, encoder="autoencoder"), "only with prior 'cluster'"),
        (dict(prior="uniform", epsilon=1.0, combine_priors=True), "only with prior 'cluster'"),
        (dict(prior="uniform", epsilon=1.0, clusters=50), "clusters applies only with prior 'cluster'"),
        (
            dict(prior="cluster", method="lp-1st", epsilon=1.0, combine_priors=True),
            "'lp-1st' does not use combine_priors",
        ),
        (dict(prior="cluster", epsilon=1.0, encoder="vae"), "encoder must be one of"),
        (dict(prior="cluster", epsilon=1.0, prior_temperature=0.0), "prior_temperature must be > 0"),
    ],
)
def test_bad_prior_configuration(changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        RunConfig(**{"method": "lp-1st", **changes}).resolved()


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


def test_stage_one_under_a_cluster_prior_trains_on_the_posterior(blobs, tmp_path, monkeypatch) -> None:
    import labeldp.runs.context as context

    soft_labels = []
    real_train_stage = context.train_stage

    def recording(*args, **kwargs):
        soft_labels.append(kwargs["soft_labels"])
        return real_train_stage(*args, **kwargs)

    monkeypatch.setattr(context, "train_stage", recording)
    for prior in ("cluster", None):
        config = RunConfig(
            dataset="csv",
            method="lp-2st",
            epsilon=0.5,
            prior=prior,
            clusters=10 if prior else 100,
            train=TrainConfig(epochs=1, batch_size=64),
        )
        train_run(config, tmp_path / f"run-{prior}", progress=False, dataset=blobs)
    assert soft_labels == [True, False, False, False]  # stage 1 under the prior only; later stages: forward loss
