"""Models from noisy label counts over hashed features: post-processing of one release.

The release (:func:`labeldp.boundary.release_hashed.release_hashed_counts`) gives every bucket j of
every slot a noisy positive count S_j (discrete Laplace noise of variance v) and its public size n_j;
nothing here reads anything else, so it costs no privacy.

The base rate r (:func:`base_rate`) averages each slot's unbiased estimate with inverse-variance
weights. Bucket rates (:func:`bucket_rates`) shrink S_j / n_j towards r by empirical Bayes: per slot
the true rates scatter around r with a variance tau^2 estimated by moments (E x_j^2 = n_j^2 tau^2 +
n_j r (1 - r) + v for x_j = S_j - n_j r), and t_j = r + w_j (S_j / n_j - r), w_j = n_j^2 tau^2 /
(n_j^2 tau^2 + n_j r (1 - r) + v), clipped to [0, 1]. Two models, both
:class:`~labeldp.models.sparse.HashedLogistic`: :func:`log_odds_model` (two parameters fitted on a
sample), and the logistic regression whose likelihood's label terms are the counts themselves,
sum_i softplus(z_i) - sum_j w_j S_j - b N, trained by :func:`labeldp.training.out_of_core.train_sparse`
with :func:`~labeldp.training.out_of_core.counts_loss` on :func:`rate_targets`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from scipy.special import expit, logit

from labeldp.data.hashing import HashSpec, hashed_blocks
from labeldp.errors import ConfigError
from labeldp.models.sparse import HashedLogistic

#: the shrunk rates are kept in [RATE_FLOOR, 1 - RATE_FLOOR] before their log-odds are taken
RATE_FLOOR = 1e-4


def discrete_laplace_variance(parameter: float) -> float:
    """The variance 2 e^-a / (1 - e^-a)^2 of discrete Laplace noise of parameter a."""
    decay = np.exp(-parameter)
    return float(2 * decay / (1 - decay) ** 2)


def base_rate(positives: np.ndarray, sizes: np.ndarray, slot_of_bucket: np.ndarray) -> float:
    """The positive rate from every slot's noisy positives, weighted by the inverse of its non-empty buckets, clipped.

    An empty bucket's count is known to be zero, so a slot's variance is v times its non-empty buckets:
    the slot with the fewest values dominates.
    """
    occupied = sizes > 0
    slots = int(slot_of_bucket.max()) + 1
    totals = np.bincount(slot_of_bucket[occupied], weights=positives[occupied], minlength=slots)
    buckets = np.bincount(slot_of_bucket[occupied], minlength=slots)
    rows = sizes.sum() / slots
    weights = 1.0 / np.maximum(buckets, 1)
    return float(np.clip((weights @ totals) / weights.sum() / rows, RATE_FLOOR, 1 - RATE_FLOOR))


def bucket_rates(
    positives: np.ndarray, sizes: np.ndarray, slot_of_bucket: np.ndarray, noise_variance: float, rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """Every bucket's positive rate shrunk towards ``rate`` (see :mod:`labeldp.training.from_counts`), and its slope.

    The slope d t_j / d S_j (w_j / n_j where S_j / n_j lies in (0, 1), else 0) is how the rate follows its
    own count's noise, which :func:`log_odds_model` corrects for. An empty bucket gets ``rate``.
    """
    n = sizes.astype(np.float64)
    excess = positives - n * rate
    binomial = n * rate * (1 - rate)
    slots = int(slot_of_bucket.max()) + 1
    numerator = np.bincount(slot_of_bucket, weights=excess**2 - binomial - noise_variance * (n > 0), minlength=slots)
    tau2 = np.maximum(numerator, 0.0) / np.maximum(np.bincount(slot_of_bucket, weights=n**2, minlength=slots), 1.0)
    signal = n**2 * tau2[slot_of_bucket]
    shrink = np.divide(signal, signal + binomial + noise_variance, out=np.zeros_like(n), where=n > 0)
    observed = np.divide(positives, n, out=np.full_like(n, rate), where=n > 0)
    slopes = np.divide(shrink, n, out=np.zeros_like(n), where=(n > 0) & (observed > 0) & (observed < 1))
    return rate + shrink * (np.clip(observed, 0.0, 1.0) - rate), slopes


def rate_targets(rates: np.ndarray, rate: float, buckets: np.ndarray) -> np.ndarray:
    """The (rows, F + 1) targets of :func:`~labeldp.training.out_of_core.counts_loss`: bucket rates, then
    the base rate."""
    targets = np.empty((buckets.shape[0], buckets.shape[1] + 1), dtype=np.float32)
    targets[:, :-1] = rates[buckets]
    targets[:, -1] = rate
    return targets


@dataclass(frozen=True)
class CountStatistics:
    """What the models are fitted from.

    Attributes
    ----------
    positives, sizes, rates, slopes : numpy.ndarray
        (num_buckets,) S_j (zero for an empty bucket, as its public size says), n_j, the shrunk rates t_j
        and their slopes d t_j / d S_j.
    rate : float
        The base rate r.
    noise_variance : float
        Each count's noise variance.
    """

    positives: np.ndarray
    sizes: np.ndarray
    rates: np.ndarray
    slopes: np.ndarray
    rate: float
    noise_variance: float
    rows: int

    @classmethod
    def from_release(cls, release, spec: HashSpec) -> CountStatistics:
        """From a :func:`~labeldp.boundary.release_hashed.release_hashed_counts` release of two classes."""
        counts, sizes = np.asarray(release.arrays["counts"]), np.asarray(release.arrays["sizes"])
        if counts.shape != (spec.num_buckets, 2):
            raise ConfigError(f"expected ({spec.num_buckets}, 2) counts of two classes, got {counts.shape}")
        positives = np.where(sizes > 0, counts[:, 1], 0).astype(np.float64)
        variance = discrete_laplace_variance(release.event.noise_parameter)
        slots = spec.slot_of_bucket()
        rate = base_rate(positives, sizes, slots)
        rates, slopes = bucket_rates(positives, sizes, slots, variance, rate)
        return cls(positives, sizes, rates, slopes, rate, variance, int(sizes.sum() // spec.num_slots))


def log_odds_model(statistics: CountStatistics, sample: Iterable[np.ndarray], newton_steps: int = 25) -> HashedLogistic:
    """The naive-Bayes-like model w_j = alpha u_j, u_j = logit(t_j) - logit(r), bias beta, fitted by Newton.

    (alpha, beta) maximise the counts' logistic likelihood over a sample of the rows. Its label term is
    alpha sum_j u_j S_j + beta N; since u_j is computed from S_j, noise inflates that sum by about v sum_j
    du_j / dS_j (Stein's identity), which is subtracted (uncorrected, alpha comes out several times too
    large). alpha is kept in [0, 1] (0: the base rate alone; 1: naive Bayes): where the counts hold no
    signal the likelihood is flat in alpha and an unbounded fit wanders off.
    """
    rate, rows = statistics.rate, statistics.rows
    rates = np.clip(statistics.rates, RATE_FLOOR, 1 - RATE_FLOOR)
    score = logit(rates) - logit(rate)
    sums = np.concatenate([score[buckets].sum(axis=1) for buckets in sample])
    scale = rows / sums.size
    inflation = statistics.noise_variance * np.sum(statistics.slopes / (rates * (1 - rates)))
    linear = np.array([score @ statistics.positives - inflation, rate * rows])  # sum_i y_i U_i and N
    theta = np.array([1.0, logit(rate)])
    design = np.stack([sums, np.ones_like(sums)], axis=1)
    for step in range(2 * newton_steps):
        free = slice(0, 2) if step < newton_steps else slice(1, 2)  # then the intercept alone, alpha clipped
        p = expit(design @ theta)
        gradient = (scale * design.T @ p - linear)[free]
        hessian = scale * (design[:, free] * (p * (1 - p))[:, None]).T @ design[:, free]
        change = np.linalg.solve(hessian + 1e-9 * np.eye(hessian.shape[0]), gradient)
        theta[free] -= change / max(1.0, float(np.abs(change).max()))  # damped: at most 1 per step
        theta[0] = np.clip(theta[0], 0.0, 1.0)
    model = HashedLogistic(score.size)
    with torch.no_grad():
        model.linear.weight.copy_(torch.from_numpy((theta[0] * score).astype(np.float32)).unsqueeze(1))
        model.bias.fill_(float(theta[1]))
    return model


def count_target_blocks(
    source,
    spec: HashSpec,
    statistics: CountStatistics,
    members: np.ndarray | None = None,
    block_rows: int = 1 << 18,
    rank: int = 0,
    world: int = 1,
) -> Callable[[int], Iterator[tuple[np.ndarray, np.ndarray]]]:
    """``epoch_blocks`` for :func:`~labeldp.training.out_of_core.train_sparse` with the counts loss: buckets and rates.

    ``members`` marks the rows counted (default: all); ``rank`` and ``world`` read only this rank's row groups.
    """

    def blocks(epoch: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for block in hashed_blocks(source, spec, block_rows, (), rank, world):
            buckets = block.buckets if members is None else block.buckets[members[block.positions]]
            yield buckets, rate_targets(statistics.rates, statistics.rate, buckets)

    return blocks


__all__ = [
    "CountStatistics",
    "RATE_FLOOR",
    "count_target_blocks",
    "base_rate",
    "bucket_rates",
    "discrete_laplace_variance",
    "log_odds_model",
    "rate_targets",
]
