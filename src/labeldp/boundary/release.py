"""The privacy boundary's releases: each ``release_*`` function draws with a mechanism, records its event
on the ledger for exactly the examples it read, and returns a :class:`Release`.

Shared arguments: ``ledger`` records the release (replace-one-label neighbours); ``labels`` are the
:class:`~labeldp.boundary.labels.PrivateLabels` of ``members`` in index order (class positions, or grid
indices of numeric labels); ``members`` are distinct indices into the ledger's dataset or a boolean mask;
``rng`` is the noise (:mod:`labeldp.randomness`: an integer seed is reproducible, hence not private);
``tag`` names the ledger entry and must be new; ``epsilon`` is what a privacy unit may spend, so each of
a unit's c rows gets epsilon / c. Every argument is checked before anything is drawn
(:class:`~labeldp.errors.ConfigError`; a label out of range is not named); withheld labels raise
:class:`~labeldp.boundary.PrivateLabelAccessError`.
"""

from __future__ import annotations

import math

import numpy as np

from labeldp._validation import check_epsilon, check_labels, check_num_classes, check_priors
from labeldp.accounting.events import (
    dpsgd_event,
    laplace_one_hot_event,
    laplace_value_event,
    non_private_event,
    pate_event,
    randomized_response_event,
    rr_on_sets_event,
    stated_event,
    vector_labels_event,
)
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.labels import PrivateLabels, unseal
from labeldp.boundary.release_record import Release, member_indices, per_row, record_release
from labeldp.errors import ConfigError, DataError
from labeldp.mechanisms import (
    channel_epsilon,
    check_channel,
    confident_gnmax,
    gnmax,
    is_randomized_response,
    laplace_one_hot,
    laplace_one_hot_likelihood,
    laplace_value,
    laplace_value_likelihood,
    optimal_bins,
    randomized_response,
    randomized_response_likelihood,
    released_values,
    rr_on_bins,
    rr_on_bins_likelihood,
    rr_with_prior,
    rr_with_prior_likelihood,
    teacher_votes,
    vector_labels,
    vector_labels_likelihood,
    vector_labels_one_hot_estimate,
)
from labeldp.randomness import RandomSource


def true_labels(labels: PrivateLabels, num_classes: int) -> np.ndarray:
    """The true labels (class or grid positions), read here: plain arrays are refused by ``unseal``. The domain
    is checked before any label is read, so that whether a release goes ahead never depends on the labels."""
    num_classes = check_num_classes(num_classes)
    declared = labels.num_classes if isinstance(labels, PrivateLabels) else None
    if declared is not None and declared != num_classes:
        raise ConfigError(f"the labels' domain has {declared} values; this release was asked for {num_classes}")
    return check_labels(unseal(labels), num_classes)


def release_randomized_response(
    ledger: PrivacyLedger,
    labels,
    members,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> Release:
    """K-ary randomized response: epsilon-label-DP per member, recorded as one ``RandomizedResponseDpEvent``.

    ``arrays["k"]`` is K for every member. Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    eps = check_epsilon(epsilon)
    true = true_labels(labels, num_classes)
    indices = member_indices(ledger, members, tag, labels=true)
    eps, per_unit = per_row(ledger, indices, eps)
    noisy = randomized_response(true, num_classes, eps, rng)
    return record_release(ledger, tag, rr_release(indices, noisy, num_classes, eps, per_unit))


def rr_release(indices: np.ndarray, noisy: np.ndarray, num_classes: int, epsilon: float, per_unit: str) -> Release:
    """The :class:`Release` of K-ary RR's labels ``noisy`` of the sorted members ``indices``; nothing recorded."""
    return Release(
        indices,
        randomized_response_event(epsilon, num_classes),
        f"randomized response, K={num_classes}, epsilon={epsilon:g}{per_unit}",
        noisy,
        randomized_response_likelihood(noisy, num_classes, epsilon),
        {"k": np.full(noisy.size, num_classes)},
    )


def release_rr_with_prior(
    ledger: PrivacyLedger, labels, members, priors, epsilon: float, rng: RandomSource = None, tag: str | None = None
) -> Release:
    """RR-with-prior: epsilon-label-DP per member when ``priors`` do not depend on the members' own labels.

    ``priors`` holds one distribution over the K classes per member (e.g. from a model trained on other
    examples' noisy labels); each label is released by RR over its prior's top k classes, ``arrays["k"]``.
    For one member, two labels inside its top k are exactly RR over k; a label outside releases the uniform
    distribution on the top k, a mixture of RR's outputs; two outside release the same. RR's hockey-stick
    divergence at fixed epsilon decreases in k, so RR over the smallest k >= 2 drawn is recorded, dominating
    every member (nothing if every k is 1: no release then depends on a label).
    Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    eps = check_epsilon(epsilon)
    prior = check_priors(priors)
    true = true_labels(labels, prior.shape[1])
    indices = member_indices(ledger, members, tag, labels=true, priors=prior)
    eps, per_unit = per_row(ledger, indices, eps)
    noisy, k = rr_with_prior(true, prior, eps, rng)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            rr_on_sets_event(eps, k),
            f"RR-with-prior, K={prior.shape[1]}, epsilon={eps:g}{per_unit}, k in [{k.min()}, {k.max()}]",
            noisy,
            rr_with_prior_likelihood(noisy, prior, eps),
            {"k": k},
        ),
    )


def release_rr_on_bins(
    ledger: PrivacyLedger,
    labels,
    members,
    grid,
    priors,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
    prior_index=None,
) -> Release:
    """RR-on-bins (Ghazi et al. 2023) on numeric labels: epsilon-label-DP per member when each prior row does
    not depend on the labels of the members that use it.

    ``priors`` are distributions over the public ``grid``: one (G,) row for every member, (m, G) rows chosen
    by ``prior_index``, or one row per member; e.g. a noisy histogram released and recorded beforehand. The
    optimal map of each row is solved once, then each label is released as a bin by RR over its map's d bins.
    Recorded as RR over the smallest d >= 2 (:func:`~labeldp.accounting.events.rr_on_sets_event`), which
    dominates every member. The release's ``labels`` are the bins, its likelihood the channel over the grid,
    ``arrays["values"]`` the released values, ``arrays["k"]`` each d and ``arrays["bin_of"]`` each member's map.
    Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    eps = check_epsilon(epsilon)
    true = true_labels(labels, np.asarray(grid).size)
    indices = member_indices(ledger, members, tag, labels=true)
    eps, per_unit = per_row(ledger, indices, eps)
    maps = optimal_bins(priors, grid, eps)
    values, bins, d = rr_on_bins(true, grid, maps, eps, rng, prior_index)
    bin_of = (
        maps.bin_of
        if prior_index is None and len(maps.d) == true.size
        else maps.bin_of[np.zeros(true.size, dtype=np.int64) if prior_index is None else np.asarray(prior_index)]
    )
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            rr_on_sets_event(eps, d),
            f"RR-on-bins, G={np.asarray(grid).size}, epsilon={eps:g}{per_unit}, d in [{d.min()}, {d.max()}]",
            bins,
            rr_on_bins_likelihood(bins, grid, maps, eps, prior_index),
            {"values": values, "k": d, "bin_of": bin_of.astype(np.int16)},
        ),
    )


def release_laplace_value(
    ledger: PrivacyLedger, labels, members, grid, epsilon: float, rng: RandomSource = None, tag: str | None = None
) -> Release:
    """The Laplace mechanism on numeric labels over the evenly spaced ``grid``: epsilon-label-DP per member.

    Noise is drawn on the exact integer lattice of the grid's step (:mod:`labeldp.mechanisms.laplace_value`)
    and recorded as ``DiscreteLaplaceDpEvent(epsilon / (G - 1), G - 1)``. ``arrays["noisy_steps"]`` is the
    release, in steps from grid[0], ``arrays["values"]`` its values, ``labels`` the nearest grid points.
    Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    eps = check_epsilon(epsilon)
    points = np.asarray(grid, dtype=np.float64)
    true = true_labels(labels, points.size)
    indices = member_indices(ledger, members, tag, labels=true)
    eps, per_unit = per_row(ledger, indices, eps)
    noisy = laplace_value(true, points, eps, rng)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            laplace_value_event(eps, points.size - 1),
            f"Laplace value, G={points.size} grid over [{points[0]:g}, {points[-1]:g}], epsilon={eps:g}{per_unit}",
            np.clip(noisy, 0, points.size - 1),
            laplace_value_likelihood(noisy, points, eps),
            {"noisy_steps": noisy, "values": released_values(noisy, points)},
        ),
    )


def release_true_labels(ledger: PrivacyLedger, labels, members, num_classes: int, tag: str | None = None) -> Release:
    """The true labels *without* privacy, for non-private reference runs.

    Recorded as a ``NonPrivateDpEvent``: the ledger's epsilon becomes infinite, so the run can never be
    reported as private. Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    true = true_labels(labels, num_classes)
    indices = member_indices(ledger, members, tag, labels=true)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            non_private_event(),
            "true labels (non-private)",
            true.copy(),
            np.eye(num_classes)[true],
            {"k": np.full(true.size, num_classes)},
        ),
    )


#: how unlikely the reported class shares must be under the stated channel for the reports to be refused
_REPORTS_REFUSED_BELOW = 1e-9


def _check_reports_fit_channel(reported: np.ndarray, matrix: np.ndarray) -> None:
    """Refuse reports whose class shares the stated channel cannot produce.

    Under M a class z is reported with probability between min_y M[y, z] and max_y M[y, z], whatever the
    true labels; clean labels stated as ``flip:0.1`` would otherwise be recorded with a guarantee nothing
    delivered. The reports are the release, so reading their shares costs nothing.
    """
    from scipy.stats import binom

    n = reported.size
    counts = np.bincount(reported, minlength=matrix.shape[0])
    for z, count in enumerate(counts):
        low, high = matrix[:, z].min(), matrix[:, z].max()
        if binom.cdf(count, n, low) < _REPORTS_REFUSED_BELOW or binom.sf(count - 1, n, high) < _REPORTS_REFUSED_BELOW:
            raise DataError(
                f"{count:,} of {n:,} reports ({count / n:.2%}) are of class {z}, where the stated channel reports it "
                f"with a probability between {low:.2%} and {high:.2%} whatever the true labels: these labels did not "
                "come through that channel (clean labels, or another channel). Give the labels as the source "
                "randomized them, with the channel it publishes; nothing was recorded"
            )


def release_external_labels(
    ledger: PrivacyLedger,
    labels,
    members,
    channel,
    stated_epsilon: float | None = None,
    tag: str | None = None,
) -> Release:
    """Labels randomized by a source outside labeldp (a measurement API, a survey's randomized answers),
    passed through with the ``channel`` the source publishes.

    Nothing is drawn: the ledger records the channel's guarantee for each member, so that it composes with
    labeldp's own releases of the same rows: exactly RR's where the channel is randomized response,
    otherwise (or where the source states a larger ``stated_epsilon``) the pure epsilon-DP guarantee stated
    (:func:`~labeldp.accounting.events.stated_event`). It holds only if the source's statement is true:
    labeldp cannot check how the labels were randomized, only that their class shares fit the channel.

    ``channel`` is (K, K), M[y, z] = Pr[reported z | true y] (:func:`labeldp.mechanisms.parse_channel`
    reads it from words). Raises :class:`~labeldp.errors.ConfigError` if the channel gives no privacy or the
    stated epsilon is below the channel's own, :class:`~labeldp.errors.DataError` if the reports' class
    shares cannot come from the channel. Shared arguments: see :mod:`labeldp.boundary.release`.
    """
    matrix = check_channel(channel, np.shape(channel)[0])
    own = channel_epsilon(matrix)
    if not math.isfinite(own):
        raise ConfigError("the channel gives no privacy: some report is possible under one true class only")
    if stated_epsilon is not None and check_epsilon(stated_epsilon) < own - 1e-9:
        raise ConfigError(f"the source states epsilon {stated_epsilon:g}, but its channel implies {own:.6g} at least")
    epsilon = own if stated_epsilon is None else float(stated_epsilon)
    num_classes = matrix.shape[0]
    reported = true_labels(labels, num_classes)
    _check_reports_fit_channel(reported, matrix)
    indices = member_indices(ledger, members, tag, labels=reported)
    exact = stated_epsilon is None and is_randomized_response(matrix)
    event = randomized_response_event(own, num_classes) if exact else stated_event(epsilon)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            event,
            f"labels randomized by an external source, K={num_classes}, epsilon={epsilon:g} as the source's "
            "channel states (recorded, not drawn by labeldp)",
            reported.copy(),
            matrix[:, reported].T.copy(),
            {"k": np.full(reported.size, num_classes)},
        ),
    )


def release_laplace_one_hot(
    ledger: PrivacyLedger,
    labels,
    members,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> Release:
    """ALIBI's release: each one-hot label plus discrete Laplace noise of scale 2 / epsilon per coordinate,
    epsilon-label-DP per member.

    ``arrays["noisy_one_hot"]`` is the release (float32), ``labels`` its arg-max, ``arrays["k"]`` K for every
    member. Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    eps = check_epsilon(epsilon)
    true = true_labels(labels, num_classes)
    indices = member_indices(ledger, members, tag, labels=true)
    eps, per_unit = per_row(ledger, indices, eps)
    noisy = laplace_one_hot(true, num_classes, eps, rng)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            laplace_one_hot_event(eps),
            f"Laplace one-hot (ALIBI), K={num_classes}, epsilon={eps:g}{per_unit}",
            noisy.argmax(axis=1),
            laplace_one_hot_likelihood(noisy, eps),
            {"noisy_one_hot": noisy.astype(np.float32), "k": np.full(true.size, num_classes)},
        ),
    )


def release_vector_labels(
    ledger: PrivacyLedger,
    labels,
    members,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> Release:
    """VLP's release (Zhao et al. 2025): each label as a binary vector, every coordinate of its one-hot
    vector flipped independently by binary RR at epsilon / 2; epsilon-label-DP per member.

    A vector, not a label: ``labels`` is None, ``likelihood`` the evidence e^(eps z_y) normalised over y,
    ``arrays["vectors"]`` the release (uint8), ``arrays["noisy_one_hot"]`` its unbiased estimate of the
    one-hot label (float32) and ``arrays["k"]`` K for every member. Shared arguments and errors: see
    :mod:`labeldp.boundary.release`.
    """
    eps = check_epsilon(epsilon)
    true = true_labels(labels, num_classes)
    indices = member_indices(ledger, members, tag, labels=true)
    eps, per_unit = per_row(ledger, indices, eps)
    vectors = vector_labels(true, num_classes, eps, rng)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            vector_labels_event(eps),
            f"vector labels (VLP), K={num_classes}, epsilon={eps:g}{per_unit}",
            None,
            vector_labels_likelihood(vectors, eps),
            {
                "vectors": vectors,
                "noisy_one_hot": vector_labels_one_hot_estimate(vectors, eps).astype(np.float32),
                "k": np.full(true.size, num_classes),
            },
        ),
    )


def release_pate_labels(
    ledger: PrivacyLedger,
    teacher_predictions,
    teacher_of,
    members,
    num_classes: int,
    noise_std: float,
    threshold: float | None = None,
    threshold_noise_std: float | None = None,
    rng: RandomSource = None,
    tag: str | None = None,
) -> Release:
    """PATE's aggregated answers to every query: label-DP for each member when every teacher was trained on
    its own disjoint part of the labels.

    No label is read here, the votes are: ``teacher_predictions`` are (teachers, queries) class votes, teacher
    t trained only on the members with ``teacher_of == t`` (and public inputs). Every member is charged for
    every query, answered or not (replacing its label may change its teacher's vote on any of them):
    ``queries`` GNMax answers and, for the confident variant, as many threshold checks
    (:func:`labeldp.accounting.events.pate_event`); the ledger computes the (epsilon, delta).

    ``noise_std`` is the vote noise's sigma. With ``threshold`` and ``threshold_noise_std`` (both or
    neither), confident GNMax answers only where the top vote count plus N(0, threshold_noise_std^2) reaches
    ``threshold`` votes. ``labels`` holds the answers (-1 where none), ``arrays["answered"]`` the mask.
    Shared arguments and errors: see :mod:`labeldp.boundary.release`.
    """
    if (threshold is None) != (threshold_noise_std is None):
        raise ConfigError("confident GNMax needs both threshold and threshold_noise_std (plain GNMax neither)")
    votes = teacher_votes(teacher_predictions, num_classes)
    teachers, queries = np.asarray(teacher_predictions).shape
    assignment = check_labels(teacher_of, teachers, "teacher_of")
    indices = member_indices(ledger, members, tag, teacher_of=assignment)
    if ledger.contribution(indices) > 1:
        raise ConfigError("PATE's teachers hold rows, not privacy units: it runs with one row per unit only")
    event = pate_event(queries, noise_std, threshold_noise_std)
    if threshold is None or threshold_noise_std is None:  # both or neither (checked above)
        labels = gnmax(votes, noise_std, rng)
        answered = np.ones(queries, dtype=bool)
        kind = "GNMax"
    else:
        if not 0 < threshold <= teachers:
            raise ConfigError(f"threshold must lie in (0, {teachers}] votes, got {threshold}")
        answered, labels = confident_gnmax(votes, threshold, threshold_noise_std, noise_std, rng)
        kind = f"confident GNMax (threshold {threshold:g}, noise {threshold_noise_std:.4g})"
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            event,
            f"PATE {kind}, {teachers} teachers, {queries} queries, vote noise {noise_std:.4g}",
            labels,
            arrays={"answered": answered},
        ),
    )


def release_dpsgd_plan(
    ledger: PrivacyLedger,
    members,
    noise_multiplier: float,
    sampling_probability: float,
    steps: int,
    max_grad_norm: float,
    tag: str | None = None,
) -> Release:
    """Record DP-SGD's spend on every member before its first step, on an add-or-remove ledger
    (``DPSGD_RELATION``).

    DP-SGD's steps are the release, so the plan is recorded: Poisson rate, noise multiplier (the Gaussian's
    standard deviation over the clipping bound) and steps; ``max_grad_norm`` is only described.
    ``arrays["noise_multiplier"]`` carries the plan to the trainer.
    """
    indices = member_indices(ledger, members, tag)
    return record_release(
        ledger,
        tag,
        Release(
            indices,
            dpsgd_event(noise_multiplier, sampling_probability, steps),
            f"DP-SGD, noise multiplier {noise_multiplier:.4f}, Poisson rate {sampling_probability:.5g}, {steps} steps, "
            f"clipping {max_grad_norm:g}",
            arrays={"noise_multiplier": np.array(noise_multiplier)},
        ),
    )
