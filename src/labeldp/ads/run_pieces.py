"""The ads route's pieces below its run folder: a hashed Parquet table and its public facts, the two
releases drawn on it, and the calibrated training of a hashed model on a release (labels through their
channel, or noisy counts). Everything after a release reads public columns and released quantities only:
post-processing.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import torch
from scipy.special import logit

from labeldp import distributed
from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release, release_hashed_counts
from labeldp.boundary.units import bound_contributions, unit_codes
from labeldp.config.hashed_config import CALIBRATION_ROWS, DEFAULT_SLOT_BITS, HashedConfig
from labeldp.data.hashed_table import PositionTargets, labelled_blocks, read_column, released_blocks
from labeldp.data.hashing import HashedBlock, HashSpec, Slot, bucket_sizes, hashed_blocks, parquet_files, table_rows
from labeldp.errors import ConfigError, DataError
from labeldp.models.sparse import HashedFM, HashedLogistic
from labeldp.randomness import RandomSource
from labeldp.tables.table_files import check_each_row_once
from labeldp.training.from_counts import RATE_FLOOR, CountStatistics, count_target_blocks, log_odds_model
from labeldp.training.out_of_core import SparseTrainConfig, calibrate_intercept, counts_loss, forward_loss, train_sparse


def hash_spec(
    columns: Sequence[str],
    crosses: Sequence[Sequence[str]] = (),
    bits: int = DEFAULT_SLOT_BITS,
    slot_bits: Mapping[str, int] | None = None,
    seed: int = 0,
) -> HashSpec:
    """The slots of an ads table: each categorical column, then each declared cross (two or more columns).

    A slot has ``2 ** bits`` buckets unless ``slot_bits`` names it: a column, or a cross's columns joined by
    ``":"`` (``"advertiser:site"``) or ``"x"``. ``seed`` is the hash's public seed.
    """
    groups = [(column,) for column in columns] + [tuple(cross) for cross in crosses]
    if any(len(cross) < 2 for cross in crosses):
        raise ConfigError(f"a cross is two or more columns, got {[list(c) for c in crosses if len(c) < 2]}")
    named = {key.replace(":", "x"): value for key, value in (slot_bits or {}).items()}
    slots = tuple(Slot(group, int(named.pop("x".join(group), bits))) for group in groups)
    if named:
        raise ConfigError(f"--slot-bits names slots that are not hashed: {sorted(named)}")
    return HashSpec(slots, seed)


@dataclasses.dataclass
class HashedTable:
    """A Parquet table hashed by ``spec``, read ``block_rows`` rows at a time, and its public facts.

    Parameters
    ----------
    source : str or os.PathLike
        A Parquet file or folder.
    spec : HashSpec
        The slots.
    block_rows : int
        Rows per block.
    data_parallel : bool, optional
        Under ``torchrun``, join the process group (gloo, on the CPU): this rank then reads its own row
        groups only (``rank`` of ``world``), and the buckets' sizes and the sample join every rank's.
    """

    source: Path
    spec: HashSpec
    block_rows: int
    data_parallel: bool = False

    def __post_init__(self) -> None:
        self.source = Path(self.source)
        self.rows = table_rows(self.source)
        if self.rows == 0:
            raise DataError(f"{self.source}: the table has no rows")
        shared = self.data_parallel and distributed.start(torch.device("cpu"))
        self.rank, self.world = (distributed.rank(), distributed.world_size()) if shared else (0, 1)

    def check_columns(self, *columns: str | None) -> None:
        """Refuse, before anything is drawn, a table without the spec's columns and ``columns``, naming them."""
        present = set(pq.read_schema(parquet_files(self.source)[0]).names)
        missing = [name for name in (*self.spec.columns, *columns) if name is not None and name not in present]
        if missing:
            raise DataError(f"{self.source} lacks the columns {missing}")

    def blocks(self, columns: Sequence[str] = ()) -> Iterator[HashedBlock]:
        """This rank's hashed blocks in table order, with ``columns`` handed over beside each."""
        return hashed_blocks(self.source, self.spec, self.block_rows, columns, self.rank, self.world)

    @functools.cached_property
    def sizes(self) -> np.ndarray:
        """Each bucket's rows (public: counted from the hashed features alone), summed over the ranks."""
        sizes = bucket_sizes(self.blocks(), self.spec.num_buckets)
        return sizes if self.world == 1 else distributed.all_reduce_sum(torch.from_numpy(sizes)).numpy()

    def sample(self, members: np.ndarray | None = None, rows: int = CALIBRATION_ROWS) -> list[np.ndarray]:
        """The buckets of at least ``rows`` of ``members`` (all rows by default), in whole blocks: public rows to fit
        or calibrate on, every rank's share gathered on every rank.
        """
        found, taken = [], 0
        for block in self.blocks():
            buckets = block.buckets if members is None else block.buckets[members[block.positions]]
            found.append(buckets)
            taken += len(buckets)
            if taken >= -(-rows // self.world):
                break
        if self.world == 1:
            return found
        return distributed.gather_everywhere(np.concatenate([np.zeros((0, self.spec.num_slots), np.int64), *found]))


def unit_members(table: HashedTable, config: HashedConfig) -> tuple[PrivacyLedger, np.ndarray]:
    """An empty ledger over the table's rows (per privacy unit where ``config`` names a unit column) and the
    sorted rows a release reads (at most ``config.max_rows_per_unit`` a unit, chosen by the public seed).
    """
    if config.route in ("counts", "rr"):  # labeldp draws: a row held twice would be released twice
        files = parquet_files(table.source)
        check_each_row_once(len(files), str(table.source), None, config.unit_column, config.one_row_per_person)
    if config.unit_column is None:
        return PrivacyLedger(table.rows), np.arange(table.rows)
    units = unit_codes(read_column(table.source, config.unit_column))
    ledger = PrivacyLedger(table.rows, units=units)
    if config.max_rows_per_unit is None:
        return ledger, np.arange(table.rows)
    return ledger, bound_contributions(units, config.max_rows_per_unit, config.seed)


def release_counts(
    table: HashedTable,
    label_column: str,
    classes: Sequence,
    ledger: PrivacyLedger,
    members,
    epsilon: float,
    rng: RandomSource,
    tag=None,
) -> Release | None:
    """Noisy label counts of every bucket, streamed (:func:`~labeldp.boundary.release_hashed_counts`): each rank
    counts its own row groups and rank 0 alone sums, draws and records (the others get None).
    """
    blocks = labelled_blocks(table.source, table.spec, label_column, classes, table.block_rows, table.rank, table.world)
    spec, gather = table.spec, distributed.gather_to_main if table.world > 1 else None
    return release_hashed_counts(
        ledger, blocks, members, spec.num_buckets, spec.num_slots, 2, epsilon, rng, tag, gather
    )


def channel_matrix(labels: np.ndarray, likelihood: np.ndarray) -> np.ndarray:
    """The (2, 2) channel M[y, z] = Pr[released z | y] that released labels share (RR, a source's flips), read
    off their likelihood rows; a column no label shows is the other's complement.
    """
    matrix = np.full((2, 2), np.nan)
    for value in (0, 1):
        rows = np.flatnonzero(labels == value)
        if rows.size:
            matrix[:, value] = likelihood[rows[0]]
    for value in (0, 1):
        if np.isnan(matrix[0, value]):
            matrix[:, value] = 1 - matrix[:, 1 - value]
    return matrix


def channel_rate(labels: np.ndarray, matrix: np.ndarray) -> float:
    """The positive rate estimated, unbiased, from released labels: the released positive share q = r M[1, 1] +
    (1 - r) M[0, 1] solved for r, clipped to [RATE_FLOOR, 1 - RATE_FLOOR].
    """
    gap = max(matrix[1, 1] - matrix[0, 1], 1e-6)
    return float(np.clip((np.mean(labels == 1) - matrix[0, 1]) / gap, RATE_FLOOR, 1 - RATE_FLOOR))


def new_model(kind: str, num_buckets: int, config: HashedConfig) -> HashedLogistic:
    """A hashed model (``"lr"`` or ``"fm"``), its factors drawn from the public seed, torch's global generator
    left as it was.
    """
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        return HashedLogistic(num_buckets) if kind == "lr" else HashedFM(num_buckets, config.dim)


def train_on_channel(
    table: HashedTable, kind: str, release: Release, config: HashedConfig
) -> tuple[torch.nn.Module, list[dict], float]:
    """A model trained with the forward loss on released labels, returned with its history and the rate
    estimated from the release.

    The penalty grows by 1 / (M[1, 1] - M[0, 1])^2 (the share of a label's information that survives the
    channel: (2p - 1)^2 under RR keeping it with probability p), and the intercept is shifted so the mean
    prediction over the first released rows is :func:`channel_rate`'s. Both are functions of the release.
    """
    labels, likelihood = release.labels, release.likelihood
    assert labels is not None and likelihood is not None, "a release of labels through a channel"
    matrix = channel_matrix(labels, likelihood)
    rate = channel_rate(labels, matrix)
    targets = PositionTargets.from_channel(table.rows, release.members, likelihood)
    model = new_model(kind, table.spec.num_buckets, config)
    with torch.no_grad():
        model.bias.fill_(float(logit(rate)))
    settings = config.training(kind)
    settings["l2"] /= max(matrix[1, 1] - matrix[0, 1], 1e-3) ** 2
    blocks = released_blocks(table.source, table.spec, targets, table.block_rows, table.rank, table.world)
    history = train_sparse(
        model, blocks, forward_loss, SparseTrainConfig(**settings), table.sizes, data_parallel=table.world > 1
    )
    calibrate_intercept(model, table.sample(targets.released), rate)
    return model, history, rate


def fit_counts(
    table: HashedTable,
    statistics: CountStatistics,
    members: np.ndarray | None,
    config: HashedConfig,
    sizes: np.ndarray | None = None,
    after_log_odds: Callable[[torch.nn.Module], None] | None = None,
) -> tuple[torch.nn.Module, list[dict]]:
    """The logistic regression from noisy counts: the log-odds model, trained further out of core on the counts'
    likelihood, its intercept calibrated to their base rate.

    ``members`` marks the rows counted (None: all); ``sizes`` the buckets' sizes for the penalty (default the
    counts'); ``after_log_odds`` is called with the log-odds model before further training (a benchmark
    scores it).
    """
    sample = table.sample(members)
    model = log_odds_model(statistics, sample)
    if after_log_odds is not None:
        after_log_odds(model)
    blocks = count_target_blocks(
        table.source, table.spec, statistics, members, table.block_rows, table.rank, table.world
    )
    settings = SparseTrainConfig(**config.training("counts"))
    sizes = statistics.sizes if sizes is None else sizes
    history = train_sparse(model, blocks, counts_loss, settings, sizes, data_parallel=table.world > 1)
    calibrate_intercept(model, sample, statistics.rate)
    return model, history


__all__ = [
    "HashedTable",
    "channel_matrix",
    "channel_rate",
    "fit_counts",
    "hash_spec",
    "new_model",
    "release_counts",
    "train_on_channel",
    "unit_members",
]
