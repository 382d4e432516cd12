"""What a release is (:class:`Release`: the members read, the event recorded, what was released) and the
steps every ``release_*`` function of :mod:`labeldp.boundary.release` takes around its draw: the members
checked, a unit's epsilon shared among its rows, the event recorded.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from dp_accounting import dp_event

from labeldp._validation import check_same_length
from labeldp.accounting.ledger import PrivacyLedger, event_from_dict, event_to_dict
from labeldp.errors import ConfigError


@dataclass(frozen=True)
class Release:
    """What one mechanism released about the examples ``members``, and what the ledger recorded.

    Attributes
    ----------
    members : numpy.ndarray
        Sorted indices into the ledger's dataset: the examples whose labels were read.
    event : dp_accounting.dp_event.DpEvent
        The event recorded for each member.
    description : str
        The ledger entry's description.
    labels : numpy.ndarray or None
        One released label per member: a class (ALIBI's arg-max, RR-on-bins' bin), or -1 for a PATE query
        left unanswered; None where no label is released (a histogram, VLP's vectors).
    likelihood : numpy.ndarray or None
        (members, K) the noise channel, L[i, y] = Pr[member i's release | its label is y]; computed from
        public parameters and released values, so free to use.
    arrays : Mapping of str to numpy.ndarray
        The rest of what was released (RR-with-prior's k, ALIBI's noisy vectors, VLP's binary ones, a
        histogram's counts, a regression's ``values``...) and what a method derived from it.
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
        """A copy with more derived (public) arrays; a name already in :attr:`arrays` is replaced."""
        return dataclasses.replace(self, arrays={**self.arrays, **arrays})

    def record(self, ledger: PrivacyLedger, tag: str | None = None) -> None:
        """Record this release's event on ``ledger`` for its members (the ``release_*`` functions do it)."""
        ledger.record(
            self.event, self.members, self.description, tag, aggregate=self.aggregate, row_event=self.row_event
        )

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything as arrays for ``numpy.savez``, the events as JSON text (:meth:`from_arrays` reads them back)."""
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
        """The release saved by :meth:`to_arrays`; nothing is recorded."""
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


def member_indices(ledger: PrivacyLedger, members, tag: str | None, **arrays) -> np.ndarray:
    """The members as sorted indices, the per-member arrays' lengths and the tag checked (nothing recorded)."""
    mask = ledger.members_mask(members)
    indices = np.flatnonzero(mask)
    check_same_length(**arrays, members=indices)
    if ledger.has(tag or ""):
        raise ConfigError(f"the ledger already has an entry tagged {tag!r}")
    return indices


def record_release(ledger: PrivacyLedger, tag: str | None, release: Release) -> Release:
    """``release`` recorded on ``ledger`` under ``tag``."""
    release.record(ledger, tag)
    return release


def per_row(ledger: PrivacyLedger, indices: np.ndarray, epsilon: float) -> tuple[float, str]:
    """Each row's epsilon, and the description's words for it: a unit of c rows gives each epsilon / c."""
    units = ledger.contribution(indices)
    if units <= 1:
        return epsilon, ""
    return epsilon / units, f" per row (epsilon={epsilon:g} for a unit of up to {units} rows)"
