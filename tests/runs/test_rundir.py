"""The run folder (runs/rundir.py): what RunDirectory writes and reads back (configuration, ledger,
releases, metrics, summary), its lock, a read-only folder refusing every write, damaged files named,
and training state discarded while every release is kept."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from labeldp.accounting import DPSGD_RELATION, NEIGHBORING_RELATION, PrivacyLedger, randomized_response_event
from labeldp.cli import main
from labeldp.errors import RunDirectoryError, RunLockedError
from labeldp.runs.rundir import RunDirectory


def _written(tmp_path) -> RunDirectory:
    """A run folder holding what a run writes: configuration, ledger, a release, metrics, a checkpoint,
    a private file, the summary and the elapsed time."""
    folder = RunDirectory(tmp_path / "run")
    folder.create()
    folder.write_config({"method": "lp-1st", "epsilon": 1.0})
    ledger = PrivacyLedger(4)
    ledger.record(randomized_response_event(1.0, 3), np.arange(4), "stage 1", "stage1")
    ledger.save(folder.ledger_path)
    folder.save_release("stage1", labels=np.array([2, 0, 1, 1]), indices=np.arange(4))
    folder.append_metrics({"stage": 1, "epoch": 1})
    torch.save({"history": [{"epoch": 1}]}, folder.checkpoint_path(1))
    folder.private_path("votes.npy").write_bytes(b"true labels, not yet released")
    folder.summary_path.write_text(json.dumps({"epsilon": 1.0}))
    folder.write_elapsed(12.5)
    return folder


def test_what_is_written_is_read_back(tmp_path) -> None:
    """Every file a run writes through RunDirectory reads back as it was written."""
    folder = _written(tmp_path)
    assert (folder.root / "noisy_labels").is_dir() and (folder.root / "checkpoints").is_dir()
    assert folder.read_config() == {"method": "lp-1st", "epsilon": 1.0}
    ledger = folder.read_ledger(4)
    assert [entry.tag for entry in ledger.entries] == ["stage1"] and ledger.epsilon() == pytest.approx(1.0, abs=1e-3)
    release = folder.load_release("stage1")
    assert set(release) == {"labels", "indices"} and release["labels"].tolist() == [2, 0, 1, 1]
    assert folder.read_metrics() == [{"stage": 1, "epoch": 1}]
    assert folder.read_summary() == {"epsilon": 1.0} and folder.elapsed() == 12.5
    assert folder.load_checkpoint(1) == {"history": [{"epoch": 1}]}


def test_what_is_not_written_reads_as_nothing(tmp_path) -> None:
    """A new folder has no configuration, release, metrics, summary or data facts and no time spent;
    its ledger is an empty one over the dataset, under the relation asked for (and needs the size)."""
    folder = RunDirectory(tmp_path / "new")
    assert folder.read_config() is None and folder.load_release("stage1") is None and folder.read_metrics() == []
    assert folder.read_summary() is None and folder.read_data_facts() is None and folder.elapsed() == 0.0
    assert folder.release_inputs() == {}
    empty = folder.read_ledger(10)
    assert empty.dataset_size == 10 and empty.entries == () and empty.neighboring_relation == NEIGHBORING_RELATION
    assert folder.read_ledger(10, DPSGD_RELATION).neighboring_relation == DPSGD_RELATION
    with pytest.raises(RunDirectoryError, match="ledger.json does not exist"):
        folder.read_ledger()
    assert not folder.root.exists()  # reading writes nothing


def test_each_release_says_what_it_depended_on(tmp_path) -> None:
    """release_inputs reads, for each saved release, the configuration saved with it (None for a release
    saved without one)."""
    folder = RunDirectory(tmp_path / "run")
    folder.create()
    folder.save_release("stage1", labels=np.zeros(2), config=np.array(json.dumps({"epsilon": 1.0})))
    folder.save_release("prior", counts=np.ones(3))
    assert folder.release_inputs() == {"prior": None, "stage1": {"epsilon": 1.0}}


def test_a_ledger_of_another_dataset_and_damaged_files_are_named(tmp_path) -> None:
    """A ledger over another number of examples, a ledger or configuration that is not JSON, a ledger
    that is not one, and a release that is not an archive are errors that name the file (never a
    fresh start, which would spend the budget again)."""
    folder = _written(tmp_path)
    with pytest.raises(RunDirectoryError, match="covers 4 examples, the dataset has 5"):
        folder.read_ledger(5)
    folder.ledger_path.write_text("{not json")
    with pytest.raises(RunDirectoryError, match=r"ledger.json is damaged .*restore it from a copy"):
        folder.read_ledger(4)
    folder.ledger_path.write_text("{}")
    with pytest.raises(RunDirectoryError, match="ledger.json is damaged \\(cannot read"):
        folder.read_ledger(4)
    folder.config_path.write_bytes(b"\xff\xfe")
    with pytest.raises(RunDirectoryError, match="config.json is damaged"):
        folder.read_config()
    folder.release_path("stage1").write_bytes(b"not an archive")
    with pytest.raises(RunDirectoryError, match="stage1.npz is damaged .*spend their budget twice"):
        folder.load_release("stage1")


def test_the_lock_keeps_a_second_process_out(tmp_path) -> None:
    """While one holder has the lock, another is refused; once it is let go, the run can be locked again.
    A file where the folder should be is named."""
    folder = RunDirectory(tmp_path / "run")
    with folder.lock():
        assert (tmp_path / "run").is_dir()
        with pytest.raises(RunLockedError, match="the run directory"), RunDirectory(tmp_path / "run").lock():
            pass
    with RunDirectory(tmp_path / "run").lock():
        pass
    (tmp_path / "file").write_text("")
    with pytest.raises(RunDirectoryError, match="a file is in the way"), RunDirectory(tmp_path / "file").lock():
        pass


def test_a_read_only_folder_refuses_every_write_and_reads_what_is_there(tmp_path) -> None:
    """Ranks other than 0 of a torchrun run read the folder rank 0 writes, and may write nothing in it:
    each writer is an error that leaves the folder as it was."""
    _written(tmp_path)
    before = {path: path.read_bytes() for path in (tmp_path / "run").rglob("*") if path.is_file()}
    folder = RunDirectory(tmp_path / "run", read_only=True)
    assert folder.read_config()["method"] == "lp-1st" and folder.load_release("stage1") is not None
    assert folder.read_ledger(4).entries and folder.read_metrics() and folder.elapsed() == 12.5
    for write in (
        lambda: folder.private_path("votes.npy"),
        folder.discard_training,
        lambda: folder.rewrite_metrics([]),
        lambda: folder.write_elapsed(1.0),
        lambda: folder.keep_metrics_of_checkpoints(1),
    ):
        with pytest.raises(RunDirectoryError, match="may not write"):
            write()
    assert {path: path.read_bytes() for path in (tmp_path / "run").rglob("*") if path.is_file()} == before


def test_private_files_are_the_owners_only_and_discarded(tmp_path) -> None:
    """``private/`` (true labels not yet released) is readable by its owner only, and discarded whole."""
    folder = _written(tmp_path)
    assert (folder.root / "private").stat().st_mode & 0o777 == 0o700
    folder.discard_private()
    assert not (folder.root / "private").exists() and folder.read_metrics()
    folder.discard_private()  # nothing left to discard is no error
    (folder.root / "private").mkdir(mode=0o755)  # made otherwise: a copy, an older version
    folder.private_path("votes.npy")
    assert (folder.root / "private").stat().st_mode & 0o777 == 0o700


def test_discarding_training_keeps_every_release_and_the_ledger(tmp_path) -> None:
    """discard_training forgets checkpoints, metrics and private files; the configuration, the ledger
    and the releases stay, so that training can start over without a second draw."""
    folder = _written(tmp_path)
    folder.discard_training()
    assert not (folder.root / "checkpoints").exists() and not folder.metrics_path.exists()
    assert not (folder.root / "private").exists()
    assert folder.read_config() is not None and folder.read_ledger(4).entries
    assert folder.load_release("stage1")["labels"].tolist() == [2, 0, 1, 1]


def test_metrics_are_kept_only_where_the_checkpoints_vouch_for_them(tmp_path) -> None:
    """After a crash the metrics may hold epochs the checkpoints do not: they are rewritten from the
    checkpoints' histories (stage by stage), unless the training steps are themselves releases
    (strict), where an epoch beyond its checkpoint is an error."""
    folder = RunDirectory(tmp_path / "run")
    folder.create()
    torch.save({"history": [{"epoch": 1}, {"epoch": 2}]}, folder.checkpoint_path(1))
    for stage, epoch in ((1, 1), (1, 2), (1, 3), (2, 1)):
        folder.append_metrics({"stage": stage, "epoch": epoch})
    with pytest.raises(RunDirectoryError, match="records more epochs of stage 1 than .*stage1.pt holds"):
        folder.keep_metrics_of_checkpoints(2, strict=True)
    assert len(folder.read_metrics()) == 4  # refused: nothing rewritten
    folder.keep_metrics_of_checkpoints(2)
    assert folder.read_metrics() == [{"stage": 1, "epoch": 1}, {"stage": 1, "epoch": 2}]
    folder.rewrite_metrics([{"stage": 1, "epoch": 1}])
    assert folder.read_metrics() == [{"stage": 1, "epoch": 1}]


def test_metrics_cut_short_by_a_crash_are_read_and_damaged_ones_refused(tmp_path) -> None:
    """A line cut short by a process killed while appending is left out; a damaged complete line is a
    RunDirectoryError naming the file, not a traceback."""
    from labeldp.errors import RunDirectoryError
    from labeldp.runs import RunDirectory

    folder = RunDirectory(tmp_path / "run")
    folder.root.mkdir()
    folder.metrics_path.write_text('{"epoch": 1}\n{"epo')
    assert folder.read_metrics() == [{"epoch": 1}]
    folder.metrics_path.write_text('{"epoch": 1}\nnot json\n')
    with pytest.raises(RunDirectoryError, match="metrics.jsonl is damaged"):
        folder.read_metrics()


def test_a_run_refuses_a_folder_of_unrelated_files(tmp_path, capsys) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    argv = ["train", "--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "not empty and holds no labeldp run (notes.txt)" in error and "new or empty folder" in error
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    assert main([*argv, "--out", str(tmp_path / "empty")]) == 0  # an empty folder, then the run's own: fine
    assert main([*argv, "--out", str(tmp_path / "empty")]) == 0
