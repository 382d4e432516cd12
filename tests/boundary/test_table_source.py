"""Reading a label column out of core (boundary/table_source.py, its batches read by
tables/table_batches.py): CSV labels are read as text whatever the first block holds, a refused label in
a later block names nothing, and colliding hashes of ids are checked exactly."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeldp.boundary import load_release, privatize_table
from labeldp.errors import DataError
from labeldp.randomness import NoiseSource
from labeldp.tables import keys as keys_module
from labeldp.tables import table_batches as batches_module

SEED = NoiseSource(insecure_seed=7)


# ----------------------------------------------------------------------------------------------------
# CSV labels are text: their type never depends on a label


def _write_csv(path: Path, labels: list[str]) -> None:
    path.write_text("id,y\n" + "".join(f"{i},{label}\n" for i, label in enumerate(labels)))


BIG = 200_000  # rows: more than pyarrow's first CSV block (1 MiB), from which it infers a column's type


def test_csv_labels_are_read_as_text_whatever_the_first_block_holds(tmp_path) -> None:
    """pyarrow infers a CSV column's type from the file's first block: which labels are in it (a
    refusal, a 1.0) must decide neither whether the release works nor the type it is written in."""
    labels = [str(i % 2) for i in range(BIG)]
    files = {
        "refused_first": ["refused"] + labels[1:],
        "refused_last": labels[:-1] + ["refused"],
        "float_first": ["1.0"] + labels[1:],
        "int_first": ["1"] + labels[1:],
    }
    for name, column in files.items():
        _write_csv(tmp_path / f"{name}.csv", column)
        sidecar = privatize_table(
            tmp_path / f"{name}.csv",
            tmp_path / name,
            label_column="y",
            id_column="id",
            classes=[0, 1, "refused"],
            epsilon=1.0,
            noise=SEED,
        )
        assert sidecar["label_type"] == "string" and sidecar["classes"] == ["0", "1", "refused"]
        assert pq.read_schema(tmp_path / name / "labels.parquet").field("released_label").type == pa.string()
    # 1.0 and 1 are one class: the same labels, the same noise, the same release
    assert np.array_equal(load_release(tmp_path / "float_first").labels, load_release(tmp_path / "int_first").labels)


def test_a_label_outside_the_classes_in_a_later_csv_block_names_nothing(tmp_path) -> None:
    labels = [str(i % 2) for i in range(BIG)]
    _write_csv(tmp_path / "late.csv", labels[:-1] + ["refused"])
    with pytest.raises(DataError, match="outside the declared classes") as error:
        privatize_table(
            tmp_path / "late.csv",
            tmp_path / "out",
            label_column="y",
            id_column="id",
            classes=[0, 1],
            epsilon=1.0,
            noise=SEED,
        )
    message = str(error.value)
    assert "refused" not in message and not re.search(r"\d{3,}", message)  # neither the value nor its row
    (tmp_path / "ragged.csv").write_text("id,y\n0,1\n1,refused,extra\n2,0\n")  # a malformed row quotes itself
    with pytest.raises(DataError) as error:
        privatize_table(
            tmp_path / "ragged.csv",
            tmp_path / "out",
            label_column="y",
            id_column="id",
            classes=[0, 1, "refused"],
            epsilon=1.0,
            noise=SEED,
        )
    assert "refused" not in str(error.value) and "extra" not in str(error.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["late.csv", "ragged.csv"]


def _length_hash(texts: np.ndarray) -> np.ndarray:
    """A deliberately poor hash of string ids: their length (every id of one length collides)."""
    return np.array([len(text) for text in texts], dtype=np.int64)


def test_hash_collisions_of_ids_are_checked_exactly(tmp_path, monkeypatch) -> None:
    """Ids that are not integers are compared by a 64-bit hash, then exactly where hashes collide: a
    collision alone never refuses a table."""
    monkeypatch.setattr(keys_module, "_hash_texts", _length_hash)  # many collisions
    monkeypatch.setattr(batches_module, "_READ_ROWS", 64)  # duplicates in different batches
    ids = [f"u{i}" for i in range(1000)]
    labels = np.arange(1000) % 2
    pq.write_table(pa.table({"id": ids, "y": labels}), tmp_path / "valid.parquet")
    privatize_table(
        tmp_path / "valid.parquet",
        tmp_path / "out",
        label_column="y",
        id_column="id",
        classes=[0, 1],
        epsilon=1.0,
        noise=SEED,
    )
    assert list(load_release(tmp_path / "out").ids) == ids
    ids[900] = "u77"
    pq.write_table(pa.table({"id": ids, "y": labels}), tmp_path / "twice.parquet")
    with pytest.raises(DataError, match="'u77'"):
        privatize_table(
            tmp_path / "twice.parquet",
            tmp_path / "out2",
            label_column="y",
            id_column="id",
            classes=[0, 1],
            epsilon=1.0,
            noise=SEED,
        )
    assert not (tmp_path / "out2").exists()
