"""Every privacy spend labeldp records, as a ``dp_accounting`` event: one constructor per mechanism, and
the neighbouring relations they are stated under.

- label DP, the default: *replace one label*, neighbours having the same inputs and differing in one
  example's label (``NeighboringRelation.REPLACE_ONE``);
- full DP (DP-SGD): *add or remove one example*, inputs and label together (``ADD_OR_REMOVE_ONE``).

How each event's epsilon is computed is :mod:`labeldp.accounting.ledger`'s job.
"""

from __future__ import annotations

import math

import dp_accounting
import numpy as np
from dp_accounting import dp_event

from labeldp.errors import ConfigError
from labeldp.mechanisms.label_marginals import moved_cells
from labeldp.mechanisms.laplace import LAPLACE_GRID, laplace_parameter

NEIGHBORING_RELATION = dp_accounting.NeighboringRelation.REPLACE_ONE
DPSGD_RELATION = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
RELATION_NAMES = {
    NEIGHBORING_RELATION: "replace-one label",
    DPSGD_RELATION: "add-or-remove one example",
}
#: dp_accounting's Gaussian PLD for a query that moves by (at most) its sensitivity between neighbours.
#: Under REPLACE_ONE, dp_accounting assumes a move of twice the sensitivity (a replaced example in a
#: sum of clipped vectors), which is not what a GaussianDpEvent on the label ledger means.
GAUSSIAN_SHIFT_RELATION = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE


def histogram_event(epsilon: float, contribution: int = 1) -> dp_event.DpEvent:
    """A per-group label histogram with discrete Laplace(epsilon / 2) noise on every cell: epsilon-DP under
    replace-one-label neighbours when the groups are public.

    A replaced label moves two cells by one: ``SelfComposedDpEvent(DiscreteLaplaceDpEvent(epsilon / 2, 1),
    2)``. ``contribution`` c is the most labels one privacy unit has among the members; they change
    together, so for c > 1 the event is ``DiscreteLaplaceDpEvent(epsilon / 2c, 2c)``.
    """
    if contribution > 1:
        return dp_event.DiscreteLaplaceDpEvent(epsilon / (2.0 * contribution), 2 * int(contribution))
    return dp_event.SelfComposedDpEvent(dp_event.DiscreteLaplaceDpEvent(epsilon / 2.0, 1), 2)


def marginals_event(epsilon: float, num_features: int, num_classes: int, contribution: int = 1) -> dp_event.DpEvent:
    """Noisy label marginals over B public features (:mod:`labeldp.mechanisms.label_marginals`): epsilon-DP.

    A replaced label moves m cells by one (m = B with two classes, 2B with more; times ``contribution``, as
    in :func:`histogram_event`), and each cell gets discrete Laplace(epsilon / m):
    ``DiscreteLaplaceDpEvent(epsilon / m, m)``, the pure guarantee for the whole table. As m unit shifts
    composed, its PLD would lose epsilon at delta = 0 to truncation on a wide table.
    """
    cells = moved_cells(num_features, num_classes) * int(contribution)
    return dp_event.DiscreteLaplaceDpEvent(epsilon / cells, cells)


def hashed_counts_event(epsilon: float, num_slots: int, num_classes: int, contribution: int = 1) -> dp_event.DpEvent:
    """Noisy label counts over F hashed slots (:mod:`labeldp.mechanisms.hashed_counts`): epsilon-DP, accounted
    like :func:`marginals_event`.

    Each row lies in one bucket of each slot, so a replaced label moves the cells by at most m = F in L1
    with two classes (2F with more), c times that for a unit of c rows (two slots hashed to one bucket move
    it by two: the bound still holds).
    """
    return marginals_event(epsilon, num_slots, num_classes, contribution)


def laplace_one_hot_event(epsilon: float) -> dp_event.DpEvent:
    """ALIBI's release on the grid (1/m) Z, m = ``LAPLACE_GRID``: epsilon-label-DP.

    m onehot(y) plus discrete Laplace(epsilon / (2m)) per coordinate; a replaced label shifts two
    coordinates by m: ``SelfComposedDpEvent(DiscreteLaplaceDpEvent(epsilon / (2m), m), 2)``.
    """
    return dp_event.SelfComposedDpEvent(dp_event.DiscreteLaplaceDpEvent(laplace_parameter(epsilon), LAPLACE_GRID), 2)


def vector_labels_event(epsilon: float) -> dp_event.DpEvent:
    """VLP's binary vector (:mod:`labeldp.mechanisms.label_vectors`): epsilon-label-DP.

    Each coordinate is binary RR at epsilon / 2 on the one-hot bit, and a replaced label changes two of
    them: ``SelfComposedDpEvent(randomized_response_event(epsilon / 2, 2), 2)``, exactly.
    """
    return dp_event.SelfComposedDpEvent(randomized_response_event(epsilon / 2.0, 2), 2)


def laplace_value_event(epsilon: float, steps: int) -> dp_event.DpEvent:
    """A numeric label on a grid of ``steps`` + 1 evenly spaced values with discrete Laplace(epsilon / steps)
    noise per step: a replaced label moves at most ``steps`` steps, so it is epsilon-DP.
    """
    steps = int(steps)
    if steps < 1:
        raise ConfigError(f"a label range spans at least one grid step, got {steps}")
    return dp_event.DiscreteLaplaceDpEvent(epsilon / steps, steps)


def rr_on_sets_event(epsilon: float, sizes) -> dp_event.DpEvent:
    """RR inside a public set of each example's own (RR-with-prior's top k classes, RR-on-bins' d bins).

    Each example's pair of output distributions under two labels is dominated by RR over its set (two
    labels inside are exactly RR; a label outside releases a uniform member, a mixture of RR outputs; two
    outside release the same), and RR's privacy profile at fixed epsilon decreases in the number of buckets:
    the event is RR over the smallest of ``sizes`` >= 2, or no event if every set has one member. ``sizes``
    depend on public priors only.
    """
    d = np.atleast_1d(np.asarray(sizes, dtype=np.int64))
    informative = d[d >= 2]
    return randomized_response_event(epsilon, int(informative.min())) if informative.size else dp_event.NoOpDpEvent()


def stated_event(epsilon: float) -> dp_event.DpEvent:
    """A pure epsilon-DP guarantee stated by a source outside labeldp, recorded, never drawn here:
    ``LaplaceDpEvent(1 / epsilon)``, which the ledger accounts as exactly that guarantee.
    """
    return dp_event.LaplaceDpEvent(1.0 / epsilon)


def randomized_response_event(epsilon: float, num_buckets: int) -> dp_event.DpEvent:
    """RR over ``num_buckets`` = k values keeping its input with e^eps / (e^eps + k - 1); no event for k = 1.

    dp_accounting's RR keeps the input with probability 1 - p and otherwise draws a uniform bucket
    (possibly the input): p = k / (e^eps + k - 1) gives the same distribution.
    """
    k = int(num_buckets)
    if k == 1:
        return dp_event.NoOpDpEvent()
    noise = k * math.exp(-epsilon) / (1.0 + (k - 1) * math.exp(-epsilon))
    return dp_event.RandomizedResponseDpEvent(noise_parameter=noise, num_buckets=k)


def non_private_event() -> dp_event.DpEvent:
    """True labels handed out without noise: the ledger's epsilon becomes infinite."""
    return dp_event.NonPrivateDpEvent()


def check_queries(queries: int) -> int:
    """``queries`` as an int, refused unless a positive integer."""
    if int(queries) != queries or queries < 1:
        raise ConfigError(f"queries must be a positive integer, got {queries}")
    return int(queries)


def pate_event(queries: int, noise_std: float, threshold_noise_std: float | None = None) -> dp_event.DpEvent:
    """PATE's aggregator: ``queries`` GNMax answers, each ``GaussianDpEvent(noise_std / sqrt(2))``, and for
    the confident variant as many threshold checks, each ``GaussianDpEvent(threshold_noise_std)``.

    Label-DP under replace-one-label neighbours when every teacher was trained on its own disjoint part of
    the labels. Every query, fixed before any vote is seen, is charged answered or not;
    :mod:`labeldp.accounting.calibration` explains the charge.
    """
    count = check_queries(queries)
    if not noise_std > 0:
        raise ConfigError(f"noise_std must be > 0, got {noise_std}")
    answers = dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(noise_std / math.sqrt(2.0)), count)
    if threshold_noise_std is None:
        return answers
    if not threshold_noise_std > 0:
        raise ConfigError(f"threshold_noise_std must be > 0, got {threshold_noise_std}")
    checks = dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(threshold_noise_std), count)
    return dp_event.ComposedDpEvent([checks, answers])


def gaussian_equivalent(event: dp_event.DpEvent) -> dp_event.GaussianDpEvent | None:
    """The one Gaussian that a composition of unsampled Gaussians equals, or None for any other event.

    Multipliers s_i compose into (sum_i s_i^-2)^(-1/2) exactly (Gaussian PLDs' means and variances add);
    its one PLD is far cheaper than composing the parts' (PATE's hundreds of queries), and as exact.
    """
    if isinstance(event, dp_event.GaussianDpEvent):
        return event if event.noise_multiplier > 0 else None
    if isinstance(event, dp_event.SelfComposedDpEvent) and event.count > 0:
        inner = gaussian_equivalent(event.event)
        return None if inner is None else dp_event.GaussianDpEvent(inner.noise_multiplier / math.sqrt(event.count))
    if isinstance(event, dp_event.ComposedDpEvent) and event.events:
        parts = [gaussian_equivalent(part) for part in event.events]
        gaussians = [part for part in parts if part is not None]
        if len(gaussians) < len(parts):
            return None
        return dp_event.GaussianDpEvent(math.fsum(part.noise_multiplier**-2 for part in gaussians) ** -0.5)
    return None


def dpsgd_event(noise_multiplier: float, sampling_probability: float, steps: int) -> dp_event.DpEvent:
    """``steps`` Poisson-sampled Gaussian steps, under add-or-remove-one-example neighbours
    (:data:`DPSGD_RELATION`), the clipping bound folded into ``noise_multiplier`` (0: no privacy).
    """
    if not noise_multiplier >= 0:
        raise ConfigError(f"noise_multiplier must be >= 0, got {noise_multiplier}")
    step = dp_event.PoissonSampledDpEvent(sampling_probability, dp_event.GaussianDpEvent(noise_multiplier))
    return dp_event.SelfComposedDpEvent(step, int(steps))


def selection_event(trial: dp_event.DpEvent, mean: float, shape: float) -> dp_event.DpEvent:
    """A private selection (Papernot & Steinke 2022): ``trial`` repeated a random number of times, the best
    output kept; accounted with dp_accounting's RDP accountant.

    ``mean`` is the mean number of trials (> 1), ``shape`` their distribution's (inf: Poisson, 1:
    geometric, otherwise truncated negative binomial).
    """
    if not math.isfinite(mean) or mean <= 1:
        raise ConfigError(
            f"the selection's mean number of trials must be a finite number > 1 (a mean of 1 is a "
            f"single trial: no selection), got {mean}"
        )
    if not shape > 0:
        raise ConfigError(f"the selection's shape must be > 0 (inf: Poisson, 1: geometric), got {shape}")
    return dp_event.RepeatAndSelectDpEvent(trial, float(mean), float(shape))
