"""Releases drawn by several processes, each on its own rows, and recorded once.

Under ``torchrun`` each rank reads only its own rows. Every rank draws its members' labels from a noise
stream of its own and hands its part to the recording process (rank 0) through ``gather``, a collective
the caller supplies (:func:`labeldp.distributed.gather_to_main`: the boundary knows no process group).
That process checks the parts cover the members exactly once, joins them in member order and records
**one** entry, the one a single process would record. An error on any rank travels in its part and is
raised there before anything is recorded; the other ranks get None back. The hashed counts are summed
the same way (:func:`labeldp.boundary.release_hashed.release_hashed_counts`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from labeldp._validation import check_epsilon, check_same_length
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.release import Release, member_indices, per_row, record_release, rr_release, true_labels
from labeldp.errors import ConfigError
from labeldp.mechanisms import randomized_response
from labeldp.randomness import RandomSource

#: a collective: called on every process with its part, it returns every part on the process that
#: records (in process order) and None on the others
Gather = Callable[[Any], "list[Any] | None"]


def raise_first_error(parts: Sequence[Any]) -> None:
    """Raise the first part that is an error (a process that failed reading or drawing its rows)."""
    for part in parts:
        if isinstance(part, BaseException):
            raise part


def release_randomized_response_part(
    ledger: PrivacyLedger,
    labels,
    rows,
    members,
    num_classes: int,
    epsilon: float,
    rng: RandomSource,
    tag: str | None,
    gather: Gather,
) -> Release | None:
    """K-ary RR on every member's label, drawn by several processes on their own rows, recorded once on the
    recording process, which returns the whole release (the others None).

    Every process passes the same ``ledger`` (without this release), ``members`` and ``epsilon``, and its own
    ``rows`` (sorted members; may be empty, with ``labels`` None), their true ``labels`` and an ``rng`` stream
    no other process draws from. Each row's epsilon comes from all the members (epsilon / c per unit), so
    the release and entry are :func:`~labeldp.boundary.release_randomized_response`'s. Raises
    :class:`~labeldp.errors.ConfigError` on the recording process, before anything is recorded, if any part
    is invalid or the parts do not cover the members exactly once.
    """
    eps = check_epsilon(epsilon)
    indices = member_indices(ledger, members, tag)
    eps, per_unit = per_row(ledger, indices, eps)
    try:
        mine = np.asarray(rows, dtype=np.int64)
        if mine.size and (not np.all(np.diff(mine) > 0) or not np.isin(mine, indices).all()):
            raise ConfigError("a process's rows must be sorted members")
        if mine.size == 0:  # a process without members (fewer row groups than processes)
            part: Any = (mine, np.zeros(0, np.int64))
        else:
            true = true_labels(labels, num_classes)
            check_same_length(labels=true, rows=mine)
            part = (mine, randomized_response(true, num_classes, eps, rng))
    except Exception as error:  # handed over: the recording process raises it
        part = error
    parts = gather(part)
    if parts is None:
        return None
    raise_first_error(parts)
    drawn = np.concatenate([rows for rows, _ in parts])
    order = np.argsort(drawn, kind="stable")
    if not np.array_equal(drawn[order], indices):
        raise ConfigError("the processes' rows do not cover the members exactly once; nothing was recorded")
    noisy = np.concatenate([noisy for _, noisy in parts])[order]
    return record_release(ledger, tag, rr_release(indices, noisy, num_classes, eps, per_unit))


__all__ = ["Gather", "raise_first_error", "release_randomized_response_part"]
