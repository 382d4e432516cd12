"""Feature hashing (labeldp.data.hashing) and the synthetic ads tables: the hash is the stated one and
stable, a table streamed block by block (any block size, any ranks) hashes as it does in memory, and
the generator is deterministic."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeldp.data.hashing import (
    MISSING_KEY,
    HashSpec,
    Slot,
    bucket_sizes,
    hash_frame,
    hashed_blocks,
    mix64,
    row_groups,
    value_keys,
)
from labeldp.data.synthetic_ads import AdsSpec, ads_batches, true_logits, write_ads_table
from labeldp.errors import ConfigError

SPEC = HashSpec((Slot("a", 10), Slot("b", 8), Slot(("a", "b"), 12)))
SMALL = AdsSpec(advertisers=20, campaigns=60, sites=200, devices=4)


def test_the_hash_is_murmur3s_finaliser_and_its_buckets_do_not_change() -> None:
    """Golden values: a change of the hash would silently remap every trained model's buckets."""
    assert mix64(np.array([0, 1], dtype=np.uint64)).tolist() == [0, 0xB456BCFC34C2CB2C]  # fmix64(1)
    table = pa.table({"a": pa.array([1, 2, 3, None], pa.int64()), "b": pa.array(["x", "y", None, "x"])})
    assert hash_frame(table, SPEC).tolist() == [
        [658, 1108, 4207],
        [449, 1264, 1973],
        [917, 1262, 4491],
        [236, 1108, 3985],
    ]
    assert SPEC.num_buckets == 1024 + 256 + 4096 and SPEC.offsets.tolist() == [0, 1024, 1280]
    assert HashSpec.from_dict(SPEC.to_dict()) == SPEC
    assert hash_frame(table, HashSpec(SPEC.slots, seed=1)).tolist() != hash_frame(table, SPEC).tolist()


def test_value_keys_follow_the_value_not_its_container() -> None:
    ints = value_keys(pa.array([7, None], pa.int32()))
    assert ints.tolist() == value_keys(np.array([7, 0], dtype=np.int64))[:1].tolist() + [int(MISSING_KEY)]
    text = value_keys(pd.Series(["x", None, "y"]))
    assert text.tolist() == value_keys(pa.array(["x", None, "y"]).dictionary_encode()).tolist()
    assert text[1] == MISSING_KEY and value_keys(pa.array(["7"]))[0] != ints[0]  # types matter
    assert value_keys(pa.array([-0.0]))[0] == value_keys(pa.array([0.0]))[0]


def test_a_table_streamed_in_blocks_hashes_as_in_memory(tmp_path) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"a": rng.integers(0, 50, 1000), "b": rng.choice(["p", "q", "r", "s"], 1000)})
    folder = tmp_path / "table"
    folder.mkdir()
    pq.write_table(pa.Table.from_pandas(frame[:600], preserve_index=False), folder / "0.parquet", row_group_size=128)
    pq.write_table(pa.Table.from_pandas(frame[600:], preserve_index=False), folder / "1.parquet", row_group_size=100)
    pq.write_table(pa.table({"a": [1]}), folder / "_ignored.parquet")
    expected = hash_frame(frame, SPEC)
    for block_rows in (1, 97, 128, 5000):
        blocks = list(hashed_blocks(folder, SPEC, block_rows, columns=["b"]))
        assert all(block.rows == block_rows for block in blocks[:-1])
        assert np.array_equal(np.concatenate([block.positions for block in blocks]), np.arange(1000))
        assert np.array_equal(np.concatenate([block.buckets for block in blocks]), expected)
    shares = [list(hashed_blocks(folder, SPEC, 64, rank=rank, world=3)) for rank in range(3)]
    positions = [np.concatenate([block.positions for block in share]) for share in shares]
    assert np.array_equal(np.sort(np.concatenate(positions)), np.arange(1000))  # disjoint, complete
    for share, where in zip(shares, positions):
        assert np.array_equal(np.concatenate([block.buckets for block in share]), expected[where])
    assert [group.first_row for group in row_groups(folder)][:3] == [0, 128, 256]
    sizes = bucket_sizes(hashed_blocks(folder, SPEC, 300), SPEC.num_buckets)
    assert np.array_equal(sizes, np.bincount(expected.ravel(), minlength=SPEC.num_buckets))
    with pytest.raises(ConfigError):
        row_groups(folder, rank=3, world=3)


def test_the_generator_is_deterministic_and_streams_whole_tables(tmp_path) -> None:
    first = write_ads_table(tmp_path / "a.parquet", 5000, SMALL, row_group_rows=2048)
    second = write_ads_table(tmp_path / "b.parquet", 5000, SMALL, row_group_rows=2048)
    table = pq.read_table(first)
    assert table.equals(pq.read_table(second)) and pq.read_metadata(first).num_row_groups == 3
    assert table.column("row_id").to_pylist() == list(range(5000))
    test = pa.Table.from_batches(list(ads_batches(3000, SMALL, "test", 1024)))
    assert not set(test.column("user_id").to_pylist()) & set(table.column("user_id").to_pylist())
    frame = table.to_pandas()
    assert 3.5 < frame.groupby("user_id").size().mean() < 6.5  # about 5 rows per user
    assert frame.groupby("user_id").device.nunique().max() == 1  # a user keeps a device
    rate = frame.converted.mean()
    assert abs(rate - SMALL.base_rate) < 5 * np.sqrt(SMALL.base_rate / 5000)
    logits = true_logits(frame, SMALL)
    assert (
        frame.converted[logits > np.quantile(logits, 0.8)].mean()
        > 2 * frame.converted[logits < np.median(logits)].mean()
    )
