"""Releases of counts over many rows: a noisy label histogram per public group (a cluster prior) and
noisy label marginals per bin of every public feature (the logistic fit from marginals).

Each counts every member's label once, inside one release: an aggregate event (its noise calibrated to
the most rows one privacy unit has among the members, :meth:`labeldp.accounting.PrivacyLedger.contribution`)
recorded once per unit. Like the rest of :mod:`labeldp.boundary.release`, these are the only code that
reads the labels they count (:func:`~labeldp.boundary.labels.unseal`). :func:`release_external_counts`
reads none: it records the guarantee a source outside labeldp states for counts it noised itself.
"""

from __future__ import annotations

import numpy as np

from labeldp._validation import check_epsilon
from labeldp.accounting.events import histogram_event, marginals_event, stated_event
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.release import Release, _recorded, _release, _true_labels
from labeldp.mechanisms import noisy_histogram, noisy_marginals
from labeldp.mechanisms.marginals import check_bins
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
    """Per-group label counts of ``members`` with discrete Laplace noise (epsilon-label-DP), recorded;
    the counts are the release's ``arrays["counts"]``, the groups its ``arrays["groups"]``.

    ``groups`` must be public (e.g. k-means clusters of public inputs). Every member's label is read,
    so the ledger records the histogram event for all members; later releases of the same labels
    compose sequentially with it.

    The counts are epsilon-label-DP for each member, recorded on ``ledger``, when the groups are public.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the release is recorded on (under replace-one-label neighbours).
    labels : PrivateLabels
        The true labels of ``members``, in index order, as class positions in [0, num_classes); read
        here (:func:`~labeldp.boundary.labels.unseal`).
    members : array_like
        The examples whose labels are released: distinct indices into the ledger's dataset, or a boolean
        mask over it.
    groups : array_like of int
        (members,) each member's public group, in [0, num_groups).
    num_groups : int
        The number of groups.
    num_classes : int
        K, the number of classes.
    epsilon : float
        The privacy parameter, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        The noise (see :mod:`labeldp.randomness`): None (default) for fresh OS entropy, ``"secure"``, a
        generator, or an integer seed (reproducible, hence not private).
    tag : str or None, optional
        The ledger entry's tag, new on the ledger (default None).

    Returns
    -------
    Release
        ``arrays["counts"]`` (num_groups, K), the noisy counts, and ``arrays["groups"]``; no labels.

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if ``epsilon`` is not a finite number > 0, a group is outside its range, a label
        is outside its range (which, and how many, is not said), ``members`` is invalid or not as long as the
        per-member arrays, or ``tag`` is on the ledger already.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld.
    """
    eps = check_epsilon(epsilon)
    true = _true_labels(labels, num_classes)
    indices = _recorded(ledger, members, tag, labels=true, groups=np.asarray(groups))
    units = max(ledger.contribution(indices), 1)
    counts = noisy_histogram(true, groups, num_groups, num_classes, eps, rng, units)
    return _release(
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
    """The label counts in every bin of every public feature, noised (epsilon-label-DP), recorded;
    the (sum of bins, num_classes) counts are the release's ``arrays["counts"]``.

    ``bins`` (members x features) must be public (bins of public inputs). Every member's label is
    read once per feature, all inside one release: the ledger records the marginals' event
    (:func:`labeldp.accounting.events.marginals_event`) once for all members.

    The counts are epsilon-label-DP for each member, recorded on ``ledger``, when the bins are public.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the release is recorded on (under replace-one-label neighbours).
    labels : PrivateLabels
        The true labels of ``members``, in index order, as class positions in [0, num_classes); read
        here (:func:`~labeldp.boundary.labels.unseal`).
    members : array_like
        The examples whose labels are released: distinct indices into the ledger's dataset, or a boolean
        mask over it.
    bins : array_like of int
        (members, features) each member's public bin of each feature.
    bins_per_feature : array_like of int
        (features,) the number of bins of each feature.
    num_classes : int
        K, the number of classes.
    epsilon : float
        The privacy parameter, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        The noise (see :mod:`labeldp.randomness`): None (default) for fresh OS entropy, ``"secure"``, a
        generator, or an integer seed (reproducible, hence not private).
    tag : str or None, optional
        The ledger entry's tag, new on the ledger (default None).

    Returns
    -------
    Release
        ``arrays["counts"]``, the noisy counts; no labels.

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if ``epsilon`` is not a finite number > 0, ``bins`` do not fit
        ``bins_per_feature``, a label is outside its range (which, and how many, is not said), ``members`` is
        invalid or not as long as the per-member arrays, or ``tag`` is on the ledger already.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld.
    """
    eps = check_epsilon(epsilon)
    true = _true_labels(labels, num_classes)
    codes, sizes = check_bins(bins, bins_per_feature)
    indices = _recorded(ledger, members, tag, labels=true, bins=codes)
    units = max(ledger.contribution(indices), 1)
    counts = noisy_marginals(true, codes, sizes, num_classes, eps, rng, units)
    return _release(
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
    """Noisy counts that a source outside labeldp released (the aggregate reports of a browser's or an
    operating system's measurement API: noisy counts per key), recorded with the guarantee it states.

    Nothing is drawn or read here: the ledger records, once for all ``members`` as an aggregate, the
    pure ``stated_epsilon``-DP guarantee per privacy unit the source states
    (:func:`~labeldp.accounting.events.stated_event`), so that it composes with labeldp's own releases
    of the same rows. It holds only if the statement is true: labeldp cannot check how the counts were noised.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the source's guarantee is recorded on, over the rows the counts describe.
    members : array_like
        Those rows: indices into the ledger's dataset, or a boolean mask.
    stated_epsilon : float
        The epsilon the source states for the whole set of counts, per its unit, > 0.
    description : str
        What the source released, in words.
    tag : str or None, optional
        The ledger entry's tag, new on the ledger (default None).
    **arrays : numpy.ndarray
        The counts as they arrived, and what was derived from them (kept in the release's ``arrays``).

    Returns
    -------
    Release
        The release: no labels, ``arrays`` as given.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``stated_epsilon`` is not a finite number > 0, ``members`` is invalid or ``tag`` is on the ledger already.
    """
    eps = check_epsilon(stated_epsilon)
    indices = _recorded(ledger, members, tag)
    release = Release(
        indices,
        stated_event(eps),
        f"{description}, epsilon={eps:g} as the source states (recorded, not drawn by labeldp)",
        arrays=arrays,
        aggregate=True,
    )
    return _release(ledger, tag, release)


__all__ = ["release_external_counts", "release_label_marginals", "release_noisy_histogram"]
