"""The run directory: everything a run needs to be repeated, resumed and audited.

Layout: ``config.json``, ``ledger.json``, ``noisy_labels/{stage{t},prior,pate}.npz`` (every release
of private information: noisy labels per stage, the noisy cluster histogram, PATE's answers, each
with the configuration it depended on), ``checkpoints/stage{t}.pt``, ``metrics.jsonl`` (one row per
epoch), ``summary.json`` and ``model.pt``. Each of these depends on the private labels only through
the recorded releases. ``private/`` is the exception: it holds intermediate results computed from
true labels without noise while a run is unfinished (PATE's teacher votes until its answers are
released) and is deleted as soon as they are no longer needed. Files are replaced atomically, so a
crash at any moment leaves a directory that a resumed run can continue from.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from labeldp.accounting import NEIGHBORING_RELATION, PrivacyLedger
from labeldp.accounting.datasets import RELEASE_FILE
from labeldp.errors import RunDirectoryError
from labeldp.files import exclusive_lock, write_atomic, write_json_atomic, write_text_atomic
from labeldp.training.checkpoint import load_torch

#: what a run folder may hold before its ``config.json`` is written: the lock, the folders a run creates
#: first, a sweep's record of a failed run, a tune's and an audit's own files
RUN_FOLDER_NAMES = frozenset(
    {
        ".lock",
        "noisy_labels",
        "checkpoints",
        "error.txt",
        "tune.json",
        "tune.csv",
        "candidates",
        "audit",
        "auto_tune.json",
        RELEASE_FILE,
    }
)


class RunDirectory:
    """Paths and readers/writers for one run's folder. ``read_only`` (the ranks other than 0 of a
    ``torchrun`` run, which never write) turns every writer into an error.

    Parameters
    ----------
    root : str or pathlib.Path
        The run folder (it need not exist yet).
    read_only : bool, optional
        Refuse every writer with :class:`~labeldp.errors.RunDirectoryError` (default False).

    Attributes
    ----------
    root : pathlib.Path
        The run folder.
    read_only : bool
        Whether the writers are refused.
    config_path, ledger_path, metrics_path, summary_path, model_path : pathlib.Path
        ``config.json``, ``ledger.json``, ``metrics.jsonl``, ``summary.json`` and ``model.pt`` in ``root``.
    elapsed_path, data_path, preprocessor_path : pathlib.Path
        ``elapsed.json`` (the seconds spent so far), ``data.json`` (the dataset's public facts) and
        ``preprocessor.joblib`` (a table's fitted preprocessing) in ``root``.
    """

    def __init__(self, root: str | Path, read_only: bool = False):
        self.root = Path(root)
        self.read_only = read_only

    def _writing(self) -> None:
        if self.read_only:
            raise RunDirectoryError(f"this process may not write to {self.root}: only rank 0 of a torchrun run writes")

    config_path = property(lambda self: self.root / "config.json")
    ledger_path = property(lambda self: self.root / "ledger.json")
    metrics_path = property(lambda self: self.root / "metrics.jsonl")
    summary_path = property(lambda self: self.root / "summary.json")
    model_path = property(lambda self: self.root / "model.pt")
    elapsed_path = property(lambda self: self.root / "elapsed.json")
    data_path = property(lambda self: self.root / "data.json")
    preprocessor_path = property(lambda self: self.root / "preprocessor.joblib")

    def create(self) -> None:
        """Create the folder with its ``noisy_labels/`` and ``checkpoints/`` (kept if they exist).

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        (self.root / "noisy_labels").mkdir(parents=True, exist_ok=True)
        (self.root / "checkpoints").mkdir(exist_ok=True)

    def refuse_foreign_files(self) -> None:
        """Refuse a folder that holds files but no labeldp run (no ``config.json``): a run would mix its
        files in with them.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder holds anything but what a run writes before its ``config.json``.
        """
        if not self.root.is_dir() or self.config_path.exists():
            return
        foreign = sorted(path.name for path in self.root.iterdir() if path.name not in RUN_FOLDER_NAMES)
        if foreign:
            shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
            raise RunDirectoryError(
                f"{self.root} is not empty and holds no labeldp run ({shown}): a run would mix its files in "
                "with them. Choose a new or empty folder for --out"
            )

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold an exclusive lock on the run for the duration (two processes on one run could
        otherwise both draw noisy labels: a double spend), and refuse a folder of other files
        (:meth:`refuse_foreign_files`).

        The folder is created if it does not exist; the lock is the file ``.lock`` in it.

        Returns
        -------
        contextlib.AbstractContextManager
            A context manager that holds the lock inside its block.

        Raises
        ------
        labeldp.errors.RunLockedError
            If another process holds the lock.
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``, holds files that are not a run's, or a file is where the
            folder would be created.
        """
        self._writing()
        self.refuse_foreign_files()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise RunDirectoryError(f"cannot create the run folder {self.root}: a file is in the way") from None
        with exclusive_lock(self.root / ".lock", f"the run directory {self.root}"):
            yield

    def release_path(self, name: str) -> Path:
        """Where release ``name`` is saved.

        Parameters
        ----------
        name : str
            The release's name (``stage1``, ``prior``, ``pate``, ``test``, ...).

        Returns
        -------
        pathlib.Path
            ``noisy_labels/<name>.npz`` in the folder (it may not exist).
        """
        return self.root / "noisy_labels" / f"{name}.npz"

    def checkpoint_path(self, stage: int) -> Path:
        """Where the training of ``stage`` keeps its checkpoint.

        Parameters
        ----------
        stage : int
            The stage, from 1.

        Returns
        -------
        pathlib.Path
            ``checkpoints/stage<stage>.pt`` in the folder (it may not exist).
        """
        return self.root / "checkpoints" / f"stage{stage}.pt"

    def private_path(self, name: str) -> Path:
        """A file in ``private/`` (created, readable by the owner only).

        Parameters
        ----------
        name : str
            The file's name.

        Returns
        -------
        pathlib.Path
            ``private/<name>`` in the folder; the folder ``private/`` is created (mode 0o700), the file
            is not.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        folder = self.root / "private"
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder / name

    def discard_private(self) -> None:
        """Delete ``private/`` and everything in it (nothing if it does not exist).

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        shutil.rmtree(self.root / "private", ignore_errors=True)

    def discard_training(self) -> None:
        """Forget the training state (checkpoints, metrics, ``private/``) but keep every release and the
        ledger.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        shutil.rmtree(self.root / "checkpoints", ignore_errors=True)
        self.metrics_path.unlink(missing_ok=True)
        self.discard_private()

    def read_json(self, path: Path) -> Any:
        """A JSON file of the run folder (or one beside it), read.

        Parameters
        ----------
        path : pathlib.Path
            The file.

        Returns
        -------
        Any
            Its content.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the file is damaged.
        """
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise RunDirectoryError(f"{path} is damaged ({error}); restore it from a copy of the run folder") from None

    def read_config(self) -> dict[str, Any] | None:
        """The saved configuration (``config.json``).

        Returns
        -------
        dict or None
            The configuration as written (:meth:`RunConfig.to_dict <labeldp.config.run.RunConfig.to_dict>`),
            or None if there is none yet.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the file is damaged (not JSON).
        """
        return self.read_json(self.config_path) if self.config_path.exists() else None

    def write_config(self, config: dict[str, Any]) -> None:
        """Write ``config.json`` (atomically, replacing what was there).

        Parameters
        ----------
        config : dict
            The configuration as a dictionary (:meth:`RunConfig.to_dict <labeldp.config.run.RunConfig.to_dict>`).

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        write_json_atomic(self.config_path, config)

    def read_ledger(
        self, dataset_size: int | None = None, neighboring_relation=NEIGHBORING_RELATION, units=None
    ) -> PrivacyLedger:
        """The saved ledger (an empty one if there is none yet, which needs ``dataset_size``).

        Parameters
        ----------
        dataset_size : int or None, optional
            The number of rows whose labels are private (training rows, and test rows whose labels are
            private): a saved ledger must cover that many, an empty one is made for that many. None: read
            the saved ledger as it is.
        neighboring_relation : dp_accounting.NeighboringRelation, optional
            The relation of an empty ledger (default ``REPLACE_ONE``, label DP); a saved ledger keeps its own.
        units : numpy.ndarray or None, optional
            The privacy unit of each row (None: each row its own): a saved ledger must have the same.

        Returns
        -------
        PrivacyLedger
            The saved ledger, or an empty one.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If ``ledger.json`` is damaged, covers another number of rows than ``dataset_size`` or other
            units than ``units``, or does not exist while ``dataset_size`` is None.
        """
        if self.ledger_path.exists():
            try:
                ledger = PrivacyLedger.from_dict(self.read_json(self.ledger_path))
            except (KeyError, TypeError, ValueError) as error:
                raise RunDirectoryError(
                    f"{self.ledger_path} is damaged (cannot read {error}); restore it from a "
                    "copy of the run folder: without it the run's spending is unknown"
                ) from None
            if dataset_size is not None and ledger.dataset_size != dataset_size:
                raise RunDirectoryError(
                    f"{self.ledger_path} covers {ledger.dataset_size} examples, the dataset has {dataset_size}"
                )
            if dataset_size is not None and not _same_units(ledger.units, units):
                raise RunDirectoryError(f"{self.ledger_path} groups the rows into other privacy units than the run")
            return ledger
        if dataset_size is None:
            raise RunDirectoryError(f"{self.ledger_path} does not exist")
        return PrivacyLedger(dataset_size, neighboring_relation, units)

    def save_release(self, name: str, **arrays: np.ndarray) -> None:
        """Save a release (e.g. a stage's noisy labels with their indices) before it is used.

        Written atomically to :meth:`release_path`, replacing a file of that name: refusing a second
        draw is the caller's job (:meth:`RunContext.spend <labeldp.runs.context.RunContext.spend>`).

        Parameters
        ----------
        name : str
            The release's name.
        **arrays : numpy.ndarray
            What to save, by name (``numpy.savez``'s keywords).

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        write_atomic(self.release_path(name), lambda tmp: np.savez(tmp, **arrays))

    def load_release(self, name: str) -> dict[str, np.ndarray] | None:
        """Release ``name`` as :meth:`save_release` saved it.

        Parameters
        ----------
        name : str
            The release's name.

        Returns
        -------
        dict of str to numpy.ndarray, or None
            The saved arrays by name, or None if the release was not saved.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the file is damaged.
        """
        path = self.release_path(name)
        if not path.exists():
            return None
        try:
            with np.load(path) as data:
                return {key: data[key] for key in data.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as error:
            raise RunDirectoryError(
                f"{path} is damaged ({error}); restore it from a copy of the run folder "
                "(drawing its labels again would spend their budget twice)"
            ) from None

    def release_inputs(self) -> dict[str, dict[str, Any] | None]:
        """For each saved release, the configuration it depended on (None if it was not recorded).

        Returns
        -------
        dict
            Release name -> the configuration dictionary saved with it
            (:func:`~labeldp.runs.context.release_inputs`), or None; sorted by name.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If a release's file is damaged.
        """
        folder = self.root / "noisy_labels"
        found = {}
        for path in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
            release = self.load_release(path.stem)
            found[path.stem] = json.loads(str(release["config"])) if "config" in release else None
        return found

    def keep_metrics_of_checkpoints(self, stages: int, strict: bool = False) -> None:
        """Keep only the metric rows that the checkpoints vouch for (a crash may leave extra rows).

        With ``strict`` (a method whose training steps are releases, DP-SGD), a row beyond its
        checkpoint means the checkpoint was deleted or replaced by an older one after later epochs ran:
        continuing would repeat steps outside the recorded release, so it is an error.

        ``metrics.jsonl`` is rewritten with the history of each stage's checkpoint (none for a stage
        without one).

        Parameters
        ----------
        stages : int
            The run's number of stages.
        strict : bool, optional
            Refuse metric rows beyond their checkpoint instead of dropping them (default False).

        Raises
        ------
        labeldp.errors.RunDirectoryError
            With ``strict``, if ``metrics.jsonl`` records more epochs of a stage than its checkpoint holds;
            if a checkpoint is damaged; if the folder is ``read_only``.
        """
        written = self.read_metrics()
        rows = []
        for stage in range(1, stages + 1):
            history = self.load_checkpoint(stage)["history"] if self.checkpoint_path(stage).exists() else []
            if strict and sum(row.get("stage") == stage for row in written) > len(history):
                raise RunDirectoryError(
                    f"{self.metrics_path} records more epochs of stage {stage} than {self.checkpoint_path(stage)} "
                    "holds: the steps in between were released, and retraining them would release them again. "
                    "Restore the checkpoint from a copy of the run folder, or start again in a new folder"
                )
            rows += [{"stage": stage, **row} for row in history]
        self.rewrite_metrics(rows)

    def load_checkpoint(self, stage: int) -> dict[str, Any]:
        """The checkpoint of ``stage`` (:meth:`checkpoint_path`).

        Parameters
        ----------
        stage : int
            The stage, from 1.

        Returns
        -------
        dict
            What the checkpoint holds (its ``history``: the metric rows of the epochs it completed, ...).

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the file cannot be read (damaged or missing).
        """
        return load_torch(self.checkpoint_path(stage))

    def rewrite_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Replace ``metrics.jsonl`` (atomically) with ``rows``.

        Parameters
        ----------
        rows : list of dict
            The metric rows, one JSON line each.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        write_text_atomic(self.metrics_path, "".join(json.dumps(row) + "\n" for row in rows))

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one row (an epoch's metrics) to ``metrics.jsonl``.

        Parameters
        ----------
        row : dict
            The row, written as one JSON line.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        with open(self.metrics_path, "a") as handle:
            handle.write(json.dumps(row) + "\n")

    def read_metrics(self) -> list[dict[str, Any]]:
        """The rows of ``metrics.jsonl``.

        Returns
        -------
        list of dict
            One row per line, in order (a last line cut short by a crash left out); empty if there is no file.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If a complete line is damaged.
        """
        if not self.metrics_path.exists():
            return []
        text = self.metrics_path.read_text(errors="replace")
        lines = [line for line in text.split("\n") if line.strip()]
        if lines and not text.endswith("\n"):  # a process killed while appending: its last line is cut
            lines.pop()
        try:
            return [json.loads(line) for line in lines]
        except json.JSONDecodeError as error:
            raise RunDirectoryError(
                f"{self.metrics_path} is damaged ({error}); restore it from a copy of the run folder"
            ) from None

    def read_data_facts(self) -> dict[str, Any] | None:
        """What the run knows of its dataset's public shape (:func:`labeldp.runs.run.data_facts`).

        Returns
        -------
        dict or None
            The content of ``data.json``, or None if there is none.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the file is damaged (not JSON).
        """
        return self.read_json(self.data_path) if self.data_path.exists() else None

    def read_summary(self) -> dict[str, Any] | None:
        """The summary of the finished run (``summary.json``).

        Returns
        -------
        dict or None
            The summary, or None while the run is unfinished.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the file is damaged (not JSON).
        """
        return self.read_json(self.summary_path) if self.summary_path.exists() else None

    def elapsed(self) -> float:
        """The seconds the run has spent so far, over its start and every resume (``elapsed.json``).

        Returns
        -------
        float
            The seconds recorded, 0.0 if none.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the file is damaged (not JSON).
        """
        return self.read_json(self.elapsed_path)["seconds"] if self.elapsed_path.exists() else 0.0

    def write_elapsed(self, seconds: float) -> None:
        """Record the seconds the run has spent so far (``elapsed.json``, atomically).

        Parameters
        ----------
        seconds : float
            The total so far.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the folder is ``read_only``.
        """
        self._writing()
        write_json_atomic(self.elapsed_path, {"seconds": seconds})


def _same_units(saved: np.ndarray | None, units: np.ndarray | None) -> bool:
    """Whether a saved ledger's privacy units are the run's (both none, or the same codes)."""
    if saved is None or units is None:
        return saved is None and units is None
    return np.array_equal(saved, units)
