"""Releasing a label column into a folder (boundary/release_folder.py, the folder's format read back
by tables/folder_format.py): the released labels follow the mechanisms' exact distributions,
streaming equals the in-memory release, a release is written once and atomically under a lock,
duplicated rows are refused before anything is drawn, nothing written depends on the labels except
through the mechanism, a privacy unit's rows are bounded by a public rule and released together at
epsilon (the same release on Dask and Spark: tests/boundary/test_engines.py, tests/spark/)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import (
    PrivateLabels,
    load_release,
    privatize,
    privatize_table,
    read_sidecar,
    release_rr_with_prior,
)
from labeldp.boundary import column as column_module
from labeldp.boundary import release_folder as folder_module
from labeldp.boundary import table_source as source_module
from labeldp.boundary.units import unit_codes
from labeldp.errors import ConfigError, DataError, MissingFileError, ReleaseExistsError, RunLockedError
from labeldp.mechanisms import randomized_response_probabilities, rr_with_prior_probabilities
from labeldp.randomness import NoiseSource
from labeldp.tables import table_batches as batches_module
from tests.helpers import frequencies_match

SEED = NoiseSource(insecure_seed=7)
PRIORS = np.array(
    [[0.25] * 4, [0.7, 0.1, 0.1, 0.1], [0.45, 0.45, 0.05, 0.05], [1.0, 0.0, 0.0, 0.0]], dtype=np.float32
).astype(np.float64)  # values exact in float32, as the table stores them
PRIOR_COLUMNS = [f"p{j}" for j in range(4)]


def make_table(labels, priors=None, ids=None) -> pa.Table:
    labels = np.asarray(labels)
    columns = {"id": np.arange(labels.size) * 10 + 3 if ids is None else ids, "y": labels}
    if priors is not None:
        columns.update({name: priors[:, j].astype(np.float32) for j, name in enumerate(PRIOR_COLUMNS)})
    return pa.table(columns)


def rr_fixture(draws: int = 1500, num_classes: int = 4) -> np.ndarray:
    """Each class ``draws`` times, draw-major: row d * K + y has true label y."""
    return np.tile(np.arange(num_classes), draws)


def test_streamed_rr_follows_its_exact_distribution_and_equals_the_in_memory_release(tmp_path) -> None:
    labels = rr_fixture()
    pq.write_table(make_table(labels), tmp_path / "t.parquet", row_group_size=1000)
    sidecar = privatize_table(
        tmp_path / "t.parquet",
        tmp_path / "out",
        label_column="y",
        id_column="id",
        classes=[0, 1, 2, 3],
        epsilon=1.0,
        batch_rows=1024,
        noise=SEED,
    )
    release = load_release(tmp_path / "out")
    assert sidecar["rows"] == labels.size and release.mechanism == "randomized-response"
    assert np.array_equal(release.ids, np.arange(labels.size) * 10 + 3)
    samples = release.labels.reshape(-1, 4)  # (draws, true label)
    assert frequencies_match(samples, randomized_response_probabilities(4, 1.0)).all()
    in_memory = privatize(labels, classes=[0, 1, 2, 3], epsilon=1.0, ids=release.ids, batch_rows=77, noise=SEED)
    assert np.array_equal(in_memory.labels, release.labels)  # one kernel: each label a function of key and id
    np.testing.assert_allclose(release.matrix(), sidecar["channel"]["matrix"])
    np.testing.assert_allclose(release.channel(), release.matrix()[:, release.labels].T)


def test_streamed_rr_with_prior_follows_its_exact_distribution(tmp_path) -> None:
    rows, labels = np.meshgrid(np.arange(len(PRIORS)), np.arange(4), indexing="ij")
    rows, labels = rows.ravel(), labels.ravel()  # every (prior, true label) pair
    draws = 1500
    table = make_table(np.tile(labels, draws), np.tile(PRIORS[rows], (draws, 1)))
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=5000)
    sidecar = privatize_table(
        tmp_path / "t.parquet",
        tmp_path / "out",
        label_column="y",
        id_column="id",
        classes=[0, 1, 2, 3],
        epsilon=1.0,
        prior_columns=PRIOR_COLUMNS,
        batch_rows=4096,
        noise=SEED,
        write_channel=True,
    )
    release = load_release(tmp_path / "out")
    expected = rr_with_prior_probabilities(PRIORS, 1.0)[rows, labels]
    assert frequencies_match(release.labels.reshape(draws, -1), expected).all()
    assert sidecar["k_range"] == [1, 4] and "per_row" in sidecar["channel"]
    in_memory = privatize(
        table.column("y").to_numpy(),
        classes=[0, 1, 2, 3],
        epsilon=1.0,
        priors=np.tile(PRIORS[rows], (draws, 1)),
        ids=release.ids,
        batch_rows=4096,
        noise=SEED,
    )
    assert np.array_equal(in_memory.labels, release.labels) and np.array_equal(in_memory.k, release.k)
    # the written channel columns are what the prior columns give back
    priors = np.stack([table.column(c).to_numpy() for c in PRIOR_COLUMNS], axis=1)
    np.testing.assert_allclose(release.channel(), in_memory.channel(priors, slice(None)))
    np.testing.assert_allclose(release.channel(rows=slice(5, 9)), in_memory.channel(priors[5:9], slice(5, 9)))
    with pytest.raises(ConfigError, match="other k"):
        in_memory.channel(priors[::-1])


def test_a_folder_of_parquet_and_csv_files_is_one_release_whatever_its_cut(tmp_path) -> None:
    labels = np.random.default_rng(0).integers(0, 3, 2500)
    table = pa.table({"id": [f"row{i}" for i in range(labels.size)], "y": labels})
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(table.slice(0, 700), folder / "part-0.parquet", row_group_size=300)
    table.slice(700, 1100).to_pandas().to_csv(folder / "part-1.csv", index=False)
    pq.write_table(table.slice(1800), folder / "part-2.parquet")
    (folder / "_SUCCESS").write_text("")  # not data, skipped as Spark and pyarrow do
    (folder / ".part-0.parquet.crc").write_text("")
    pq.write_table(table, tmp_path / "whole.parquet")
    for source, out in ((folder, "from_folder"), (tmp_path / "whole.parquet", "from_file")):
        privatize_table(
            source,
            tmp_path / out,
            label_column="y",
            id_column="id",
            classes=["0", "1", "2"],
            epsilon=2.0,
            batch_rows=512,
            noise=SEED,
        )
    from_folder, from_file = load_release(tmp_path / "from_folder"), load_release(tmp_path / "from_file")
    assert np.array_equal(from_folder.labels, from_file.labels)
    assert list(from_folder.ids) == [f"row{i}" for i in range(labels.size)]
    # a folder holding a CSV file releases its labels as text; Parquet files alone, in their declared type
    assert from_folder.classes == ("0", "1", "2") and read_sidecar(tmp_path / "from_folder")["label_type"] == "string"
    assert from_file.classes == (0, 1, 2) and read_sidecar(tmp_path / "from_file")["label_type"] == "int64"


def test_memory_is_bounded_by_blocks_of_batch_rows(tmp_path, monkeypatch) -> None:
    """Structural: the mechanism never sees more than batch_rows labels at once, files are read in
    batches of at most _READ_ROWS rows, and each block is written as its own row group."""
    labels = rr_fixture(800)  # 3200 rows
    pq.write_table(make_table(labels), tmp_path / "t.parquet", row_group_size=3200)
    seen: list[int] = []
    mechanism = column_module.keyed_randomized_response
    monkeypatch.setattr(
        column_module, "keyed_randomized_response", lambda true, *args: seen.append(true.size) or mechanism(true, *args)
    )
    read: list[int] = []
    batches = batches_module.read_batches
    monkeypatch.setattr(batches_module, "_READ_ROWS", 256)
    for module in (source_module, folder_module):
        monkeypatch.setattr(
            module, "read_batches", lambda *args: (read.append(b.num_rows) or b for b in batches(*args))
        )
    privatize_table(
        tmp_path / "t.parquet",
        tmp_path / "out",
        label_column="y",
        id_column="id",
        classes=range(4),
        epsilon=1.0,
        batch_rows=1000,
        noise=SEED,
    )
    assert seen == [1000, 1000, 1000, 200]
    assert max(read) <= 256 and sum(read) == 2 * labels.size  # the label check's pass, then the release's
    metadata = pq.ParquetFile(tmp_path / "out" / "labels.parquet").metadata
    assert [metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] == [1000, 1000, 1000, 200]


def test_a_release_is_never_overwritten(tmp_path) -> None:
    pq.write_table(make_table(rr_fixture(50)), tmp_path / "t.parquet")
    arguments = dict(label_column="y", id_column="id", classes=range(4), epsilon=1.0)
    privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    with pytest.raises(ReleaseExistsError, match="spend its privacy budget a second time"):
        privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReleaseExistsError):
        privatize_table(tmp_path / "t.parquet", tmp_path / "empty", **arguments)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.lock", "empty", "out", "t.parquet"]


def test_labels_outside_the_classes_are_refused_before_anything_is_written(tmp_path) -> None:
    folder = tmp_path / "parts"
    folder.mkdir()
    pq.write_table(make_table(rr_fixture(100)), folder / "a.parquet")
    pq.write_table(make_table(np.array([0, 1, 7, 2])), folder / "b.parquet")  # a 7 in the last file
    arguments = dict(label_column="y", id_column="id", epsilon=1.0, noise=SEED)
    with pytest.raises(DataError, match="outside the declared classes") as error:
        privatize_table(folder, tmp_path / "out", classes=range(4), **arguments)
    assert "7" not in str(error.value).replace("[0, 1, 2, 3]", "")  # which label, and how many: private
    assert sorted(p.name for p in tmp_path.iterdir()) == ["parts"]  # no release, no partial folder, no lock
    pq.write_table(pa.table({"id": [1, 2], "y": pa.array([1, None], pa.int64())}), tmp_path / "null.parquet")
    with pytest.raises(DataError, match="labels missing or outside the declared classes"):
        privatize_table(tmp_path / "null.parquet", tmp_path / "out", classes=range(4), **arguments)
    # a class the column's type cannot hold: released as text, whatever the labels (pandas types a column by them)
    privatize_table(folder / "a.parquet", tmp_path / "text", classes=["0", "1", "2", "3", "x"], **arguments)
    assert pq.read_schema(tmp_path / "text" / "labels.parquet").field("released_label").type == pa.string()
    with pytest.raises(ConfigError, match="distinct"):
        privatize(np.zeros(3), classes=["1", "1.0"], epsilon=1.0)
    with pytest.raises(DataError, match="outside the declared classes"):
        privatize(np.array(["a", "b", "c"]), classes=["a", "b"], epsilon=1.0)
    with pytest.raises(DataError, match="not found"):
        privatize_table(folder, tmp_path / "out", classes=range(4), label_column="label", id_column="id", epsilon=1.0)
    assert not (tmp_path / "out").exists()


def test_the_ledger_records_one_release_over_every_row(tmp_path) -> None:
    priors = np.random.default_rng(1).dirichlet(np.full(4, 0.5), size=600).astype(np.float32).astype(np.float64)
    priors /= priors.sum(axis=1, keepdims=True)
    labels = np.random.default_rng(2).integers(0, 4, 600)
    pq.write_table(make_table(labels, priors), tmp_path / "t.parquet")
    sidecar = privatize_table(
        tmp_path / "t.parquet",
        tmp_path / "out",
        label_column="y",
        id_column="id",
        classes=range(4),
        epsilon=0.7,
        prior_columns=PRIOR_COLUMNS,
        batch_rows=128,
    )
    ledger = PrivacyLedger.load(tmp_path / "out" / "ledger.json")
    assert ledger.dataset_size == 600 and len(ledger.entries) == 1 and ledger.entries[0].members.all()
    reference = PrivacyLedger(600)  # release.py's accounting of the same priors, in one call
    release_rr_with_prior(
        reference, PrivateLabels.from_indices(labels, 4), np.arange(600), priors.astype(np.float32), 0.7, rng=0
    )
    assert ledger.entries[0].event == reference.entries[0].event
    assert ledger.epsilon() == pytest.approx(reference.epsilon()) and ledger.epsilon() <= 0.7 + 1e-3
    assert (
        sidecar["ledger"]["epsilon"] == ledger.epsilon()
        and load_release(tmp_path / "out").ledger.epsilon() == ledger.epsilon()
    )
    rr = privatize(labels, classes=range(4), epsilon=0.7)
    assert rr.ledger.epsilon() == pytest.approx(0.7, abs=1e-3) and rr.private


def test_nothing_written_depends_on_the_labels_but_the_released_column(tmp_path) -> None:
    """Two label columns released with the same noise: the sidecars and ledgers are identical."""
    rng = np.random.default_rng(3)
    priors = np.tile(PRIORS, (50, 1))
    for name, labels in (("a", rng.integers(0, 4, 200)), ("b", np.zeros(200, dtype=int))):
        pq.write_table(make_table(labels, priors), tmp_path / f"{name}.parquet")
        privatize_table(
            tmp_path / f"{name}.parquet",
            tmp_path / f"out_{name}",
            label_column="y",
            id_column="id",
            classes=range(4),
            epsilon=1.0,
            prior_columns=PRIOR_COLUMNS,
            noise=SEED,
        )
    sidecars = [json.loads((tmp_path / f"out_{name}" / "release.json").read_text()) for name in "ab"]
    for sidecar in sidecars:
        sidecar["source"].pop("table")
    assert sidecars[0] == sidecars[1]
    assert (tmp_path / "out_a" / "ledger.json").read_text() == (tmp_path / "out_b" / "ledger.json").read_text()
    written = pq.read_table(tmp_path / "out_a" / "labels.parquet")
    assert written.column_names == ["id", "released_label", "k"]
    assert sidecars[0]["warning"].startswith("NOT PRIVATE") and not sidecars[0]["noise"]["private"]


def test_an_interrupted_release_leaves_nothing_that_reads_as_one(tmp_path, monkeypatch) -> None:
    pq.write_table(make_table(rr_fixture(500)), tmp_path / "t.parquet")
    arguments = dict(label_column="y", id_column="id", classes=range(4), epsilon=1.0, batch_rows=500)
    mechanism = column_module.keyed_randomized_response
    calls = []

    def fail_on_the_third_block(*args):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return mechanism(*args)

    monkeypatch.setattr(column_module, "keyed_randomized_response", fail_on_the_third_block)
    with pytest.raises(KeyboardInterrupt):
        privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.lock", "t.parquet"]  # the drawn blocks are gone
    monkeypatch.undo()
    privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
    assert load_release(tmp_path / "out").labels.size == 2000


def test_a_killed_release_is_not_a_release_and_the_next_run_does_not_draw_again(tmp_path) -> None:
    """A process killed outright (SIGKILL) mid-stream leaves only its hidden partial folder: no
    sidecar, a Parquet file without its footer. The next release into the same folder refuses to draw
    again until the user deletes it (its labels were drawn)."""
    pq.write_table(make_table(rr_fixture(500)), tmp_path / "t.parquet")
    script = textwrap.dedent(f"""
        import os, signal
        from labeldp.boundary import column as p
        from labeldp.boundary import privatize_table
        mechanism, calls = p.keyed_randomized_response, []
        def draw(*args):
            calls.append(1)
            if len(calls) == 3:
                os.kill(os.getpid(), signal.SIGKILL)
            return mechanism(*args)
        p.keyed_randomized_response = draw
        privatize_table({str(tmp_path / "t.parquet")!r}, {str(tmp_path / "out")!r}, label_column="y",
                          id_column="id", classes=range(4), epsilon=1.0, batch_rows=500)
    """)
    result = subprocess.run([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert result.returncode == -9
    partial = tmp_path / ".out.partial"
    assert not (tmp_path / "out").exists() and sorted(p.name for p in partial.iterdir()) == ["labels.parquet"]
    assert partial.stat().st_mode & 0o077 == 0  # its owner's only
    with pytest.raises(pa.ArrowInvalid):
        pq.read_table(partial / "labels.parquet")
    with pytest.raises(MissingFileError, match="did not finish"):
        load_release(tmp_path / "out")
    arguments = dict(label_column="y", id_column="id", classes=range(4), epsilon=1.0)
    with pytest.raises(ReleaseExistsError, match="killed before it finished"):
        privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
    assert sorted(p.name for p in partial.iterdir()) == ["labels.parquet"] and not (tmp_path / "out").exists()
    shutil.rmtree(partial)
    privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
    assert load_release(tmp_path / "out").labels.size == 2000


def test_a_second_process_cannot_write_the_same_release(tmp_path) -> None:
    pq.write_table(make_table(rr_fixture(10)), tmp_path / "t.parquet")
    with open(tmp_path / ".out.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        with pytest.raises(RunLockedError, match="another process"):
            privatize_table(
                tmp_path / "t.parquet",
                tmp_path / "out",
                label_column="y",
                id_column="id",
                classes=range(4),
                epsilon=1.0,
            )
    assert not (tmp_path / "out").exists()


# ----------------------------------------------------------------------------------------------------
# The lock


def test_the_lock_keeps_a_second_release_out_even_after_a_failed_one(tmp_path, monkeypatch) -> None:
    """The lock file is never unlinked: a process that opened it before a failed release and locks it
    afterwards still keeps every other release into the same folder out."""
    pq.write_table(make_table(rr_fixture(10)), tmp_path / "t.parquet")
    arguments = dict(label_column="y", id_column="id", classes=range(4), epsilon=1.0)
    with open(tmp_path / ".out.lock", "a") as handle:  # process A opens the lock file
        monkeypatch.setattr(column_module, "keyed_randomized_response", lambda *args: 1 / 0)
        with pytest.raises(ZeroDivisionError):  # a release into out takes the lock, fails, lets it go
            privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
        monkeypatch.undo()
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)  # A holds the lock
        with pytest.raises(RunLockedError, match="another process"):
            privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
    assert not (tmp_path / "out").exists()
    privatize_table(tmp_path / "t.parquet", tmp_path / "out", **arguments)
    assert (tmp_path / ".out.lock").exists()  # stays beside the release, empty and harmless


# ----------------------------------------------------------------------------------------------------
# Each row once: duplicated ids are refused before anything is drawn


def _no_draws(monkeypatch) -> None:
    def draw(*args):
        raise AssertionError("a label was drawn")

    monkeypatch.setattr(column_module, "keyed_randomized_response", draw)
    monkeypatch.setattr(column_module, "keyed_rr_with_prior", draw)


def _stray_copy_folder(tmp_path: Path, ids) -> Path:
    """A folder holding events.parquet and its CSV conversion: every row twice."""
    labels = np.where(np.arange(len(ids)) % 3 == 0, "lion", "tiger")
    folder = tmp_path / "events"
    folder.mkdir()
    table = pa.table({"id": ids, "y": labels})
    pq.write_table(table, folder / "events.parquet")
    table.to_pandas().to_csv(folder / "events.csv", index=False)
    return folder


@pytest.mark.parametrize("ids", [np.arange(300) * 7, [f"user{i}" for i in range(300)]], ids=["integer", "string"])
def test_a_folder_holding_a_file_twice_is_refused_before_anything_is_drawn(tmp_path, monkeypatch, ids) -> None:
    folder = _stray_copy_folder(tmp_path, ids)
    _no_draws(monkeypatch)
    with pytest.raises(DataError, match="duplicated values") as error:
        privatize_table(
            folder,
            tmp_path / "out",
            label_column="y",
            id_column="id",
            classes=["lion", "tiger"],
            epsilon=1.0,
            noise=SEED,
        )
    message = str(error.value)
    assert "copy" in message and "second format" in message
    assert any(
        repr(identifier.item() if isinstance(identifier, np.generic) else identifier) in message for identifier in ids
    )  # one duplicated id, public
    assert "lion" not in message and "tiger" not in message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["events"]  # nothing written, no lock taken


def test_prior_rows_are_checked_before_anything_is_drawn(tmp_path, monkeypatch) -> None:
    """A table's prior columns are public: a missing value or a row that is not a distribution is
    refused in the first pass over the table, before the first block is drawn."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from labeldp.boundary import column, privatize_table
    from labeldp.errors import ConfigError, DataError

    drawn = []
    monkeypatch.setattr(column.Draws, "draw", lambda self, *args: drawn.append(1))
    labels = np.arange(300) % 2
    priors = np.full((300, 2), 0.5)
    for damaged, error in ((np.where(np.arange(300)[:, None] == 299, 0.9, priors), ConfigError), (None, DataError)):
        p0 = pa.array(
            priors[:, 0] if damaged is None else damaged[:, 0], mask=np.arange(300) == 299 if damaged is None else None
        )
        table = pa.table({"id": np.arange(300), "y": labels, "p0": p0, "p1": priors[:, 1]})
        pq.write_table(table, tmp_path / "t.parquet")
        with pytest.raises(error):
            privatize_table(
                tmp_path / "t.parquet",
                tmp_path / "out",
                label_column="y",
                id_column="id",
                classes=[0, 1],
                epsilon=1.0,
                prior_columns=["p0", "p1"],
                batch_rows=100,
            )
    assert drawn == [] and not (tmp_path / "out").exists()


def _users_table(labels, users, ids=None) -> pa.Table:
    return pa.table({"id": np.arange(len(labels)) * 10 + 3 if ids is None else ids, "user": users, "y": labels})


def test_a_units_labels_are_released_together_at_epsilon_streamed_as_in_memory(tmp_path) -> None:
    """Users of 5, 2 and 1 rows, at most 3 rows each: 6 rows kept, each released by RR at epsilon / 3
    (checked against the exact distribution), the same rows and draws as privatize in memory; a unit's
    three labels changed together move any release's probability by at most e^epsilon (exact)."""
    draws = 1500
    users = np.tile(np.repeat(np.arange(3), [5, 2, 1]), draws) + np.repeat(np.arange(draws) * 3, 8)
    labels = np.tile(np.repeat(np.arange(3), [5, 2, 1]), draws)  # each user's labels alike: [0, 0, 0, 1, 1, 2] kept
    pq.write_table(_users_table(labels, users), tmp_path / "t.parquet", row_group_size=1000)
    arguments = dict(classes=[0, 1, 2], epsilon=1.5, batch_rows=1024, noise=SEED)
    sidecar = privatize_table(
        tmp_path / "t.parquet",
        tmp_path / "out",
        label_column="y",
        id_column="id",
        unit_column="user",
        max_rows_per_unit=3,
        seed=5,
        **arguments,
    )
    release = load_release(tmp_path / "out")
    ids = np.arange(len(labels)) * 10 + 3
    in_memory = privatize(labels, units=users, max_rows_per_unit=3, seed=5, ids=ids, **arguments)
    assert np.array_equal(release.ids, in_memory.ids) and np.array_equal(release.labels, in_memory.labels)
    assert release.labels.size == 6 * draws and np.bincount(users[(in_memory.ids - 3) // 10]).max() == 3
    assert sidecar["epsilon"] == pytest.approx(0.5) and sidecar["rows"] == 6 * draws
    assert sidecar["privacy_unit"] == {
        "column": "user",
        "max_rows": 3,
        "seed": 5,
        "units": 3 * draws,
        "rows_read": 8 * draws,
        "rows_kept": 6 * draws,
        "most_rows": 3,
        "epsilon": 1.5,
        "row_epsilon": pytest.approx(0.5),
    }
    ledger = PrivacyLedger.load(tmp_path / "out" / "ledger.json")
    assert ledger.units is not None and ledger.num_units == 3 * draws
    assert ledger.epsilon() == pytest.approx(1.5, abs=3e-3) and ledger.row_epsilon() == pytest.approx(0.5, abs=1e-3)
    assert sidecar["ledger"]["epsilon"] == ledger.epsilon()
    # the mechanism is RR at epsilon / 3 on every kept row
    expected = randomized_response_probabilities(3, 0.5)[[0, 0, 0, 1, 1, 2]]
    assert frequencies_match(release.labels.reshape(draws, 6), expected).all()
    # exact: the unit's three labels, changed together, move any output by at most e^1.5 (attained)
    channel = np.asarray(sidecar["channel"]["matrix"])
    outputs = np.array(np.meshgrid(*[np.arange(3)] * 3, indexing="ij")).reshape(3, -1).T
    truths = outputs  # every labelling of the unit's three rows
    probability = np.array([[np.prod(channel[t, o]) for o in outputs] for t in truths])
    worst = (probability[:, None, :] / probability[None, :, :]).max()
    assert worst == pytest.approx(np.exp(1.5)) and worst <= np.exp(1.5) * (1 + 1e-12)


def test_the_rows_a_unit_keeps_never_depend_on_a_label(tmp_path) -> None:
    """Two label columns of the same users: the same rows are released (positions without an id column),
    the sidecars and ledgers are identical; a duplicated id is still refused, before anything is drawn."""
    users = np.repeat([f"u{i}" for i in range(40)], np.arange(40) % 7 + 1)
    rng = np.random.default_rng(4)
    for name, labels in (("a", rng.integers(0, 2, users.size)), ("b", np.ones(users.size, dtype=int))):
        pq.write_table(pa.table({"user": users, "y": labels}), tmp_path / f"{name}.parquet")
        privatize_table(
            tmp_path / f"{name}.parquet",
            tmp_path / f"out_{name}",
            label_column="y",
            classes=[0, 1],
            epsilon=1.0,
            unit_column="user",
            max_rows_per_unit=2,
            noise=SEED,
            batch_rows=16,
        )
    written = [pq.read_table(tmp_path / f"out_{name}" / "labels.parquet") for name in "ab"]
    assert written[0].column_names == ["row", "released_label"]
    assert written[0].column("row").equals(written[1].column("row"))
    rows = written[0].column("row").to_numpy()
    assert np.bincount(unit_codes(users[rows])).max() == 2 and rows.size == sum(min(2, k % 7 + 1) for k in range(40))
    sidecars = [read_sidecar(tmp_path / f"out_{name}") for name in "ab"]
    for sidecar in sidecars:
        sidecar["source"].pop("table")
    assert sidecars[0] == sidecars[1]
    assert (tmp_path / "out_a" / "ledger.json").read_text() == (tmp_path / "out_b" / "ledger.json").read_text()
    duplicated = _users_table(np.zeros(6, int), ["a", "a", "b", "b", "c", "c"], ids=[1, 2, 3, 3, 4, 5])
    with pytest.raises(DataError, match="duplicated values"):
        privatize_table(
            duplicated,
            tmp_path / "dup",
            label_column="y",
            id_column="id",
            classes=[0, 1],
            epsilon=1.0,
            unit_column="user",
            max_rows_per_unit=1,
        )
    assert not (tmp_path / "dup").exists()


def test_a_privacy_unit_is_refused_before_anything_is_read_without_its_bound(tmp_path, monkeypatch) -> None:
    _no_draws(monkeypatch)
    table = _users_table(np.zeros(4, int), pa.array(["a", None, "b", "b"]))
    arguments = dict(label_column="y", classes=[0, 1], epsilon=1.0)
    for units, error, match in (
        (dict(unit_column="user"), ConfigError, "max_rows_per_unit"),
        (dict(max_rows_per_unit=2), ConfigError, "unit_column"),
        (dict(unit_column="user", max_rows_per_unit=0), ConfigError, "at least 1"),
        (dict(unit_column="y", max_rows_per_unit=2), ConfigError, "distinct"),
        (dict(unit_column="user", max_rows_per_unit=2), DataError, "every row needs its unit"),
    ):
        with pytest.raises(error, match=match):
            privatize_table(table, tmp_path / "out", **arguments, **units)
    assert not (tmp_path / "out").exists()
