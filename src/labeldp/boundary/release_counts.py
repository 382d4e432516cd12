"""Releases of counts over many rows: a noisy label histogram per public group (a cluster prior) and noisy
label marginals per bin of every public feature (the logistic fit from marginals).

Each counts every member's label inside one release: an aggregate event, its noise calibrated to the most
rows one privacy unit has among the members (:meth:`labeldp.accounting.PrivacyLedger.contribution`),
recorded once per unit. The shared arguments are :mod:`labeldp.boundary.release`'s.
:func:`release_external_counts` reads no label: it records what a source outside labeldp states for
counts it noised itself.
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_epsilon
from labeldp.accounting.events import histogram_event, marginals_event, stated_event
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.release import Release, member_indices, record_release, true_labels
from labeldp.mechanisms import noisy_histogram, noisy_marginals
from labeldp.mechanisms.label_marginals import check_bins
from labeldp.randomness import RandomSource


def release_noisy_histogram(
    ledger: PrivacyLedger,
    labels,
    members,
    groups,
    num_groups: int,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> Release:
    """Per-group label counts of ``members`` with discrete Laplace noise: epsilon-label-DP for each member when
    ``groups`` (each member's, in [0, num_groups)) are public, e.g. k-means clusters of public inputs.

    ``arrays["counts"]`` holds the (num_groups, K) noisy counts, ``arrays["groups"]`` the groups; no labels.
    Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    eps = check_epsilon(epsilon)
    true = true_labels(labels, num_classes)
    indices = member_indices(ledger, members, tag, labels=true, groups=np.asarray(groups))
    units = max(ledger.contribution(indices), 1)
    counts = noisy_histogram(true, groups, num_groups, num_classes, eps, rng, units)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            histogram_event(eps, units),
            f"noisy label histogram, {num_groups} groups x {num_classes} classes, epsilon={eps:g}"
            + (f" for a unit of up to {units} rows" if units > 1 else ""),
            arrays={"counts": counts, "groups": np.asarray(groups)},
            aggregate=True,
            row_event=histogram_event(eps / units) if units > 1 else None,
        ),
    )


def release_label_marginals(
    ledger: PrivacyLedger,
    labels,
    members,
    bins,
    bins_per_feature,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> Release:
    """The label counts in every bin of every public feature, noised: epsilon-label-DP for each member when
    ``bins`` (members x features, each feature's bin) are public.

    Each label is read once per feature, all inside one release recorded once
    (:func:`labeldp.accounting.events.marginals_event`). ``arrays["counts"]`` holds the (total bins, K) noisy
    counts; no labels. Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    eps = check_epsilon(epsilon)
    true = true_labels(labels, num_classes)
    codes, sizes = check_bins(bins, bins_per_feature)
    indices = member_indices(ledger, members, tag, labels=true, bins=codes)
    units = max(ledger.contribution(indices), 1)
    counts = noisy_marginals(true, codes, sizes, num_classes, eps, rng, units)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            marginals_event(eps, sizes.size, num_classes, units),
            f"noisy label marginals, {sizes.size} features ({int(sizes.sum())} bins) x {num_classes} classes, "
            f"epsilon={eps:g}" + (f" for a unit of up to {units} rows" if units > 1 else ""),
            arrays={"counts": counts},
            aggregate=True,
            row_event=marginals_event(eps / units, sizes.size, num_classes) if units > 1 else None,
        ),
    )


def release_external_counts(
    ledger: PrivacyLedger,
    members,
    stated_epsilon: float,
    description: str,
    tag: str | None = None,
    **arrays: np.ndarray,
) -> Release:
    """Noisy counts a source outside labeldp released (a measurement API's aggregate reports), recorded with
    the guarantee it states; nothing is drawn or read.

    The ledger records once for all ``members``, as an aggregate, the pure ``stated_epsilon``-DP guarantee
    per privacy unit (:func:`~labeldp.accounting.events.stated_event`), so it composes with labeldp's own
    releases of the same rows; it holds only if the statement is true. ``arrays``, the counts as they
    arrived and what was derived from them, are kept in the release.
    """
    eps = check_epsilon(stated_epsilon)
    indices = member_indices(ledger, members, tag)
    release = Release(
        indices,
        stated_event(eps),
        f"{description}, epsilon={eps:g} as the source states (recorded, not drawn by labeldp)",
        arrays=arrays,
        aggregate=True,
    )
    return record_release(ledger, tag, release)


__all__ = ["release_external_counts", "release_label_marginals", "release_noisy_histogram"]
