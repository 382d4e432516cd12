"""Releases drawn by several processes, each on its own rows, and recorded once.

Under ``torchrun`` each rank reads only its own rows of a table (its row groups). A release of per-row
labels is then drawn in parts: every rank draws the labels of its own members, each from a noise stream
of its own (no two ranks may draw from the same stream), and hands the part to the process that records
(rank 0) through ``gather``, a collective the caller supplies (:func:`labeldp.distributed.gather_to_main`;
the boundary itself knows no process group). That process checks that the parts cover the members
exactly once, joins them in member order and records **one** ledger entry, the entry one process would
record for the same members. An error on any rank (a label outside its range) travels in its part and
is raised on the recording process before anything is recorded; the other ranks get None back and
learn the outcome from rank 0.

The noisy label counts over hashed features are summed the same way
(:func:`labeldp.boundary.release_hashed.release_hashed_counts`' ``gather``): each rank counts its rows,
the recording process sums the parts and alone draws the noise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from labeldp._validation import check_epsilon, check_same_length
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.release import Release, _per_row, _recorded, _release, _true_labels, rr_release
from labeldp.errors import ConfigError
from labeldp.mechanisms import randomized_response
from labeldp.randomness import RandomSource

#: a collective: called on every process with its part, it returns every part on the process that
#: records (in process order) and None on the others
Gather = Callable[[Any], "list[Any] | None"]


def raise_first_error(parts: Sequence[Any]) -> None:
    """Raise the first part that is an error (a process that failed while reading or drawing its rows).

    Parameters
    ----------
    parts : sequence
        Every process's part.

    Raises
    ------
    BaseException
        The first error among ``parts``, as the process raised it.
    """
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
    """K-ary RR on every member's label, drawn by several processes on their own rows, recorded once.

    Each process passes the same ``ledger`` (empty of this release), ``members`` and ``epsilon``, and its
    own ``rows`` (its members) with their true ``labels`` and its own ``rng``. Each row's epsilon is
    computed from all the members (``epsilon / c``, c the most members of one privacy unit), so it is
    the same on every process and the same as one process's
    :func:`~labeldp.boundary.release_randomized_response`; so is the ledger entry.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger; the recording process records the release on its own.
    labels : PrivateLabels or None
        This process's members' true labels, in row order, as class positions; read here (None where
        ``rows`` is empty).
    rows : array_like
        This process's members: sorted indices into the ledger's dataset.
    members : array_like
        Every process's members (indices or a boolean mask), the same on every process.
    num_classes : int
        K.
    epsilon : float
        The privacy parameter per privacy unit, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator
        This process's noise: a stream no other process draws from.
    tag : str or None
        The ledger entry's tag.
    gather : callable
        The collective handing every part to the recording process (:data:`Gather`).

    Returns
    -------
    Release or None
        The whole release on the recording process (recorded there), None on the others.

    Raises
    ------
    labeldp.errors.ConfigError
        On the recording process, before anything is recorded: a process's rows are not members or not as many
        as its labels, a label is outside its range, or the parts do not cover the members exactly once.
    """
    eps = check_epsilon(epsilon)
    indices = _recorded(ledger, members, tag)
    eps, per_unit = _per_row(ledger, indices, eps)
    try:
        mine = np.asarray(rows, dtype=np.int64)
        if mine.size and (not np.all(np.diff(mine) > 0) or not np.isin(mine, indices).all()):
            raise ConfigError("a process's rows must be sorted members")
        if mine.size == 0:  # a process without members (fewer row groups than processes)
            part: Any = (mine, np.zeros(0, np.int64))
        else:
            true = _true_labels(labels, num_classes)
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
    return _release(ledger, tag, rr_release(indices, noisy, num_classes, eps, per_unit))


__all__ = ["Gather", "raise_first_error", "release_randomized_response_part"]
