"""The release of noisy label counts over hashed features, streamed: the boundary reads the labels block by block.

A sibling of :mod:`labeldp.boundary.release` (whose ``release_*`` functions take the labels whole):
:func:`release_hashed_counts` takes an iterable of blocks, each a block's row positions, their
public buckets (:func:`labeldp.data.hashing.hashed_blocks`) and their true labels, unseals each
block's labels here, adds them to the counts, and draws the noise once, after the last block, so
that a table of any size is released in one pass with the memory of one block and one table of
counts. Under ``torchrun`` each rank counts its own blocks and the counts are summed by the one that
draws (``gather``, :mod:`labeldp.boundary.release_parts`). Nothing is released, and nothing
recorded, if a block is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from labeldp._validation import check_epsilon, check_labels
from labeldp.accounting.events import hashed_counts_event
from labeldp.accounting.ledger import PrivacyLedger
from labeldp.boundary.labels import unseal
from labeldp.boundary.release import Release
from labeldp.boundary.release_parts import Gather, raise_first_error
from labeldp.errors import ConfigError
from labeldp.mechanisms.hashed_counts import CountAccumulator, noisy_hashed_counts
from labeldp.randomness import RandomSource


def _block_positions(positions, seen: np.ndarray, members: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A block's positions (checked: in range, none met before) and which of them are members."""
    rows = np.asarray(positions)
    if rows.ndim != 1 or rows.dtype.kind not in "iu":
        raise ConfigError("a block's positions must be a 1-d array of row indices")
    if rows.size and (rows.min() < 0 or rows.max() >= seen.size):
        raise ConfigError(f"a block's positions must lie in [0, {seen.size})")
    if not np.all(np.diff(rows) > 0) and np.unique(rows).size != rows.size:
        raise ConfigError("a block repeats a row: each row is counted once")
    keep = members[rows]
    if seen[rows[keep]].any():
        raise ConfigError("a row came in two blocks: each row is counted once")
    seen[rows[keep]] = True
    return rows, keep


def _count(blocks: Iterable, counts: CountAccumulator, seen: np.ndarray, mask: np.ndarray) -> None:
    """Add each block's members' labels to ``counts``, marking them in ``seen``."""
    for positions, buckets, labels in blocks:
        rows, keep = _block_positions(positions, seen, mask)
        true = check_labels(unseal(labels), counts.num_classes)
        if true.size != rows.size or len(buckets) != rows.size:
            raise ConfigError(f"a block has {rows.size} positions, {len(buckets)} bucket rows and {true.size} labels")
        if keep.all():
            counts.add(true, np.asarray(buckets))
        elif keep.any():
            counts.add(true[keep], np.asarray(buckets)[keep])


def release_hashed_counts(
    ledger: PrivacyLedger,
    blocks: Iterable,
    members,
    num_buckets: int,
    num_slots: int,
    num_classes: int,
    epsilon: float,
    rng: RandomSource = None,
    tag: str | None = None,
    gather: Gather | None = None,
) -> Release | None:
    """The label counts of every bucket of every hashed slot, noised (epsilon-label-DP per privacy unit), recorded.

    Each member's label is read once, in the block that holds its row, and counted in one bucket of
    each of the ``num_slots`` slots; the table (``arrays["counts"]``, num_buckets x num_classes) gets
    discrete Laplace noise calibrated to its exact L1 sensitivity, ``num_slots`` (two classes) or
    twice that, times c, the most members of one privacy unit (``ledger.contribution``), and the
    ledger records :func:`~labeldp.accounting.events.hashed_counts_event` once for all members, as an
    aggregate (a unit is charged once, however many of its rows are members).

    The counts are epsilon-label-DP for each privacy unit when the buckets are computed from public
    columns (never from a label) and every member comes in exactly one block, which is checked.

    Parameters
    ----------
    ledger : PrivacyLedger
        The ledger the release is recorded on (under replace-one-label neighbours), over the table's rows.
    blocks : iterable of (positions, buckets, labels)
        The table in blocks: ``positions`` (rows,) the rows' indices into the ledger's dataset,
        ``buckets`` (rows, num_slots) their public buckets, ``labels`` their true labels as class
        positions (:class:`~labeldp.boundary.labels.PrivateLabels`), read here
        (:func:`~labeldp.boundary.labels.unseal`). Rows that are not members are skipped.
    members : array_like
        The rows counted (e.g. the rows a contribution bound kept): indices into the ledger's dataset,
        or a boolean mask over it.
    num_buckets : int
        The size of the index space (``HashSpec.num_buckets``).
    num_slots : int
        F, the buckets of every row.
    num_classes : int
        K, the number of classes.
    epsilon : float
        The privacy parameter of the table, per privacy unit, > 0.
    rng : None, int, str, numpy.random.Generator or labeldp.randomness.SecureGenerator, optional
        The noise (see :mod:`labeldp.randomness`): None (default) for fresh OS entropy, ``"secure"``, a
        generator, or an integer seed (reproducible, hence not private).
    tag : str or None, optional
        The ledger entry's tag, new on the ledger (default None).
    gather : callable or None, optional
        For a release counted by several processes, each on its own blocks
        (:mod:`labeldp.boundary.release_parts`): the collective handing every process's counts (or its
        error) to the one that draws; that process sums them, checks that every member came exactly
        once, draws the noise and records; the others return None. Default None: this process counts
        every member.

    Returns
    -------
    Release or None
        ``arrays["counts"]`` the noisy counts (with two classes column 0 is the bucket's size minus
        the noisy positives) and ``arrays["sizes"]`` the members per bucket (public); no labels. None on
        a process that counted its part for another.

    Raises
    ------
    labeldp.errors.ConfigError
        Before anything is drawn or recorded: if ``epsilon`` is not a finite number > 0, ``members`` is
        invalid, ``tag`` is on the ledger already, a block's buckets or positions are invalid, a row
        comes twice, a member never comes, or a label is outside its range (which, and how many, is
        not said).
    labeldp.boundary.PrivateLabelAccessError
        If a block's labels were withheld.
    """
    eps = check_epsilon(epsilon)
    mask = ledger.members_mask(members)
    if ledger.has(tag or ""):
        raise ConfigError(f"the ledger already has an entry tagged {tag!r}")
    units = max(ledger.contribution(mask), 1)
    counts = CountAccumulator(num_buckets, num_slots, num_classes)
    seen = np.zeros(ledger.dataset_size, dtype=bool)
    try:
        _count(blocks, counts, seen, mask)
        part: Any = (counts.counts, np.packbits(seen))
    except Exception as error:
        if gather is None:
            raise
        part = error  # handed over: the process that draws raises it
    if gather is not None:
        parts = gather(part)
        if parts is None:
            return None
        raise_first_error(parts)
        counts.counts = sum(table for table, _ in parts)
        times = sum(np.unpackbits(bits, count=seen.size).astype(np.int64) for _, bits in parts)
        if np.any(times > 1):
            raise ConfigError("a row came in two processes' blocks: each row is counted once; nothing was released")
        seen = times.astype(bool)
    if not np.array_equal(seen, mask):
        raise ConfigError(f"{int(mask.sum() - seen.sum())} members never came in a block; nothing was released")
    noisy = noisy_hashed_counts(counts.counts, num_slots, eps, rng, units)
    indices = np.flatnonzero(mask)
    release = Release(
        indices,
        hashed_counts_event(eps, num_slots, num_classes, units),
        f"noisy label counts over hashed features, {num_slots} slots ({counts.num_buckets} buckets) x "
        f"{counts.num_classes} classes, epsilon={eps:g}" + (f" for a unit of up to {units} rows" if units > 1 else ""),
        arrays={"counts": noisy, "sizes": counts.counts.sum(axis=1)},
        aggregate=True,
        row_event=hashed_counts_event(eps / units, num_slots, num_classes) if units > 1 else None,
    )
    ledger.record(release.event, mask, release.description, tag, aggregate=True, row_event=release.row_event)
    return release


__all__ = ["release_hashed_counts"]
