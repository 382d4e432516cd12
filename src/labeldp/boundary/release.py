"""The privacy boundary: release noisy labels *and* record the spend, in one call.

These functions are the one place where labeldp reads true training labels on the way to a model,
through ``_true_labels``, which takes :class:`~labeldp.boundary.labels.PrivateLabels` only (the other
readers are their siblings in :mod:`labeldp.boundary`, :mod:`labeldp.boundary.column` for a label
column released once, and the private-side trainers, :mod:`labeldp.dpsgd` and
:mod:`labeldp.teachers`'s teachers, whose outputs are noised there: ``tests/boundary/test_labels.py``
holds the list). Each validates its arguments, draws with a mechanism from
:mod:`labeldp.mechanisms`, records the matching dp_accounting event (:mod:`labeldp.accounting.events`)
on the ledger for exactly the examples it read, and returns a :class:`Release`: everything that left
the boundary, with its noise channel, so that nothing after it needs to recompute the mechanism.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from dp_accounting import dp_event

from labeldp._validation import check_epsilon, check_labels, check_priors, check_same_length
from labeldp.accounting.events import (
    dpsgd_event,
    laplace_one_hot_event,
    laplace_value_event,
    non_private_event,
    pate_event,
    randomized_response_event,
    rr_on_sets_event,
    stated_event,
)
from labeldp.accounting.ledger import PrivacyLedger, event_from_dict, event_to_dict
from labeldp.boundary.labels import PrivateLabels, unseal
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
)
from labeldp.randomness import RandomSource


@dataclass(frozen=True)
class Release:
    """What one mechanism released about the examples ``members``, and what the ledger recorded.

    ``labels`` holds one released label per member (class indices; ALIBI's arg-max; -1 for a PATE
    query left unanswered; RR-on-bins' released bin), ``likelihood`` the noise channel
    L[i, y] = Pr[member i's release | its label is y] (from public parameters and released values:
    free to use). ``arrays`` holds the rest of what was released (RR-with-prior's k, ALIBI's noisy
    vectors, a histogram's counts, PATE's answered queries, a regression's released ``values``) and
    what a method derived from it, which it saves alongside.

    Attributes
    ----------
    members : numpy.ndarray
        The examples whose labels the mechanism read, sorted indices into the ledger's dataset.
    event : dp_accounting.dp_event.DpEvent
        The event recorded for each member.
    description : str
        The ledger entry's description.
    labels : numpy.ndarray or None
        One released label per member, where the mechanism releases labels.
    likelihood : numpy.ndarray or None
        (members, K) the noise channel of the released labels, where it is known.
    arrays : Mapping of str to numpy.ndarray
        The rest of what was released, and what a method derived from it.
    aggregate : bool
        Whether ``event`` covers each privacy unit's rows together (a histogram, marginals) rather than
        each member's label (see :meth:`labeldp.accounting.PrivacyLedger.record`).
    row_event : dp_accounting.dp_event.DpEvent or None
        What an aggregate release guarantees one row, where it differs from ``event``.
    """

    members: np.ndarray
    event: dp_event.DpEvent
    description: str
    labels: np.ndarray | None = None
    likelihood: np.ndarray | None = None
    arrays: Mapping[str, np.ndarray] = field(default_factory=dict)
    aggregate: bool = False
    row_event: dp_event.DpEvent | None = None

    def with_arrays(self, **arrays: np.ndarray) -> Release:
        """This release with more (derived, public) arrays kept beside it.

        Parameters
        ----------
        **arrays : numpy.ndarray
            Name -> array; a name already in :attr:`arrays` is replaced.

        Returns
        -------
        Release
            A new release; nothing is recorded.
        """
        return dataclasses.replace(self, arrays={**self.arrays, **arrays})

    def record(self, ledger: PrivacyLedger, tag: str | None = None) -> None:
        """Record this release's event on ``ledger`` for its members (the ``release_*`` functions do it).

        Parameters
        ----------
        ledger : PrivacyLedger
            The ledger.
        tag : str or None, optional
            The entry's tag, new on the ledger (default None).

        Raises
        ------
        labeldp.errors.ConfigError
            If ``tag`` is on the ledger already, the members do not fit the ledger, or the ledger cannot
            account the event.
        """
        ledger.record(
            self.event, self.members, self.description, tag, aggregate=self.aggregate, row_event=self.row_event
        )

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything, as arrays for ``numpy.savez`` (:meth:`from_arrays` reads them back).

        Returns
        -------
        dict of str to numpy.ndarray
            :attr:`arrays`, ``labels`` and ``likelihood`` where given, ``members``, ``description`` and
            ``event`` (as JSON text).
        """
        optional = {
            name: value
            for name, value in (("labels", self.labels), ("likelihood", self.likelihood))
            if value is not None
        }
        if self.row_event is not None:
            optional["row_event"] = np.array(json.dumps(event_to_dict(self.row_event)))
        return {
            **self.arrays,
            **optional,
            "members": self.members,
            "description": np.array(self.description),
            "event": np.array(json.dumps(event_to_dict(self.event))),
            "aggregate": np.array(self.aggregate),
        }

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray]) -> Release:
        """A release from :meth:`to_arrays`' arrays (e.g. read back with ``numpy.load``).

        Parameters
        ----------
        arrays : Mapping of str to numpy.ndarray
            The arrays :meth:`to_arrays` gave.

        Returns
        -------
        Release
            The release; nothing is recorded.
        """
        rest = {
            key: value
            for key, value in arrays.items()
            if key not in ("members", "event", "description", "labels", "likelihood", "aggregate", "row_event")
        }
        row_event = arrays.get("row_event")
        return cls(
            np.asarray(arrays["members"]),
            event_from_dict(json.loads(str(arrays["event"]))),
            str(arrays["description"]),
            arrays.get("labels"),
            arrays.get("likelihood"),
            rest,
            bool(arrays["aggregate"]) if "aggregate" in arrays else False,
            None if row_event is None else event_from_dict(json.loads(str(row_event))),
        )


def _true_labels(labels: PrivateLabels, num_classes: int) -> np.ndarray:
    """The true labels of a release (class or grid positions), read here: the boundary. Only
    :class:`~labeldp.boundary.labels.PrivateLabels` are read (:func:`~labeldp.boundary.labels.unseal`
    refuses a plain array with a :class:`~labeldp.errors.ConfigError`)."""
    return check_labels(unseal(labels), num_classes)


def _recorded(ledger: PrivacyLedger, members, tag: str | None, **arrays) -> np.ndarray:
    """The members as sorted indices, after checking that every per-member array matches them in
    length and that ``tag`` is new: all before anything is drawn."""
    mask = ledger.members_mask(members)
    indices = np.flatnonzero(mask)
    check_same_length(**arrays, members=indices)
    if ledger.has(tag or ""):
        raise ConfigError(f"the ledger already has an entry tagged {tag!r}")
    return indices


def _release(ledger: PrivacyLedger, tag: str | None, release: Release) -> Release:
    release.record(ledger, tag)
    return release


def _per_row(ledger: PrivacyLedger, indices: np.ndarray, epsilon: float) -> tuple[float, str]:
    """The epsilon each row's label is released with, and its words: the release's ``epsilon`` is
    what it may spend on each privacy unit, so a unit of c rows among the members gives each epsilon / c
    (c = 1 without units: each row is its own unit)."""
    units = ledger.contribution(indices)
    if units <= 1:
        return epsilon, ""
    return epsilon / units, f" per row (epsilon={epsilon:g} for a unit of up to {units} rows)"


def release_randomized_response(
    ledger: PrivacyLedger,
    labels,
    members,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
) -> Release:
    """K-ary RR on ``labels`` (the true labels of ``members``, in index order): epsilon-label-DP per
    member, recorded as one ``RandomizedResponseDpEvent`` over K buckets.

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
        The released labels, their channel, and ``arrays["k"]`` (K for every member).

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if ``epsilon`` is not a finite number > 0, a label is outside its range (which,
        and how many, is not said), ``members`` is invalid or not as long as the per-member arrays, or ``tag`` is on
        the ledger already.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld.
    """
    eps = check_epsilon(epsilon)
    true = _true_labels(labels, num_classes)
    indices = _recorded(ledger, members, tag, labels=true)
    eps, per_unit = _per_row(ledger, indices, eps)
    noisy = randomized_response(true, num_classes, eps, rng)
    return _release(ledger, tag, rr_release(indices, noisy, num_classes, eps, per_unit))


def rr_release(indices: np.ndarray, noisy: np.ndarray, num_classes: int, epsilon: float, per_unit: str) -> Release:
    """The :class:`Release` of K-ary RR's labels ``noisy`` of the members ``indices`` (nothing recorded).

    Parameters
    ----------
    indices : numpy.ndarray
        The members, sorted.
    noisy : numpy.ndarray
        Their released labels.
    num_classes : int
        K.
    epsilon : float
        Each row's epsilon.
    per_unit : str
        The description's words on the privacy unit (empty without units).

    Returns
    -------
    Release
        The release, its channel and ``arrays["k"]``.
    """
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
    """RR-with-prior on ``labels`` (of ``members``, in index order), recorded on ``ledger``.

    The priors must not depend on these examples' own labels (e.g. a model trained on other examples'
    noisy labels). Accounting: for each example the pair of output distributions under two true labels
    is dominated by RR over that example's k buckets (two labels inside the top k are exactly RR; a
    label outside releases the uniform distribution on the top k, a mixture of RR outputs; two labels
    outside release the same distribution). RR's hockey-stick divergence at fixed epsilon decreases in
    k, so the event recorded is RR over the smallest k >= 2 drawn, which dominates every member.

    The release is epsilon-label-DP for each member, recorded on ``ledger``, when the priors do not
    depend on the members' own labels (nothing is recorded if every k is 1: no released label then
    depends on a label).

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the release is recorded on (under replace-one-label neighbours).
    labels : PrivateLabels
        The true labels of ``members``, in index order, as class positions in [0, K); read here
        (:func:`~labeldp.boundary.labels.unseal`).
    members : array_like
        The examples whose labels are released: distinct indices into the ledger's dataset, or a boolean
        mask over it.
    priors : array_like
        (members, K) one prior per member, each a distribution over the K classes.
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
        The released labels, their channel, and ``arrays["k"]`` (each member's k).

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if ``epsilon`` is not a finite number > 0, ``priors`` are not distributions, a
        label is outside its range (which, and how many, is not said), ``members`` is invalid or not as long as the
        per-member arrays, or ``tag`` is on the ledger already.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld.
    """
    eps = check_epsilon(epsilon)
    prior = check_priors(priors)
    true = _true_labels(labels, prior.shape[1])
    indices = _recorded(ledger, members, tag, labels=true, priors=prior)
    eps, per_unit = _per_row(ledger, indices, eps)
    noisy, k = rr_with_prior(true, prior, eps, rng)
    return _release(
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
    """RR-on-bins (Ghazi et al. 2023) on ``labels``, grid indices of the members' numeric labels (in
    index order), recorded on ``ledger``.

    ``priors`` over the public ``grid``: one (G,) row shared by every member, (m, G) rows chosen by
    ``prior_index``, or (n, G) rows, one per member. A row must not depend on the labels of the members
    that use it (a noisy histogram released beforehand and recorded, a model trained on other
    examples' released labels). The optimal maps are solved once per row, then each label is released
    as a bin value by RR over its map's d bins. Accounting (:func:`~labeldp.accounting.events.rr_on_sets_event`):
    RR over the smallest d >= 2 among the members, which dominates every member; nothing if every map
    has one bin. The release's ``labels`` are the released bins, ``arrays["values"]`` the released
    values, ``arrays["k"]`` each member's d, ``arrays["bin_of"]`` each member's map (its grid points'
    bins), and its likelihood the channel over the grid.

    The release is epsilon-label-DP for each member, recorded on ``ledger``, when each prior row does
    not depend on the labels of the members that use it.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the release is recorded on (under replace-one-label neighbours).
    labels : PrivateLabels
        The grid indices of the members' true numeric labels, in index order; read here
        (:func:`~labeldp.boundary.labels.unseal`).
    members : array_like
        The examples whose labels are released: distinct indices into the ledger's dataset, or a boolean
        mask over it.
    grid : array_like
        (G,) the public grid of label values.
    priors : array_like
        Distributions over the grid: (G,) shared by every member, (m, G) rows chosen by
        ``prior_index``, or (members, G), one row per member.
    epsilon : float
        The privacy parameter, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        The noise (see :mod:`labeldp.randomness`): None (default) for fresh OS entropy, ``"secure"``, a
        generator, or an integer seed (reproducible, hence not private).
    tag : str or None, optional
        The ledger entry's tag, new on the ledger (default None).
    prior_index : array_like of int or None, optional
        With (m, G) priors, each member's prior row (default None).

    Returns
    -------
    Release
        The released bins, their channel over the grid, and ``arrays["values"]``, ``arrays["k"]`` and
        ``arrays["bin_of"]``.

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if ``epsilon``, ``grid``, ``priors`` or ``prior_index`` is invalid, a label is
        outside its range (which, and how many, is not said), ``members`` is invalid or not as long as the
        per-member arrays, or ``tag`` is on the ledger already.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld.
    """
    eps = check_epsilon(epsilon)
    true = _true_labels(labels, np.asarray(grid).size)
    indices = _recorded(ledger, members, tag, labels=true)
    eps, per_unit = _per_row(ledger, indices, eps)
    maps = optimal_bins(priors, grid, eps)
    values, bins, d = rr_on_bins(true, grid, maps, eps, rng, prior_index)
    bin_of = (
        maps.bin_of
        if prior_index is None and len(maps.d) == true.size
        else maps.bin_of[np.zeros(true.size, dtype=np.int64) if prior_index is None else np.asarray(prior_index)]
    )
    return _release(
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
    """The Laplace mechanism on numeric labels (grid indices of the members' values on the evenly spaced
    public ``grid``), on the exact integer lattice of the grid's step
    (:mod:`labeldp.mechanisms.laplace_value`): epsilon-DP per member, recorded as
    ``DiscreteLaplaceDpEvent(epsilon / (G - 1), G - 1)``. ``arrays["noisy_steps"]`` is the release (in
    grid steps from grid[0]), ``arrays["values"]`` its label values; ``labels`` the grid point nearest
    each released value.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the release is recorded on (under replace-one-label neighbours).
    labels : PrivateLabels
        The grid indices of the members' true numeric labels, in index order; read here
        (:func:`~labeldp.boundary.labels.unseal`).
    members : array_like
        The examples whose labels are released: distinct indices into the ledger's dataset, or a boolean
        mask over it.
    grid : array_like
        (G,) the public, evenly spaced grid of label values.
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
        The nearest grid points, their channel, ``arrays["noisy_steps"]`` and ``arrays["values"]``.

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if ``epsilon`` or ``grid`` is invalid, a label is outside its range (which, and
        how many, is not said), ``members`` is invalid or not as long as the per-member arrays, or ``tag`` is on the
        ledger already.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld.
    """
    eps = check_epsilon(epsilon)
    points = np.asarray(grid, dtype=np.float64)
    true = _true_labels(labels, points.size)
    indices = _recorded(ledger, members, tag, labels=true)
    eps, per_unit = _per_row(ledger, indices, eps)
    noisy = laplace_value(true, points, eps, rng)
    return _release(
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
    """Hand out the true labels of ``members`` *without* privacy, for non-private reference runs.

    Recorded as a ``NonPrivateDpEvent``, so the ledger's epsilon becomes infinite: a run that uses
    this can never be reported as private.

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
    num_classes : int
        K, the number of classes.
    tag : str or None, optional
        The ledger entry's tag, new on the ledger (default None).

    Returns
    -------
    Release
        The true labels, a one-hot channel and ``arrays["k"]`` (K for every member).

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if a label is outside its range (which, and how many, is not said), ``members`` is
        invalid or not as long as the per-member arrays, or ``tag`` is on the ledger already.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld.
    """
    true = _true_labels(labels, num_classes)
    indices = _recorded(ledger, members, tag, labels=true)
    return _release(
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
    """Refuse reports whose class shares the stated channel cannot produce: under M, a class z is
    reported with a probability between min_y M[y, z] and max_y M[y, z], whatever the true labels. Labels
    that never went through the channel (clean labels with ``flip:0.1``: 0.01 % positive where the channel
    gives at least 10 %) would be recorded with a guarantee nothing delivered. The reports are the release:
    reading their shares costs nothing."""
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
    """Labels randomized by a source outside labeldp (a browser's or an operating system's measurement
    API, a survey's randomized answers), passed through with the channel the source publishes.

    Nothing is drawn here: the labels are released as they arrived, and the ledger records the
    guarantee of the source's channel for each member, so that it composes with labeldp's own releases
    of the same rows. The channel's own guarantee (:func:`labeldp.mechanisms.channel_epsilon`) is
    recorded exactly as randomized response where the channel is randomized response; otherwise, or
    where the source states a larger epsilon (its reports may carry more than the channel shows), as
    the pure epsilon-DP guarantee stated (:func:`~labeldp.accounting.events.stated_event`). The
    guarantee holds only if the source's statement is true: labeldp cannot check how the labels were
    randomized.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the source's guarantee is recorded on (under replace-one-label neighbours).
    labels : PrivateLabels
        The labels as the source reported them, for ``members`` in index order, as class positions,
        wrapped where they were read (a plain array is refused).
    members : array_like
        The rows whose reports these are: distinct indices into the ledger's dataset, or a boolean mask.
    channel : array_like
        (K, K) the source's channel, M[y, z] = Pr[reported z | true y] (:func:`labeldp.mechanisms.parse_channel`
        reads it from words).
    stated_epsilon : float or None, optional
        The epsilon the source states for one label, at least the channel's own (default None: the
        channel's own).
    tag : str or None, optional
        The ledger entry's tag, new on the ledger (default None).

    Returns
    -------
    Release
        The reported labels, their channel per row (``likelihood``) and ``arrays["k"]`` (K for every member).

    Raises
    ------
    labeldp.errors.ConfigError
        If the channel is invalid, gives no privacy (a report possible under one class only), or the stated
        epsilon is below the channel's own; ``members`` is invalid; or ``tag`` is on the ledger already.
    """
    matrix = check_channel(channel, np.shape(channel)[0])
    own = channel_epsilon(matrix)
    if not math.isfinite(own):
        raise ConfigError("the channel gives no privacy: some report is possible under one true class only")
    if stated_epsilon is not None and check_epsilon(stated_epsilon) < own - 1e-9:
        raise ConfigError(f"the source states epsilon {stated_epsilon:g}, but its channel implies {own:.6g} at least")
    epsilon = own if stated_epsilon is None else float(stated_epsilon)
    num_classes = matrix.shape[0]
    reported = _true_labels(labels, num_classes)
    _check_reports_fit_channel(reported, matrix)
    indices = _recorded(ledger, members, tag, labels=reported)
    exact = stated_epsilon is None and is_randomized_response(matrix)
    event = randomized_response_event(own, num_classes) if exact else stated_event(epsilon)
    return _release(
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
    """ALIBI's release: each member's one-hot label plus discrete Laplace noise of scale 2 / epsilon per
    coordinate (epsilon-label-DP), recorded on ``ledger``; ``arrays["noisy_one_hot"]`` is the release.

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
        The arg-max of each noisy vector as ``labels``, their channel, ``arrays["noisy_one_hot"]``
        (float32) and ``arrays["k"]`` (K for every member).

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if ``epsilon`` is not a finite number > 0, a label is outside its range (which,
        and how many, is not said), ``members`` is invalid or not as long as the per-member arrays, or ``tag`` is on
        the ledger already.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld.
    """
    eps = check_epsilon(epsilon)
    true = _true_labels(labels, num_classes)
    indices = _recorded(ledger, members, tag, labels=true)
    eps, per_unit = _per_row(ledger, indices, eps)
    noisy = laplace_one_hot(true, num_classes, eps, rng)
    return _release(
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
    """PATE's aggregated answers to every query, recorded on ``ledger``.

    Every member is charged for every query (replacing its label may change its teacher's vote on
    any of them): ``queries`` GNMax answers and, for the confident variant, as many threshold checks
    (:func:`labeldp.accounting.events.pate_event`), whatever the number answered.

    The answers are label-DP for each member with the (epsilon, delta) that the ledger computes for
    that event (Gaussian noise), when every teacher was trained on its own disjoint part of the labels.
    No label is read here: the votes are.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the release is recorded on (under replace-one-label neighbours).
    teacher_predictions : array_like of int
        (teachers, queries) class votes; teacher t must have been trained on
        the labels of the members with ``teacher_of == t`` only (and on public inputs).
    teacher_of : array_like of int
        Each member's teacher, integers in [0, teachers): the partition is disjoint.
    members : array_like
        The examples whose labels are released: distinct indices into the ledger's dataset, or a boolean
        mask over it.
    num_classes : int
        K, the number of classes.
    noise_std : float
        GNMax vote noise sigma.
    threshold, threshold_noise_std : float or None, optional
        Both or neither; with them, confident GNMax (answer only if
        the top vote count plus N(0, threshold_noise_std^2) reaches ``threshold``), ``threshold`` in
        votes, in (0, teachers].
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        The noise (see :mod:`labeldp.randomness`): None (default) for fresh OS entropy, ``"secure"``, a
        generator, or an integer seed (reproducible, hence not private).
    tag : str or None, optional
        The ledger entry's tag, new on the ledger (default None).

    Returns
    -------
    Release
        The release whose ``labels`` are the answers over the queries (-1 where a query was not
        answered) and ``arrays["answered"]`` the answered mask.

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn: if only one of ``threshold`` and ``threshold_noise_std`` is given, ``threshold``
        is outside (0, teachers], a noise standard deviation is not > 0, the votes or ``teacher_of`` are outside
        their range, ``members`` is invalid or not as long as ``teacher_of``, or ``tag`` is on the ledger already.
    """
    if (threshold is None) != (threshold_noise_std is None):
        raise ConfigError("confident GNMax needs both threshold and threshold_noise_std (plain GNMax neither)")
    votes = teacher_votes(teacher_predictions, num_classes)
    teachers, queries = np.asarray(teacher_predictions).shape
    assignment = check_labels(teacher_of, teachers, "teacher_of")
    indices = _recorded(ledger, members, tag, teacher_of=assignment)
    if ledger.contribution(indices) > 1:
        raise ConfigError("PATE's teachers hold rows, not privacy units: it runs with one row per unit only")
    event = pate_event(queries, noise_std, threshold_noise_std)
    if threshold is None:
        labels = gnmax(votes, noise_std, rng)
        answered = np.ones(queries, dtype=bool)
        kind = "GNMax"
    else:
        if not 0 < threshold <= teachers:
            raise ConfigError(f"threshold must lie in (0, {teachers}] votes, got {threshold}")
        answered, labels = confident_gnmax(votes, threshold, threshold_noise_std, noise_std, rng)
        kind = f"confident GNMax (threshold {threshold:g}, noise {threshold_noise_std:.4g})"
    return _release(
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
    """Record DP-SGD's spend before its first step: its steps are the release (Poisson-sampled,
    clipped gradients with Gaussian noise, accounted under add-or-remove-one), so what is recorded is
    the plan, on every member, and ``arrays["noise_multiplier"]`` carries it to the trainer.

    Parameters
    ----------
    ledger : PrivacyLedger
        An add-or-remove ledger (``DPSGD_RELATION``).
    members : array-like
        The examples DP-SGD trains on (indices or a mask).
    noise_multiplier, sampling_probability : float
        The Gaussian noise's standard deviation over the clipping bound, and the Poisson rate.
    steps : int
        The number of steps.
    max_grad_norm : float
        The clipping bound (for the description; the event does not depend on it).
    tag : str, optional
        The ledger entry's tag.

    Returns
    -------
    Release
        The recorded plan.
    """
    indices = _recorded(ledger, members, tag)
    return _release(
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
