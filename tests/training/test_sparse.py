"""Hashed sparse models trained out of core: the models, the losses (the forward loss through the noise
channel; the counts' loss equals the logistic likelihood when the counts are exact), the post-processing
of noisy counts, and an end-to-end fit on a generated ads table at a generous epsilon."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import load_release, privatize_table, release_hashed_counts, release_randomized_response
from labeldp.data.hashed_table import (
    PositionTargets,
    labelled_blocks,
    read_column,
    read_private_labels,
    released_blocks,
)
from labeldp.data.hashing import HashSpec, Slot, bucket_sizes, hashed_blocks
from labeldp.data.synthetic_ads import AdsSpec, write_ads_table
from labeldp.errors import ConfigError, DataError
from labeldp.models.sparse import HashedFM, HashedLogistic
from labeldp.training.from_counts import CountStatistics, base_rate, bucket_rates, count_target_blocks, log_odds_model
from labeldp.training.out_of_core import (
    ScatterAdagrad,
    SparseTrainConfig,
    calibrate_intercept,
    counts_loss,
    forward_loss,
    load_sparse_model,
    predict_sparse,
    prefetch,
    save_sparse_model,
    train_sparse,
)


def test_the_fm_is_the_logistic_model_plus_every_pair_of_factors_with_sparse_gradients() -> None:
    torch.manual_seed(0)
    model = HashedFM(20, dim=3, init_std=0.5)
    buckets = torch.tensor([[0, 5, 9], [1, 5, 19]])
    with torch.no_grad():
        model.linear.weight.normal_()
        model.bias.fill_(0.3)
    v, w = model.factors.weight, model.linear.weight[:, 0]
    expected = torch.stack(
        [0.3 + w[row].sum() + sum(v[a] @ v[b] for a, b in itertools.combinations(row.tolist(), 2)) for row in buckets]
    )
    logits = model(buckets)
    assert torch.allclose(logits, expected, atol=1e-5)
    logits.sum().backward()
    assert model.linear.weight.grad.is_sparse and model.factors.weight.grad.is_sparse
    assert torch.allclose(HashedLogistic(20)(buckets), torch.zeros(2))


def test_the_counts_loss_is_the_logistic_likelihood_when_the_counts_are_exact() -> None:
    """sum_i [softplus(z_i) - sum_f w t - b r] = sum_i [softplus(z_i) - y_i z_i] with t_j = S_j / n_j, r = N / n."""
    rng = np.random.default_rng(0)
    buckets = np.stack([rng.integers(0, 5, 200), 5 + rng.integers(0, 7, 200)], axis=1)
    labels = rng.integers(0, 2, 200)
    sizes = np.bincount(buckets.ravel(), minlength=12)
    positives = np.bincount(buckets[labels == 1].ravel(), minlength=12)
    rates = np.concatenate([positives / np.maximum(sizes, 1), [labels.mean()]])
    targets = np.concatenate([rates[buckets], np.full((200, 1), labels.mean())], axis=1)
    model = HashedLogistic(12)
    with torch.no_grad():
        model.linear.weight.normal_()
        model.bias.fill_(-0.5)
    tensor = torch.from_numpy(buckets)
    ours = counts_loss(model, tensor, torch.from_numpy(targets).float()).sum()
    logistic = F.binary_cross_entropy_with_logits(model(tensor), torch.from_numpy(labels).float(), reduction="sum")
    assert torch.allclose(ours, logistic, rtol=1e-5)
    one_hot = torch.log(torch.eye(2)[torch.from_numpy(labels)])  # the forward loss on true labels is the same
    assert torch.allclose(forward_loss(model, tensor, one_hot).sum(), logistic, rtol=1e-5)


def test_post_processing_finds_the_rates_of_exact_counts() -> None:
    slots = np.repeat([0, 1], [3, 4])
    sizes = np.array([1000, 3000, 0, 20, 500, 2000, 1480])
    truth = np.array([0.01, 0.05, 0.0, 0.1, 0.02, 0.03, 0.04])
    positives = truth * sizes
    positives[3:] *= positives[:3].sum() / positives[3:].sum()  # both slots count the same positives
    rate = base_rate(positives, sizes, slots)
    assert rate == pytest.approx(positives[:3].sum() / 4000)
    rates, slopes = bucket_rates(positives, sizes, slots, 1e-9, rate)
    assert rates[2] == rate and slopes[2] == 0  # an empty bucket: the base rate
    observed = positives / np.maximum(sizes, 1)
    assert observed[0] < rates[0] < rate < rates[1] < observed[1]  # shrunk towards the base rate
    noisier, _ = bucket_rates(positives, sizes, slots, 100.0, rate)  # more noise, more shrinkage
    assert np.all(np.abs(noisier - rate) <= np.abs(rates - rate)) and np.all((noisier >= 0) & (noisier <= 1))


def test_scatter_adagrad_makes_torchs_adagrad_updates_without_sorting() -> None:
    """Repeated buckets in a batch (each row's occurrences summed once), dense and sparse parameters."""
    buckets = torch.tensor([[0, 3, 3], [1, 3, 7], [0, 2, 7]])
    targets = torch.log(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]]))
    models = []
    for optimizer_class in (ScatterAdagrad, torch.optim.Adagrad):
        torch.manual_seed(0)
        model = HashedFM(8, dim=2, init_std=0.3)
        optimizer = optimizer_class(model.parameters(), lr=0.2)
        with torch.sparse.check_sparse_tensor_invariants(enable=True):  # torch's Adagrad asks to be told
            for _ in range(3):
                optimizer.zero_grad()
                forward_loss(model, buckets, targets).mean().backward()
                optimizer.step()
        models.append(model)
    for ours, theirs in zip(*(model.parameters() for model in models)):
        assert torch.allclose(ours, theirs, atol=1e-6)


def test_the_intercept_is_calibrated_to_a_rate() -> None:
    torch.manual_seed(0)
    model = HashedLogistic(50)
    with torch.no_grad():
        model.linear.weight.normal_()
    sample = [np.random.default_rng(0).integers(0, 50, (400, 3))]
    shift = calibrate_intercept(model, sample, 0.03)
    probability = torch.sigmoid(model(torch.from_numpy(sample[0])))
    assert probability.mean().item() == pytest.approx(0.03, rel=1e-4) and model.bias.item() == pytest.approx(shift)


def test_prefetch_hands_over_items_and_errors() -> None:
    assert list(prefetch(iter(range(5)))) == list(range(5))

    def failing():
        yield 1
        raise ValueError("read failed")

    with pytest.raises(ValueError, match="read failed"):
        list(prefetch(failing()))
    with pytest.raises(ConfigError, match="sizes"):
        train_sparse(HashedLogistic(4), lambda epoch: [], forward_loss, SparseTrainConfig(l2=1.0))


@pytest.fixture(scope="module")
def ads_tables(tmp_path_factory) -> tuple:
    folder = tmp_path_factory.mktemp("ads")
    spec = AdsSpec(
        base_rate=0.05, advertisers=30, campaigns=100, sites=300, devices=4, scales=(1, 1, 1, 0.5, 0.3, 0, 0, 0)
    )
    train = write_ads_table(folder / "train.parquet", 40_000, spec, row_group_rows=8192)
    test = write_ads_table(folder / "test.parquet", 20_000, spec, "test", row_group_rows=8192)
    hashing = HashSpec((Slot("advertiser", 6), Slot("campaign", 8), Slot("site", 10), Slot("device", 3)))
    return train, test, hashing


def _normalized_entropy(model, test, hashing) -> float:
    positions, probability = predict_sparse(model, hashed_blocks(test, hashing, 8192))
    labels = read_column(test, "converted")[positions]
    rate = labels.mean()
    loss = -np.mean(labels * np.log(probability) + (1 - labels) * np.log(1 - probability))
    return loss / -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))


def test_end_to_end_both_routes_beat_the_base_rate_at_a_generous_epsilon(ads_tables) -> None:
    """Randomized response + the forward loss, and noisy counts + post-processing, at epsilon 8: the
    test log-loss is clearly below the base rate's (normalized entropy < 0.9; the generator's model
    gives about 0.8)."""
    train, test, hashing = ads_tables
    rows = 40_000
    ledger = PrivacyLedger(rows)
    labels = read_private_labels(train, "converted", [0, 1])
    release = release_randomized_response(ledger, labels, np.arange(rows), 2, 8.0, rng=0)
    targets = PositionTargets.from_channel(rows, release.members, release.likelihood)
    model = HashedLogistic(hashing.num_buckets)
    with torch.no_grad():
        model.bias.fill_(-3.0)
    config = SparseTrainConfig(epochs=3, batch_rows=1024, lr=0.1, l2=1.0)
    sizes = bucket_sizes(hashed_blocks(train, hashing, 8192), hashing.num_buckets)
    history = train_sparse(model, released_blocks(train, hashing, targets, 8192), forward_loss, config, sizes)
    assert [record["rows"] for record in history] == [rows] * 3
    assert _normalized_entropy(model, test, hashing) < 0.9
    blocks = labelled_blocks(train, hashing, "converted", [0, 1], 8192)
    counts = release_hashed_counts(ledger, blocks, np.arange(rows), hashing.num_buckets, hashing.num_slots, 2, 8.0, 1)
    assert ledger.epsilon() == pytest.approx(16.0, abs=1e-2)  # the two releases compose
    statistics = CountStatistics.from_release(counts, hashing)
    assert np.array_equal(statistics.sizes, sizes) and statistics.rows == rows
    sample = [block.buckets for block in hashed_blocks(train, hashing, 8192)]
    model = log_odds_model(statistics, sample)
    assert _normalized_entropy(model, test, hashing) < 0.9
    config = SparseTrainConfig(epochs=1, batch_rows=1024, lr=0.05, l2=1.0)
    train_sparse(model, count_target_blocks(train, hashing, statistics, None, 8192), counts_loss, config, sizes)
    assert _normalized_entropy(model, test, hashing) < 0.9


def test_a_release_folder_is_joined_to_its_table_by_position_or_id(ads_tables, tmp_path) -> None:
    train, _, hashing = ads_tables
    out = tmp_path / "release"
    privatize_table(train, out, label_column="converted", id_column="row_id", classes=[0, 1], epsilon=2.0)
    released = load_release(out)
    by_position = PositionTargets.from_released(train, released)
    shuffled = released[np.random.default_rng(0).permutation(len(released))[:30_000]]
    by_id = PositionTargets.from_released(train, shuffled, id_column="row_id")
    positions = np.arange(40_000)
    keep, targets = by_id(positions)
    assert keep.sum() == 30_000 and np.array_equal(targets, by_position(positions)[1][keep])
    assert np.allclose(np.exp(by_position(positions)[1]), released.likelihood)
    with pytest.raises(DataError, match="join them by id"):
        PositionTargets.from_released(train, shuffled)


def test_a_saved_model_predicts_new_rows_hashed_as_its_training_rows(ads_tables, tmp_path) -> None:
    train, test, hashing = ads_tables
    torch.manual_seed(0)
    model = HashedFM(hashing.num_buckets, dim=4, init_std=0.1)
    save_sparse_model(tmp_path / "model.pt", model, hashing)
    loaded, spec = load_sparse_model(tmp_path / "model.pt")
    assert spec == hashing and isinstance(loaded, HashedFM)
    _, expected = predict_sparse(model, hashed_blocks(test, hashing, 5000))
    positions, found = predict_sparse(loaded, hashed_blocks(test, spec, 3000))
    assert np.array_equal(positions, np.arange(20_000)) and np.allclose(found, expected)
