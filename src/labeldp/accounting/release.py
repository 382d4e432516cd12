"""The privacy boundary: release noisy labels *and* record the spend, in one call.

These are the functions the rest of labeldp uses to read true training labels. Each validates its
arguments, draws the noisy labels with a mechanism from :mod:`labeldp.mechanisms`, and records the
corresponding dp_accounting event on the ledger for exactly the examples it touched.
"""

from __future__ import annotations

import dp_accounting
import numpy as np

from labeldp._validation import check_epsilon, check_labels, check_priors, check_same_length
from labeldp.accounting.ledger import PrivacyLedger, histogram_event, laplace_one_hot_event, randomized_response_event
from labeldp.accounting.pate import pate_event
from labeldp.mechanisms import (confident_gnmax, gnmax, laplace_one_hot, noisy_histogram, randomized_response,
                                rr_with_prior, teacher_votes)
from labeldp.randomness import RandomSource


def _members(ledger: PrivacyLedger, members, tag: str | None, **arrays: np.ndarray) -> np.ndarray:
    """The members as a mask, after checking that every per-member array matches them in length and
    that ``tag`` is new: all before anything is drawn."""
    mask = ledger.members_mask(members)
    check_same_length(**arrays, members=np.flatnonzero(mask))
    if ledger.has(tag or ""):
        raise ValueError(f"the ledger already has an entry tagged {tag!r}")
    return mask


def release_randomized_response(
    ledger: PrivacyLedger,
    labels,
    members,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> np.ndarray:
    """K-ary RR on ``labels`` (the true labels of examples ``members``), recorded on ``ledger``.

    Each member's label is released with epsilon-label-DP; the ledger records one
    ``RandomizedResponseDpEvent`` over K buckets for the members.
    """
    eps = check_epsilon(epsilon)
    true = check_labels(labels, num_classes)
    mask = _members(ledger, members, tag, labels=true)
    noisy = randomized_response(true, num_classes, eps, rng)
    ledger.record(randomized_response_event(eps, num_classes), mask,
                  f"randomized response, K={num_classes}, epsilon={eps:g}", tag)
    return noisy


def release_rr_with_prior(
    ledger: PrivacyLedger,
    labels,
    members,
    priors,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """RR-with-prior on ``labels`` (of examples ``members``, in that order), recorded on ``ledger``.

    The priors must not depend on these examples' own labels (e.g. a model trained on other examples'
    noisy labels). Accounting: for each example the pair of output distributions under two true labels
    is dominated by RR over that example's k buckets (two labels inside the top k are exactly RR; a
    label outside releases the uniform distribution on the top k, a mixture of RR outputs; two labels
    outside release the same distribution). RR's hockey-stick divergence at fixed epsilon decreases in
    k, so the event recorded is RR over the smallest k >= 2 drawn, which dominates every member.
    """
    eps = check_epsilon(epsilon)
    prior = check_priors(priors)
    true = check_labels(labels, prior.shape[1])
    mask = _members(ledger, members, tag, labels=true, priors=prior)
    noisy, k = rr_with_prior(true, prior, eps, rng)
    informative = k[k >= 2]
    k_event = int(informative.min()) if informative.size else 1
    ledger.record(randomized_response_event(eps, k_event), mask,
                  f"RR-with-prior, K={prior.shape[1]}, epsilon={eps:g}, k in [{k.min()}, {k.max()}]", tag)
    return noisy, k


def release_true_labels(ledger: PrivacyLedger, labels, members, num_classes: int, tag: str | None = None) -> np.ndarray:
    """Hand out the true labels of ``members`` *without* privacy, for non-private reference runs.

    Recorded as a ``NonPrivateDpEvent``, so the ledger's epsilon becomes infinite: a run that uses
    this can never be reported as private.
    """
    true = check_labels(labels, num_classes)
    mask = _members(ledger, members, tag, labels=true)
    ledger.record(dp_accounting.NonPrivateDpEvent(), mask, "true labels (non-private)", tag)
    return true.copy()


def release_noisy_histogram(ledger: PrivacyLedger, labels, members, groups, num_groups: int, num_classes: int,
                            epsilon: float, rng: RandomSource = None, tag: str | None = None) -> np.ndarray:
    """Per-group label counts of ``members`` with discrete Laplace noise (epsilon-label-DP), recorded.

    ``groups`` must be public (e.g. k-means clusters of public inputs). Every member's label is read,
    so the ledger records the histogram event for all members; later releases of the same labels
    compose sequentially with it.
    """
    eps = check_epsilon(epsilon)
    true = check_labels(labels, num_classes)
    mask = _members(ledger, members, tag, labels=true, groups=np.asarray(groups))
    counts = noisy_histogram(true, groups, num_groups, num_classes, eps, rng)
    ledger.record(histogram_event(eps), mask,
                  f"noisy label histogram, {num_groups} groups x {num_classes} classes, epsilon={eps:g}", tag)
    return counts


def release_laplace_one_hot(ledger: PrivacyLedger, labels, members, num_classes: int, epsilon: float,
                            rng: RandomSource = None, tag: str | None = None) -> np.ndarray:
    """ALIBI's release: each member's one-hot label plus Laplace(2 / epsilon) noise per coordinate
    (epsilon-label-DP), recorded on ``ledger`` as two unit-shifted Laplace coordinates."""
    eps = check_epsilon(epsilon)
    true = check_labels(labels, num_classes)
    mask = _members(ledger, members, tag, labels=true)
    noisy = laplace_one_hot(true, num_classes, eps, rng)
    ledger.record(laplace_one_hot_event(eps), mask,
                  f"Laplace one-hot (ALIBI), K={num_classes}, epsilon={eps:g}", tag)
    return noisy


def release_pate_labels(ledger: PrivacyLedger, teacher_predictions, teacher_of, members, num_classes: int,
                        noise_std: float, threshold: float | None = None, threshold_noise_std: float | None = None,
                        rng: RandomSource = None, tag: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """PATE's aggregated answers to every query, recorded on ``ledger``.

    Args:
        teacher_predictions: (teachers, queries) class votes; teacher t must have been trained on
            the labels of the members with ``teacher_of == t`` only (and on public inputs).
        teacher_of: each member's teacher, integers in [0, teachers): the partition is disjoint.
        noise_std: GNMax vote noise sigma.
        threshold, threshold_noise_std: both or neither; with them, confident GNMax (answer only if
            the top vote count plus N(0, threshold_noise_std^2) reaches ``threshold``).

    Returns:
        (answered mask, labels) over the queries; labels are -1 where a query was not answered.

    Every member is charged for every query (replacing its label may change its teacher's vote on
    any of them): ``queries`` GNMax answers and, for the confident variant, as many threshold checks
    (:func:`labeldp.accounting.pate.pate_event`), whatever the number answered.
    """
    if (threshold is None) != (threshold_noise_std is None):
        raise ValueError("confident GNMax needs both threshold and threshold_noise_std (plain GNMax neither)")
    votes = teacher_votes(teacher_predictions, num_classes)
    teachers, queries = np.asarray(teacher_predictions).shape
    assignment = check_labels(teacher_of, teachers, "teacher_of")
    mask = _members(ledger, members, tag, teacher_of=assignment)
    event = pate_event(queries, noise_std, threshold_noise_std)
    if threshold is None:
        labels = gnmax(votes, noise_std, rng)
        answered = np.ones(queries, dtype=bool)
        kind = "GNMax"
    else:
        if not 0 < threshold <= teachers:
            raise ValueError(f"threshold must lie in (0, {teachers}] votes, got {threshold}")
        answered, labels = confident_gnmax(votes, threshold, threshold_noise_std, noise_std, rng)
        kind = f"confident GNMax (threshold {threshold:g}, noise {threshold_noise_std:.4g})"
    ledger.record(event, mask, f"PATE {kind}, {teachers} teachers, {queries} queries, vote noise {noise_std:.4g}",
                  tag)
    return answered, labels
