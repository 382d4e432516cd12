"""Noisy label counts over hashed features, streamed: the boundary reads the labels block by block.

A sibling of :mod:`labeldp.boundary.release`, whose functions take the labels whole:
:func:`release_hashed_counts` unseals each block's labels, adds them to the counts, and draws the noise
once after the last block, so a table of any size is released in one pass with the memory of one block
and one table of counts. Nothing is released or recorded if a block is refused.
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
    """The label counts of every bucket of every hashed slot, noised: epsilon-label-DP per privacy unit when the
    buckets come from public columns and every member comes in exactly one block (checked).

    ``blocks`` yields (positions, buckets, labels): the rows' indices into the ledger's dataset, their public
    (rows, num_slots) buckets (:func:`labeldp.data.hashing.hashed_blocks`) and their
    :class:`~labeldp.boundary.labels.PrivateLabels`; rows that are not members are skipped. Each label is
    counted in one bucket of each of the F = ``num_slots`` slots, and the (num_buckets, K) table gets discrete
    Laplace noise calibrated to its exact L1 sensitivity, F (two classes) or 2F, times c, the most members of
    one unit; :func:`~labeldp.accounting.events.hashed_counts_event` is recorded once, as an aggregate.

    ``arrays["counts"]`` holds the noisy counts (with two classes, column 0 is the bucket's size minus the
    noisy positives), ``arrays["sizes"]`` the public members per bucket. With ``gather``
    (:mod:`labeldp.boundary.release_parts`), each process counts its own blocks and the one that draws sums
    the parts, checks each member came once, draws and records; the others return None.
    Shared arguments and errors: see :mod:`labeldp.boundary.release`.
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
        times = sum(
            (np.unpackbits(bits, count=seen.size).astype(np.int64) for _, bits in parts),
            np.zeros(seen.size, dtype=np.int64),
        )
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
