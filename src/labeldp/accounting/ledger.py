"""The privacy ledger: every randomisation of private labels as a ``dp_accounting`` event, and the only
place epsilon is computed.

An example's loss composes the events that touched it (adaptively, in sequence); events on disjoint
examples compose in parallel. The ledger groups examples by the set of entries that touched them,
composes each group's privacy loss distributions (PLDs) and reports the worst. The neighbouring
relation (:mod:`labeldp.accounting.events`) is fixed when a ledger is created; the label mechanisms
are accounted under replace-one only. Under replace-one-label neighbours:

- ``RandomizedResponseDpEvent``: dp_accounting's REPLACE_ONE PLD.
- ``DiscreteLaplaceDpEvent(a, sensitivity)``: integer values moving by ``sensitivity`` when a label is
  replaced, accounted as the pure (a x sensitivity, 0)-DP guarantee they meet exactly (dp_accounting
  takes it under add/remove only, and its PLD reports an infinite epsilon at delta 0 from sensitivity 32).
- ``LaplaceDpEvent(b)``: a pure (1 / b, 0)-DP guarantee, as a source outside labeldp states it
  (:func:`~labeldp.accounting.events.stated_event`), or an old ledger's continuous Laplace.
- ``GaussianDpEvent(s)``: a query moving by at most 1 (L2) plus N(0, s^2) noise, dp_accounting's
  Gaussian PLD for a shift of 1 (PATE's aggregator, :func:`~labeldp.accounting.events.pate_event`);
  dp_accounting's own REPLACE_ONE Gaussian would assume a shift of 2.
- ``PoissonSampledDpEvent(GaussianDpEvent)``: a DP-SGD step, add-or-remove only, as dp_accounting's
  ``PLDAccountant`` builds it.
- ``SelfComposedDpEvent``, ``ComposedDpEvent``, ``NoOpDpEvent``; ``NonPrivateDpEvent`` makes epsilon infinite.
- ``RepeatAndSelectDpEvent`` (private selection, Papernot & Steinke 2022), add-or-remove only: it has
  no PLD, so the examples it touched are accounted with dp_accounting's RDP accountant (looser).
"""

from __future__ import annotations

import base64
import json
import math
import os
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dp_accounting
import numpy as np
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant

from labeldp.accounting.composition import (
    check_accountable,
    compose_plds,
    event_from_dict,
    event_pld,
    event_to_dict,
    needs_rdp,
    non_private,
    pure_epsilon,
    rdp_epsilon,
)
from labeldp.accounting.events import DPSGD_RELATION, NEIGHBORING_RELATION, RELATION_NAMES
from labeldp.errors import ConfigError
from labeldp.files import write_text_atomic

#: Ledgers with up to this many entries group their examples by counting bit codes (see ``_groups``).
_COUNTED_ENTRIES = 16
_SLICE = 1 << 22


@dataclass(frozen=True)
class LedgerEntry:
    """One randomisation of private labels: what ran (``event``) and on which examples.

    Attributes
    ----------
    tag : str
        The entry's name, unique within its ledger.
    description : str
        What was released, in words.
    event : dp_accounting.dp_event.DpEvent
        The event applied independently to each member's label.
    members : numpy.ndarray
        Boolean mask over the ledger's dataset.
    aggregate : bool
        Whether ``event`` is a statistic over the members (a histogram, marginals) covering each privacy
        unit's rows together, charged to a unit once rather than once per member row.
    row_event : dp_accounting.dp_event.DpEvent or None
        What an aggregate event calibrated to units of several rows guarantees each row (None: ``event``).
    """

    tag: str
    description: str
    event: dp_event.DpEvent
    members: np.ndarray = field(repr=False)  # boolean mask over the ledger's dataset
    aggregate: bool = False
    row_event: dp_event.DpEvent | None = None

    @property
    def num_members(self) -> int:
        """The number of examples the entry touched."""
        return int(self.members.sum())


class PrivacyLedger:
    """Records every spend of a dataset's label privacy and computes the total epsilon.

    :meth:`epsilon` reports the worst example's composed loss (see :mod:`labeldp.accounting.ledger`). The
    guarantee covers the releases recorded, under the ledger's relation, and holds only if each recorded
    event is the mechanism that actually ran.

    **Privacy units.** With ``units`` (each example's public unit, e.g. the user who saw an impression),
    neighbouring datasets differ in the labels of every row of one unit. A unit's loss composes an event
    that ran on each member's label once per member row (5 rows released by RR compose 5 releases), and an
    aggregate event, calibrated to the unit's rows, once. :meth:`epsilon` reports the worst unit,
    :meth:`row_epsilon` the worst row. Without units every row is its own unit.

    Parameters
    ----------
    dataset_size : int
        Number of examples whose labels are protected; members are indices into them.
    neighboring_relation : dp_accounting.NeighboringRelation, optional
        ``REPLACE_ONE`` (label DP, the default) or ``ADD_OR_REMOVE_ONE`` (full DP).
    units : array_like of int or None, optional
        Each example's privacy unit, integers in [0, number of units); public, never derived from a label.
        Replace-one only.

    Attributes
    ----------
    num_units : int
        The number of privacy units (``dataset_size`` without units).
    relation_name : str
        The relation in words.
    entries : tuple of LedgerEntry
        The entries recorded so far, in order.
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
        """The most rows one unit has among ``members`` (1 without units, 0 for none): how many labels change
        together between neighbours, which an aggregate release's noise must cover.
        """
        mask = self.members_mask(members)
        if self.units is None:
            return int(mask.any())
        return int(np.bincount(self.units[mask], minlength=1).max())

    @property
    def relation_name(self) -> str:
        """The neighbouring relation in words (``"replace-one label"`` or ``"add-or-remove one example"``)."""
        return RELATION_NAMES[self.neighboring_relation]

    @property
    def entries(self) -> tuple[LedgerEntry, ...]:
        """A copy of the entries recorded so far, in order."""
        return tuple(self._entries)

    def has(self, tag: str) -> bool:
        """Whether an entry is tagged ``tag``."""
        return any(entry.tag == tag for entry in self._entries)

    def members_mask(self, members) -> np.ndarray:
        """``members``, distinct indices or a boolean mask over the dataset, checked and as a new mask."""
        array = np.asarray(members)
        if array.dtype == bool:
            if array.shape != (self.dataset_size,):
                raise ConfigError(f"members mask must have shape ({self.dataset_size},), got {array.shape}")
            return array if array.strides == (0,) else array.copy()  # every row alike: one value, read-only
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
        """Record that ``event`` ran independently on each member's label or, with ``aggregate``, once on all of
        them (then ``event`` is what the release guarantees each unit, its sensitivity covering the unit's
        member rows: :meth:`contribution`).

        ``row_event`` is what an aggregate release guarantees one row, where it differs from ``event``. Raises
        :class:`~labeldp.errors.ConfigError` if the event cannot be accounted under the ledger's relation or
        the tag is taken.
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
        check_accountable(event, self.neighboring_relation)

    def _groups(self, per_row: bool = False) -> list[list[tuple[int, int]]]:
        """Each distinct way entries touch a unit (a row, ``per_row`` or without units): (entry, times composed)."""
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

        Up to :data:`_COUNTED_ENTRIES` entries, each example's set is a bit code counted slice by slice (linear
        time, memory bounded by a slice); beyond, the distinct columns of the stacked member masks.
        """
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
        """The smallest epsilon such that each privacy unit (each example, without units) is (epsilon,
        delta)-label-DP: full DP under ``ADD_OR_REMOVE_ONE``.

        0 for an empty ledger, ``math.inf`` once a non-private release is recorded. Pessimistic by at most about
        ``VALUE_DISCRETIZATION`` per composition.
        """
        return self._worst(delta, per_row=False)

    def row_epsilon(self, delta: float = 0.0) -> float:
        """The epsilon of one row's label alone (what :meth:`epsilon` reports without units)."""
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
            if any(non_private(event) for event in events):
                return math.inf
            composed = compose_plds([event_pld(event, self.neighboring_relation) for event in events])
            if composed is not None:
                pure = pure_epsilon(dp_event.ComposedDpEvent(events))
                found = composed.get_epsilon_for_delta(delta)
                worst = max(worst, found if pure is None else min(found, pure))
        return worst

    def to_dict(self, delta: float = 0.0) -> dict[str, Any]:
        """The ledger and its epsilon at ``delta`` as JSON types, the members packed as base64 bits."""
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
        """The ledger of :meth:`to_dict`'s dict, its entries recorded again and its epsilon recomputed (files
        older than relations are read as ``REPLACE_ONE``).
        """
        relation = data.get("neighboring_relation", NEIGHBORING_RELATION.name)
        if relation not in dp_accounting.NeighboringRelation.__members__:  # files written before relations
            relation = NEIGHBORING_RELATION.name
        units = data.get("privacy_units")
        if units is not None:
            units = np.frombuffer(zlib.decompress(base64.b64decode(units["units_int64_zlib_base64"])), dtype="<i8")
        ledger = cls(data["dataset_size"], dp_accounting.NeighboringRelation[relation], units)
        for item in data["entries"]:
            if item.get("members") == "all":
                members = np.broadcast_to(True, ledger.dataset_size)
            else:
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
        """Write the ledger as JSON atomically (a crash never leaves a half-written file)."""
        write_text_atomic(path, json.dumps(self.to_dict(delta), indent=2))

    @classmethod
    def load(cls, path: str | os.PathLike) -> PrivacyLedger:
        """Read a ledger written by :meth:`save`."""
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
        **(
            {"members": "all"}  # an entry over every row, recorded as one value (a release on an engine)
            if entry.members.strides == (0,) and entry.members.all()
            else {"members_packbits_base64": base64.b64encode(np.packbits(entry.members).tobytes()).decode()}
        ),
    }
    if entry.aggregate:
        data["aggregate"] = True
    if entry.row_event is not None:
        data["row_event"] = event_to_dict(entry.row_event)
    return data


def _check_units(units, dataset_size: int, relation: dp_accounting.NeighboringRelation) -> np.ndarray:
    """The units as int64, one non-negative integer per example."""
    if relation != NEIGHBORING_RELATION:
        raise ConfigError("privacy units are accounted under the replace-one-label relation only")
    array = np.asarray(units)
    if array.shape != (dataset_size,) or array.dtype.kind not in "iu" or (array.size and array.min() < 0):
        raise ConfigError(f"units must be one non-negative integer per example ({dataset_size})")
    return array.astype(np.int64)
