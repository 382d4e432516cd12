"""The privacy ledger: every randomisation of private data, as a ``dp_accounting`` event.

The neighbouring relation (:mod:`labeldp.accounting.events`) is a property of the ledger, fixed
when it is created.

Each entry records an event and the set of examples ("members") whose labels it read. An example's
privacy loss is the (adaptive, sequential) composition of the events that touched it; events on
disjoint examples compose in parallel. The ledger therefore groups examples by the exact set of
entries that touched them, composes each group's events as dp_accounting privacy loss distributions
(PLDs), and reports the worst group. This is the only place where epsilon is computed.

Events and their meaning under replace-one-label neighbours:

- ``RandomizedResponseDpEvent``: dp_accounting's own REPLACE_ONE PLD.
- ``DiscreteLaplaceDpEvent(a, sensitivity)``: integer-valued values with discrete Laplace noise
  that move by ``sensitivity`` when one label is replaced, accounted as the (a x sensitivity, 0)-DP
  guarantee they meet exactly (the largest privacy loss; the ledger reports delta = 0). A noisy
  histogram in which a replaced label moves two cells by one each is
  ``SelfComposedDpEvent(DiscreteLaplaceDpEvent(a, 1), 2)``; ALIBI's noisy one-hot vector on the grid
  (1/m) Z is ``SelfComposedDpEvent(DiscreteLaplaceDpEvent(eps / 2m, m), 2)``. (dp_accounting's
  accountant takes this event only under add/remove relations, and its discrete Laplace PLD reports
  an infinite epsilon at delta 0 for sensitivities of 32 and more.)
- ``LaplaceDpEvent(b)``: a pure (1 / b, 0)-DP guarantee: what a source outside labeldp states for the
  labels it randomized (:func:`~labeldp.accounting.events.stated_event`), and the continuous Laplace
  mechanism of ledgers written before labeldp's releases were discrete.
- ``GaussianDpEvent(s)``: a query whose value moves by at most 1 (L2) between neighbours, plus
  N(0, s^2) noise: dp_accounting's Gaussian PLD for a shift of 1. Under add-or-remove this is exactly
  what dp_accounting's ``PLDAccountant`` builds. On the label ledger it is PATE's aggregator (one
  replaced label moves a vote histogram by sqrt(2), folded into s; :func:`~labeldp.accounting.events.pate_event`).
  dp_accounting's own REPLACE_ONE Gaussian would assume a shift of 2, so the ledger does not use it.
- ``PoissonSampledDpEvent(GaussianDpEvent)`` (a DP-SGD step, under add-or-remove only): dp_accounting's
  sampled Gaussian PLD (the clipping bound folded into the noise multiplier), as its ``PLDAccountant``
  builds it.
- ``SelfComposedDpEvent``, ``ComposedDpEvent``, ``NoOpDpEvent``; ``NonPrivateDpEvent`` makes epsilon infinite.
- ``RepeatAndSelectDpEvent`` (private selection: a random number of repetitions of a mechanism, the best
  output kept; Papernot & Steinke 2022), under add-or-remove only: it has no PLD, so the examples it
  touched are accounted with dp_accounting's RDP accountant over all their events (a bound from
  Renyi DP, looser than the PLD's).

The label mechanisms (RR, discrete Laplace histograms) are accounted under replace-one only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import attr
import dp_accounting
import numpy as np
from dp_accounting import dp_event
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant

from labeldp.accounting.events import (
    DPSGD_RELATION,
    GAUSSIAN_SHIFT_RELATION,
    NEIGHBORING_RELATION,
    RELATION_NAMES,
    gaussian_equivalent,
)
from labeldp.errors import ConfigError
from labeldp.files import write_text_atomic

#: Discretisation of privacy losses: reported epsilons are pessimistic by at most about this much.
VALUE_DISCRETIZATION = 1e-4
#: Ledgers with up to this many entries group their examples by counting bit codes (see ``_groups``).
_COUNTED_ENTRIES = 16
_SLICE = 1 << 22


class NonPrivateRelease(Exception):
    """Raised while composing when an event releases labels without privacy.

    Parameters
    ----------
    *args : object
        The exception's arguments, as for ``Exception``: labeldp raises it with none, and the ledger
        catches it (an epsilon of inf).
    """


def event_pld(
    event: dp_event.DpEvent, relation: dp_accounting.NeighboringRelation = NEIGHBORING_RELATION
) -> pld_lib.PrivacyLossDistribution | None:
    """The pessimistic PLD of ``event`` under neighbouring ``relation`` (None for no loss).

    A run asks for the same event's PLD several times (recording, saving, summarising), and a
    subsampled Gaussian's takes about a second: they are kept, by the event's full ``repr`` (events
    are immutable, their composition returns new distributions).

    Parameters
    ----------
    event : dp_accounting.dp_event.DpEvent
        The event, one of those the module docstring lists (nested compositions included).
    relation : dp_accounting.NeighboringRelation, optional
        The neighbouring relation (default ``REPLACE_ONE``, label DP).

    Returns
    -------
    dp_accounting.pld.privacy_loss_distribution.PrivacyLossDistribution or None
        The privacy loss distribution, or None when the event loses no privacy.

    Raises
    ------
    NonPrivateRelease
        For non-private events.
    labeldp.errors.ConfigError
        A ``ValueError``, for unsupported events or events not accounted under ``relation``.
    """
    key = (repr(event), relation)
    if key not in _PLD_CACHE:
        if len(_PLD_CACHE) >= _PLD_CACHE_SIZE:
            _PLD_CACHE.pop(next(iter(_PLD_CACHE)))
        try:
            _PLD_CACHE[key] = (_event_pld(event, relation), None)
        except NonPrivateRelease as error:
            _PLD_CACHE[key] = (None, error)
    pld, non_private = _PLD_CACHE[key]
    if non_private is not None:
        raise NonPrivateRelease
    return pld


_PLD_CACHE: dict[tuple[str, Any], tuple[pld_lib.PrivacyLossDistribution | None, NonPrivateRelease | None]] = {}
_PLD_CACHE_SIZE = 64


def _event_pld(
    event: dp_event.DpEvent, relation: dp_accounting.NeighboringRelation
) -> pld_lib.PrivacyLossDistribution | None:
    if isinstance(event, dp_event.NoOpDpEvent):
        return None
    if isinstance(event, dp_event.NonPrivateDpEvent):
        raise NonPrivateRelease
    equivalent = gaussian_equivalent(event)
    if equivalent is not None and equivalent != event:
        return event_pld(equivalent, relation)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = event_pld(event.event, relation)
        return None if inner is None or event.count == 0 else inner.self_compose(event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        return _compose([event_pld(e, relation) for e in event.events])
    gaussian, sampling_prob = event, 1.0
    if isinstance(event, dp_event.PoissonSampledDpEvent) and isinstance(event.event, dp_event.GaussianDpEvent):
        gaussian, sampling_prob = event.event, event.sampling_probability
    if isinstance(gaussian, dp_event.GaussianDpEvent):
        if gaussian.noise_multiplier == 0:
            raise NonPrivateRelease
        if relation == NEIGHBORING_RELATION and sampling_prob != 1.0:
            raise ConfigError("the ledger accounts Poisson-sampled Gaussian events under add-or-remove only")
        return pld_lib.from_gaussian_mechanism(
            gaussian.noise_multiplier,
            sampling_prob=sampling_prob,
            value_discretization_interval=VALUE_DISCRETIZATION,
            neighboring_relation=GAUSSIAN_SHIFT_RELATION,
        )
    if relation != NEIGHBORING_RELATION:
        raise ConfigError(f"the ledger accounts {type(event).__name__} under the replace-one-label relation only")
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        if event.num_buckets == 1:
            return None
        if event.noise_parameter == 0:
            raise NonPrivateRelease
        return pld_lib.from_randomized_response(
            event.noise_parameter,
            event.num_buckets,
            value_discretization_interval=VALUE_DISCRETIZATION,
            neighboring_relation=NEIGHBORING_RELATION,
        )
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent):
        if event.noise_parameter == 0:
            raise NonPrivateRelease
        return _pure_dp_pld(event.noise_parameter * event.sensitivity)
    if isinstance(event, dp_event.LaplaceDpEvent):  # ledgers of runs made before releases were discrete
        return _pure_dp_pld(1.0 / event.noise_multiplier)
    raise ConfigError(f"the ledger cannot account {type(event).__name__}")


def needs_rdp(event: dp_event.DpEvent) -> bool:
    """Whether ``event`` holds a private selection (``RepeatAndSelectDpEvent``), which has no PLD.

    Parameters
    ----------
    event : dp_accounting.dp_event.DpEvent
        The event, searched through nested compositions.

    Returns
    -------
    bool
        True if a ``RepeatAndSelectDpEvent`` occurs in it.
    """
    if isinstance(event, dp_event.RepeatAndSelectDpEvent):
        return True
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return needs_rdp(event.event)
    if isinstance(event, dp_event.ComposedDpEvent):
        return any(needs_rdp(e) for e in event.events)
    return False


def rdp_epsilon(
    events: list[dp_event.DpEvent], delta: float, relation: dp_accounting.NeighboringRelation = DPSGD_RELATION
) -> float:
    """Epsilon at ``delta`` of ``events`` composed, from dp_accounting's RDP accountant.

    Parameters
    ----------
    events : list of dp_accounting.dp_event.DpEvent
        The events, composed in order.
    delta : float
        The target delta.
    relation : dp_accounting.NeighboringRelation, optional
        The neighbouring relation (default ``ADD_OR_REMOVE_ONE``).

    Returns
    -------
    float
        The epsilon, a bound from Renyi DP (looser than a PLD's).
    """
    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=relation)
    with quiet_rdp():
        for event in events:
            accountant.compose(event)
        return float(accountant.get_epsilon(delta))


def pure_epsilon(event: dp_event.DpEvent) -> float | None:
    """The epsilon of a pure (epsilon, 0)-DP event, compositions summed (basic composition), or None.

    A bound beside the PLD's: composed many times, a pure event's PLD loses the mass that decides
    delta = 0 to dp_accounting's truncation (20 randomized responses at epsilon 0.025, a privacy unit
    of 20 rows, came out infinite at delta = 0), while c releases at epsilon are (c epsilon, 0)-DP.

    Parameters
    ----------
    event : dp_accounting.dp_event.DpEvent
        The event.

    Returns
    -------
    float or None
        The sum of its parts' epsilons (randomized response log(1 + k (1 - p) / p), discrete Laplace
        parameter x sensitivity, Laplace 1 / noise multiplier, a no-op 0), or None if a part is not pure DP.
    """
    exact = _pure_epsilon(event)
    if exact is None:
        return None
    # The event's parameters went through exp and back, and compositions add their rounding: 1 comes back
    # as 1 + 2e-16, which rounding up would print as 1.01. A value within 1e-12 (relative) of a 12-digit
    # one is taken as that value: at most that little below the float sum, against the PLD's own
    # discretisation of 1e-4; any other value is never lowered.
    design = float(f"{exact:.12g}")
    return design if abs(design - exact) <= 1e-12 * abs(exact) else max(design, exact)


def _pure_epsilon(event: dp_event.DpEvent) -> float | None:
    if isinstance(event, dp_event.NoOpDpEvent):
        return 0.0
    if isinstance(event, (dp_event.SelfComposedDpEvent, dp_event.ComposedDpEvent)):
        parts = [_pure_epsilon(e) for e in ([event.event] if hasattr(event, "count") else event.events)]
        if any(part is None for part in parts):
            return None
        return sum(parts) * (event.count if hasattr(event, "count") else 1)
    if isinstance(event, dp_event.RandomizedResponseDpEvent) and 0 < event.noise_parameter:
        k, p = event.num_buckets, event.noise_parameter
        return 0.0 if k == 1 else math.log1p(k * (1 - p) / p)
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent) and event.noise_parameter > 0:
        return event.noise_parameter * event.sensitivity
    if isinstance(event, dp_event.LaplaceDpEvent) and event.noise_multiplier > 0:
        return 1.0 / event.noise_multiplier
    return None


def _pure_dp_pld(epsilon: float) -> pld_lib.PrivacyLossDistribution:
    """The PLD of an (epsilon, 0)-DP guarantee: it dominates every epsilon-DP mechanism's PLD and
    keeps delta = 0 exact."""
    return pld_lib.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(epsilon, 0.0), value_discretization_interval=VALUE_DISCRETIZATION
    )


def _compose(plds: list) -> pld_lib.PrivacyLossDistribution | None:
    result = None
    for item in plds:
        if item is not None:
            result = item if result is None else result.compose(item)
    return result


def event_to_dict(event: dp_event.DpEvent) -> dict[str, Any]:
    """Serialise a dp_accounting event (nested events included) to plain JSON types.

    Parameters
    ----------
    event : dp_accounting.dp_event.DpEvent
        The event.

    Returns
    -------
    dict
        ``{"type": class name, field: value, ...}``, nested events as such dicts.
    """
    out: dict[str, Any] = {"type": type(event).__name__}
    for attribute in attr.fields(type(event)):
        value = getattr(event, attribute.name)
        if isinstance(value, dp_event.DpEvent):
            value = event_to_dict(value)
        elif isinstance(value, (list, tuple)):
            value = [event_to_dict(v) if isinstance(v, dp_event.DpEvent) else v for v in value]
        out[attribute.name] = value
    return out


def event_from_dict(data: dict[str, Any]) -> dp_event.DpEvent:
    """Inverse of :func:`event_to_dict`.

    Parameters
    ----------
    data : dict
        A dict written by :func:`event_to_dict`.

    Returns
    -------
    dp_accounting.dp_event.DpEvent
        The event.
    """
    fields = dict(data)
    cls = getattr(dp_event, fields.pop("type"))
    for name, value in fields.items():
        if isinstance(value, dict) and "type" in value:
            fields[name] = event_from_dict(value)
        elif isinstance(value, list):
            fields[name] = [event_from_dict(v) if isinstance(v, dict) else v for v in value]
    return cls(**fields)


@dataclass(frozen=True)
class LedgerEntry:
    """One randomisation of private labels: what ran (``event``) and on which examples.

    Parameters
    ----------
    tag, description, event, members
        The attributes of the same names.

    Attributes
    ----------
    tag : str
        The entry's name, unique within its ledger.
    description : str
        What was released, in words.
    event : dp_accounting.dp_event.DpEvent
        The event applied (independently) to the label of each member.
    members : numpy.ndarray
        Boolean mask of shape (dataset_size,) over the ledger's dataset.
    aggregate : bool
        Whether ``event`` is a statistic over the members (a histogram, marginals) that covers the rows
        of each privacy unit together: a unit is charged it once, however many of its rows are members.
        Otherwise the event ran on each member's label, and a unit is charged it once per member row.
    row_event : dp_accounting.dp_event.DpEvent or None
        For an aggregate event calibrated to units of several rows, what it guarantees each row (for the
        per-row epsilon); None: ``event``.
    num_members : int
        The number of members.
    """

    tag: str
    description: str
    event: dp_event.DpEvent
    members: np.ndarray = field(repr=False)  # boolean mask over the ledger's dataset
    aggregate: bool = False
    row_event: dp_event.DpEvent | None = None

    @property
    def num_members(self) -> int:
        """The number of examples the entry touched.

        Returns
        -------
        int
            ``members.sum()``.
        """
        return int(self.members.sum())


class PrivacyLedger:
    """Records every spend of a dataset's label privacy and computes the total epsilon.

    Each entry is an event applied independently to the labels of a set of examples. An example's
    privacy loss is the (adaptive, sequential) composition of the events that touched it, events on
    disjoint examples compose in parallel, and :meth:`epsilon` reports the worst example (see the
    module docstring). The guarantee covers the releases recorded on the ledger, under its neighbouring
    relation, and holds only if each recorded event is the mechanism that actually ran.

    **Privacy units.** With ``units`` (the public unit of each example, e.g. the user who saw an
    impression), the labels protected together are a unit's: neighbouring datasets differ in the
    labels of every row of one unit. A unit's privacy loss is then the composition of what touched its
    rows: an event that ran on each member's label once per member row of the unit (a unit of 5 rows
    released by randomized response at epsilon composes 5 such releases), an aggregate event (whose
    sensitivity the release calibrated to the unit's rows) once. :meth:`epsilon` reports the worst
    unit; :meth:`row_epsilon` the worst row, for information. Without units every row is its own unit.

    Parameters
    ----------
    dataset_size : int
        Number of examples whose labels are protected; members are indices into them.
    neighboring_relation : dp_accounting.NeighboringRelation, optional
        ``REPLACE_ONE`` (label DP, the default) or ``ADD_OR_REMOVE_ONE`` (full DP).
    units : array_like of int or None, optional
        (dataset_size,) the privacy unit of each example, integers in [0, number of units); public,
        never derived from a label. None (the default): every example is its own unit.

    Attributes
    ----------
    dataset_size : int
        Number of examples whose labels are protected.
    units : numpy.ndarray or None
        The privacy unit of each example, or None.
    num_units : int
        The number of privacy units (``dataset_size`` without units).
    neighboring_relation : dp_accounting.NeighboringRelation
        The relation every epsilon of the ledger is stated under.
    relation_name : str
        The relation in words.
    entries : tuple of LedgerEntry
        The entries recorded so far, in order.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``dataset_size`` is not positive, the relation is not one of the two above, or ``units`` is
        not one non-negative integer per example (or is given for a relation other than ``REPLACE_ONE``).
    """

    def __init__(
        self,
        dataset_size: int,
        neighboring_relation: dp_accounting.NeighboringRelation = NEIGHBORING_RELATION,
        units=None,
    ):
        if int(dataset_size) <= 0:
            raise ConfigError(f"dataset_size must be positive, got {dataset_size}")
        if neighboring_relation not in RELATION_NAMES:
            raise ConfigError(f"unsupported neighbouring relation {neighboring_relation!r}")
        self.dataset_size = int(dataset_size)
        self.neighboring_relation = neighboring_relation
        self.units = None if units is None else _check_units(units, self.dataset_size, neighboring_relation)
        self.num_units = self.dataset_size if self.units is None else int(self.units.max()) + 1
        self._entries: list[LedgerEntry] = []

    def contribution(self, members) -> int:
        """The most rows one privacy unit has among ``members`` (1 without units): how many labels
        change together between neighbouring datasets, which an aggregate release's noise must cover.

        Parameters
        ----------
        members : array_like
            Example indices or a boolean mask (see :meth:`members_mask`).

        Returns
        -------
        int
            The largest number of members in one unit; 0 for no members.
        """
        mask = self.members_mask(members)
        if self.units is None:
            return int(mask.any())
        return int(np.bincount(self.units[mask], minlength=1).max())

    @property
    def relation_name(self) -> str:
        """The neighbouring relation in words (``"replace-one label"`` or ``"add-or-remove one example"``).

        Returns
        -------
        str
            The relation's name.
        """
        return RELATION_NAMES[self.neighboring_relation]

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """The entries recorded so far, in order.

        Returns
        -------
        tuple of LedgerEntry
            A copy: recording later does not change it.
        """
        return tuple(self._entries)

    def has(self, tag: str) -> bool:
        """Whether the ledger has an entry tagged ``tag``.

        Parameters
        ----------
        tag : str
            The tag to look for.

        Returns
        -------
        bool
            True if some entry has that tag.
        """
        return any(entry.tag == tag for entry in self._entries)

    def members_mask(self, members) -> np.ndarray:
        """Validate ``members`` (indices or a boolean mask) and return it as a boolean mask.

        Parameters
        ----------
        members : array_like
            1-d array of distinct example indices in [0, dataset_size), or a boolean mask of shape
            (dataset_size,).

        Returns
        -------
        numpy.ndarray
            A new boolean mask of shape (dataset_size,).

        Raises
        ------
        labeldp.errors.ConfigError
            If a mask has the wrong shape, or indices are not 1-d integers in range without repeats.
        """
        array = np.asarray(members)
        if array.dtype == bool:
            if array.shape != (self.dataset_size,):
                raise ConfigError(f"members mask must have shape ({self.dataset_size},), got {array.shape}")
            return array.copy()
        if array.ndim != 1 or array.dtype.kind not in "iu":
            raise ConfigError("members must be a 1-d array of example indices or a boolean mask")
        if array.size and (array.min() < 0 or array.max() >= self.dataset_size):
            raise ConfigError(f"members must be indices in [0, {self.dataset_size})")
        if np.unique(array).size != array.size:
            raise ConfigError("members contains repeated indices")
        mask = np.zeros(self.dataset_size, dtype=bool)
        mask[array] = True
        return mask

    def record(
        self,
        event: dp_event.DpEvent,
        members,
        description: str,
        tag: str | None = None,
        *,
        aggregate: bool = False,
        row_event: dp_event.DpEvent | None = None,
    ) -> LedgerEntry:
        """Add one spend: ``event`` was applied (independently) to the labels of ``members``, or, with
        ``aggregate``, once to all of them.

        Parameters
        ----------
        event : dp_accounting.dp_event.DpEvent
            What ran on each member's label, under the ledger's neighbouring relation; with
            ``aggregate``, what the whole release guarantees each privacy unit (its sensitivity
            covering the unit's rows among the members, :meth:`contribution`).
        members : array_like
            The examples whose labels it read: indices or a boolean mask (see :meth:`members_mask`).
        description : str
            What was released, in words.
        tag : str or None, optional
            A unique name for the entry (default ``"entry<N>"``).
        aggregate : bool, optional
            Charge each unit ``event`` once, not once per member row (default False).
        row_event : dp_accounting.dp_event.DpEvent or None, optional
            What an aggregate release guarantees each row, where it differs from ``event`` (default
            None: ``event``).

        Returns
        -------
        LedgerEntry
            The entry recorded.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``event`` is not a DpEvent or cannot be accounted under the ledger's relation, the tag is
            already used, or ``members`` is invalid.
        """
        if not isinstance(event, dp_event.DpEvent):
            raise ConfigError(f"event must be a dp_accounting DpEvent, got {type(event).__name__}")
        tag = tag or f"entry{len(self._entries) + 1}"
        if self.has(tag):
            raise ConfigError(f"the ledger already has an entry tagged {tag!r}")
        self._check_supported(event)
        if row_event is not None:
            self._check_supported(row_event)
        entry = LedgerEntry(tag, description, event, self.members_mask(members), bool(aggregate), row_event)
        self._entries.append(entry)
        return entry

    def _check_supported(self, event: dp_event.DpEvent) -> None:
        if needs_rdp(event):
            if self.neighboring_relation != DPSGD_RELATION:
                raise ConfigError(
                    "the ledger accounts private selection (RepeatAndSelectDpEvent) under add-or-remove only"
                )
            if not rdp_privacy_accountant.RdpAccountant(neighboring_relation=DPSGD_RELATION).supports(event):
                raise ConfigError(f"dp_accounting's RDP accountant cannot account {event}")
            return
        try:
            event_pld(event, self.neighboring_relation)
        except NonPrivateRelease:
            pass

    def _groups(self, per_row: bool = False) -> list[list[tuple[int, int]]]:
        """Each distinct way entries touch a privacy unit (a row, ``per_row`` or without units): the
        entries' indices with the number of times each is composed."""
        if not self._entries:
            return []
        if self.units is None or per_row:
            return [[(index, 1) for index in group] for group in self._row_groups()]
        counts = np.stack(
            [
                np.minimum(np.bincount(self.units[entry.members], minlength=self.num_units), 1)
                if entry.aggregate
                else np.bincount(self.units[entry.members], minlength=self.num_units)
                for entry in self._entries
            ],
            axis=1,
        )
        return [
            [(int(index), int(signature[index])) for index in np.flatnonzero(signature)]
            for signature in np.unique(counts, axis=0)
            if signature.any()
        ]

    def _row_groups(self) -> list[list[int]]:
        """Entry indices of each distinct set of entries that touches some example.

        Up to :data:`_COUNTED_ENTRIES` entries, each example's set is a bit code counted in slices
        (linear time, memory bounded by a slice: a single release over 10^8 examples takes about a
        second); beyond, the distinct columns of the stacked member masks."""
        if len(self._entries) <= _COUNTED_ENTRIES:
            present = np.zeros(1 << len(self._entries), dtype=bool)
            for start in range(0, self.dataset_size, _SLICE):
                code = np.zeros(min(_SLICE, self.dataset_size - start), dtype=np.uint16)
                for bit, entry in enumerate(self._entries):
                    code |= entry.members[start : start + _SLICE].astype(np.uint16) << bit
                present |= np.bincount(code, minlength=present.size) > 0
            return [
                [bit for bit in range(len(self._entries)) if code >> bit & 1]
                for code in np.flatnonzero(present)
                if code
            ]
        masks = np.stack([entry.members for entry in self._entries])
        signatures = np.unique(np.packbits(masks, axis=0), axis=1)
        groups = []
        for column in signatures.T:
            touched = np.flatnonzero(np.unpackbits(column)[: len(self._entries)])
            if touched.size:
                groups.append(touched.tolist())
        return groups

    def epsilon(self, delta: float = 0.0) -> float:
        """Smallest epsilon (from dp_accounting's PLDs) such that the run is (eps, delta)-label-DP, for
        each privacy unit (each example, without units).

        Units are grouped by the exact way entries touched them; each group's events are composed as
        PLDs (with dp_accounting's RDP accountant where a private selection has no PLD) and the worst
        group is reported. Reported epsilons are pessimistic by at most about ``VALUE_DISCRETIZATION``
        per composition. Under ``ADD_OR_REMOVE_ONE`` the guarantee is full DP rather than label DP.

        Parameters
        ----------
        delta : float, optional
            Target delta, in [0, 1) (default 0).

        Returns
        -------
        float
            The epsilon; 0 for an empty ledger, ``math.inf`` if a non-private release was recorded.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``delta`` is not in [0, 1).
        """
        return self._worst(delta, per_row=False)

    def row_epsilon(self, delta: float = 0.0) -> float:
        """The epsilon of one row's label alone (what :meth:`epsilon` reports without units).

        Parameters
        ----------
        delta : float, optional
            Target delta, in [0, 1) (default 0).

        Returns
        -------
        float
            The epsilon, as :meth:`epsilon` computes it for rows.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``delta`` is not in [0, 1).
        """
        return self._worst(delta, per_row=True)

    def _worst(self, delta: float, per_row: bool) -> float:
        if not 0.0 <= delta < 1.0:
            raise ConfigError(f"delta must lie in [0, 1), got {delta}")
        worst = 0.0
        for group in self._groups(per_row):
            events = []
            for index, count in group:
                entry = self._entries[index]
                event = entry.row_event if per_row and entry.row_event is not None else entry.event
                events.append(event if count == 1 else dp_event.SelfComposedDpEvent(event, count))
            if any(needs_rdp(event) for event in events):
                worst = max(worst, rdp_epsilon(events, delta, self.neighboring_relation))
                continue
            try:
                composed = _compose([event_pld(event, self.neighboring_relation) for event in events])
            except NonPrivateRelease:
                return math.inf
            if composed is not None:
                pure = pure_epsilon(dp_event.ComposedDpEvent(events))
                found = composed.get_epsilon_for_delta(delta)
                worst = max(worst, found if pure is None else min(found, pure))
        return worst

    def to_dict(self, delta: float = 0.0) -> dict[str, Any]:
        """The ledger and its epsilon at ``delta`` as plain JSON types.

        Parameters
        ----------
        delta : float, optional
            The delta at which the epsilon is reported (default 0).

        Returns
        -------
        dict
            The relation, dataset size, delta, epsilon and entries (each event as :func:`event_to_dict`
            writes it, the members packed as base64 bits).

        Raises
        ------
        labeldp.errors.ConfigError
            If ``delta`` is not in [0, 1).
        """
        data = {
            "neighboring_relation": self.neighboring_relation.name,
            "dataset_size": self.dataset_size,
            "delta": delta,
            "epsilon": self.epsilon(delta),
            "entries": [_entry_to_dict(e) for e in self._entries],
        }
        if self.units is not None:
            data["privacy_units"] = {
                "count": self.num_units,
                "row_epsilon": self.row_epsilon(delta),
                "units_int64_zlib_base64": base64.b64encode(zlib.compress(self.units.astype("<i8").tobytes())).decode(),
            }
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PrivacyLedger:
        """Rebuild a ledger from :meth:`to_dict`'s output, recording its entries again.

        Files written before ledgers had a relation are read as ``REPLACE_ONE``.

        Parameters
        ----------
        data : dict
            A dict written by :meth:`to_dict` (the stored epsilon is not read: it is computed again).

        Returns
        -------
        PrivacyLedger
            The ledger.

        Raises
        ------
        labeldp.errors.ConfigError
            If an entry cannot be recorded (a repeated tag, invalid members, an unsupported event).
        """
        relation = data.get("neighboring_relation", NEIGHBORING_RELATION.name)
        if relation not in dp_accounting.NeighboringRelation.__members__:  # files written before relations
            relation = NEIGHBORING_RELATION.name
        units = data.get("privacy_units")
        if units is not None:
            units = np.frombuffer(zlib.decompress(base64.b64decode(units["units_int64_zlib_base64"])), dtype="<i8")
        ledger = cls(data["dataset_size"], dp_accounting.NeighboringRelation[relation], units)
        for item in data["entries"]:
            packed = np.frombuffer(base64.b64decode(item["members_packbits_base64"]), dtype=np.uint8)
            members = np.unpackbits(packed)[: ledger.dataset_size].astype(bool)
            row_event = item.get("row_event")
            ledger.record(
                event_from_dict(item["event"]),
                members,
                item["description"],
                item["tag"],
                aggregate=bool(item.get("aggregate", False)),
                row_event=None if row_event is None else event_from_dict(row_event),
            )
        return ledger

    def save(self, path: str | os.PathLike, delta: float = 0.0) -> None:
        """Write the ledger as JSON atomically (a crash never leaves a half-written file).

        Parameters
        ----------
        path : str or os.PathLike
            The file to write.
        delta : float, optional
            The delta at which the stored epsilon is reported (default 0).

        Returns
        -------
        None

        Raises
        ------
        labeldp.errors.ConfigError
            If ``delta`` is not in [0, 1).
        """
        write_text_atomic(path, json.dumps(self.to_dict(delta), indent=2))

    @classmethod
    def load(cls, path: str | os.PathLike) -> PrivacyLedger:
        """Read a ledger written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
            The JSON file.

        Returns
        -------
        PrivacyLedger
            The ledger, its entries recorded again.

        Raises
        ------
        labeldp.errors.ConfigError
            If an entry cannot be recorded (see :meth:`from_dict`).
        """
        return cls.from_dict(json.loads(Path(path).read_text()))

    def __repr__(self) -> str:
        return (
            f"PrivacyLedger(dataset_size={self.dataset_size}, relation={self.relation_name!r}, "
            f"entries={len(self._entries)})"
        )


def _entry_to_dict(entry: LedgerEntry) -> dict[str, Any]:
    data = {
        "tag": entry.tag,
        "description": entry.description,
        "event": event_to_dict(entry.event),
        "num_members": entry.num_members,
        "members_packbits_base64": base64.b64encode(np.packbits(entry.members).tobytes()).decode(),
    }
    if entry.aggregate:
        data["aggregate"] = True
    if entry.row_event is not None:
        data["row_event"] = event_to_dict(entry.row_event)
    return data


def _check_units(units, dataset_size: int, relation: dp_accounting.NeighboringRelation) -> np.ndarray:
    """The units as an int64 array of one non-negative integer per example."""
    if relation != NEIGHBORING_RELATION:
        raise ConfigError("privacy units are accounted under the replace-one-label relation only")
    array = np.asarray(units)
    if array.shape != (dataset_size,) or array.dtype.kind not in "iu" or (array.size and array.min() < 0):
        raise ConfigError(f"units must be one non-negative integer per example ({dataset_size})")
    return array.astype(np.int64)


@contextlib.contextmanager
def quiet_rdp():
    """Silence dp_accounting's RDP accountant while it computes.

    dp_accounting's RDP accountant logs a warning for every Renyi order it leaves out of a bound
    (which only loosens it): silenced while it computes.

    Returns
    -------
    contextlib.AbstractContextManager
        A context manager that raises the ``absl`` logger's level to ERROR and restores it on exit.
    """
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
