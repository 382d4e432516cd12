"""Releases drawn by several processes on their own rows and recorded once (labeldp.boundary.release_parts,
release_hashed_counts' gather), with the processes played in turn by one: the process that records gets
every part, the others None."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import PrivateLabels, release_hashed_counts, release_randomized_response
from labeldp.boundary.release_parts import release_randomized_response_part
from labeldp.errors import ConfigError, DataError

ROWS = 40
UNITS = np.arange(ROWS) // 4  # 10 units of 4 rows
LABELS = np.random.default_rng(0).integers(0, 2, ROWS)
MEMBERS = np.flatnonzero(np.arange(ROWS) % 4 != 3)  # 3 rows a unit: each row's epsilon is epsilon / 3


class Processes:
    """A gather that collects the parts of ``count`` processes called in turn; the last one records."""

    def __init__(self, count: int):
        self.count, self.parts = count, []

    def __call__(self, part):
        self.parts.append(part)
        return list(self.parts) if len(self.parts) == self.count else None


def _rr_parts(shares, ledger: PrivacyLedger, processes=None):
    processes = processes or Processes(len(shares))
    found = []
    for seed, rows in enumerate(shares):
        labels = PrivateLabels.from_indices(LABELS[rows], 2)
        found.append(release_randomized_response_part(ledger, labels, rows, MEMBERS, 2, 3.0, seed, "labels", processes))
    return found


def test_parts_of_a_release_record_what_one_process_records() -> None:
    alone = PrivacyLedger(ROWS, units=UNITS)
    single = release_randomized_response(
        alone, PrivateLabels.from_indices(LABELS[MEMBERS], 2), MEMBERS, 2, 3.0, 0, "labels"
    )
    ledger = PrivacyLedger(ROWS, units=UNITS)
    shares = [MEMBERS[MEMBERS < 20], MEMBERS[MEMBERS >= 20]]
    *others, joined = _rr_parts(shares, ledger)
    assert others == [None]
    assert ledger.to_dict() == alone.to_dict()  # one entry: the same event, members and epsilons
    assert joined.description == single.description and joined.event == single.event
    np.testing.assert_array_equal(joined.members, MEMBERS)
    first = release_randomized_response(  # at each row's epsilon, 3 / 3
        PrivacyLedger(ROWS), PrivateLabels.from_indices(LABELS[shares[0]], 2), shares[0], 2, 1.0, 0
    )
    np.testing.assert_array_equal(joined.labels[: shares[0].size], first.labels)  # each part from its own stream


@pytest.mark.parametrize(
    "shares", [[MEMBERS[:10], MEMBERS[5:]], [MEMBERS[:10], MEMBERS[12:]]], ids=["overlap", "missing"]
)
def test_parts_that_do_not_cover_the_members_once_are_never_recorded(shares) -> None:
    ledger = PrivacyLedger(ROWS, units=UNITS)
    with pytest.raises(ConfigError, match="exactly once"):
        _rr_parts(shares, ledger)
    assert ledger.entries == ()


def test_an_error_in_one_part_is_raised_where_the_release_is_recorded() -> None:
    ledger = PrivacyLedger(ROWS, units=UNITS)
    processes = Processes(2)
    processes.parts.append(DataError("label column 'y' holds a value outside the classes"))
    with pytest.raises(DataError, match="outside the classes"):
        _rr_parts([MEMBERS], ledger, processes)
    assert ledger.entries == ()


def test_counts_summed_over_processes_are_one_process_counts() -> None:
    buckets = np.random.default_rng(1).integers(0, 8, (ROWS, 2)) + np.array([0, 8])

    def blocks(rows):
        return [(rows, buckets[rows], PrivateLabels.from_indices(LABELS[rows], 2))]

    alone = PrivacyLedger(ROWS, units=UNITS)
    single = release_hashed_counts(alone, blocks(np.arange(ROWS)), MEMBERS, 16, 2, 2, 2.0, 7, "counts")
    ledger, processes = PrivacyLedger(ROWS, units=UNITS), Processes(2)
    parts = [np.arange(0, ROWS, 2), np.arange(1, ROWS, 2)]  # each process its own rows, every other one
    found = [
        release_hashed_counts(ledger, blocks(rows), MEMBERS, 16, 2, 2, 2.0, 7, "counts", processes) for rows in parts
    ]
    assert found[0] is None
    np.testing.assert_array_equal(found[1].arrays["counts"], single.arrays["counts"])  # the same noise on the same sum
    assert ledger.to_dict() == alone.to_dict()
    twice, processes = PrivacyLedger(ROWS, units=UNITS), Processes(2)
    assert release_hashed_counts(twice, blocks(np.arange(ROWS)), MEMBERS, 16, 2, 2, 2.0, 7, "counts", processes) is None
    with pytest.raises(ConfigError, match="two processes"):
        release_hashed_counts(twice, blocks(np.arange(1, ROWS, 2)), MEMBERS, 16, 2, 2, 2.0, 7, "counts", processes)
    assert twice.entries == ()


def test_a_process_without_members_sends_an_empty_part() -> None:
    ledger, alone = PrivacyLedger(ROWS, units=UNITS), PrivacyLedger(ROWS, units=UNITS)
    processes = Processes(3)
    empty = np.zeros(0, np.int64)
    assert release_randomized_response_part(ledger, None, empty, MEMBERS, 2, 3.0, 0, "labels", processes) is None
    *_, joined = _rr_parts([MEMBERS[MEMBERS < 20], MEMBERS[MEMBERS >= 20]], ledger, processes)
    release_randomized_response(alone, PrivateLabels.from_indices(LABELS[MEMBERS], 2), MEMBERS, 2, 3.0, 0, "labels")
    np.testing.assert_array_equal(joined.members, MEMBERS)
    assert ledger.to_dict() == alone.to_dict()
