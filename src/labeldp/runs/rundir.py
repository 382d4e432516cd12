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
from labeldp.errors import RunDirectoryError
from labeldp.files import exclusive_lock, write_atomic, write_json_atomic, write_text_atomic
from labeldp.training.checkpoint import load_torch

#: what a run folder may hold before its ``config.json`` is written: the lock, the folders a run creates
#: first, a sweep's record of a failed run, a tune's and an audit's own files
RUN_FOLDER_NAMES = frozenset(
    {".lock", "noisy_labels", "checkpoints", "error.txt", "tune.json", "tune.csv", "candidates", "audit"}
)


class RunDirectory:
    """Paths and readers/writers for one run's folder. ``read_only`` (the ranks other than 0 of a
    ``torchrun`` run, which never write) turns every writer into an error."""

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
        otherwise both draw noisy labels: a double spend). Raises ``RunLockedError`` if taken, and
        refuses a folder of other files (:meth:`refuse_foreign_files`)."""
        self._writing()
        self.refuse_foreign_files()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise RunDirectoryError(f"cannot create the run folder {self.root}: a file is in the way") from None
        with exclusive_lock(self.root / ".lock", f"the run directory {self.root}"):
            yield

    def release_path(self, name: str) -> Path:
        return self.root / "noisy_labels" / f"{name}.npz"

    def checkpoint_path(self, stage: int) -> Path:
        return self.root / "checkpoints" / f"stage{stage}.pt"

    def private_path(self, name: str) -> Path:
        """A file in ``private/`` (created, readable by the owner only)."""
        self._writing()
        folder = self.root / "private"
        folder.mkdir(mode=0o700, exist_ok=True)
        return folder / name

    def discard_private(self) -> None:
        self._writing()
        shutil.rmtree(self.root / "private", ignore_errors=True)

    def discard_training(self) -> None:
        """Forget the training state (checkpoints, metrics, ``private/``) but keep every release and the
        ledger."""
        self._writing()
        shutil.rmtree(self.root / "checkpoints", ignore_errors=True)
        self.metrics_path.unlink(missing_ok=True)
        self.discard_private()

    def _read_json(self, path: Path) -> Any:
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise RunDirectoryError(f"{path} is damaged ({error}); restore it from a copy of the run folder") from None

    def read_config(self) -> dict[str, Any] | None:
        return self._read_json(self.config_path) if self.config_path.exists() else None

    def write_config(self, config: dict[str, Any]) -> None:
        self._writing()
        write_json_atomic(self.config_path, config)

    def read_ledger(self, dataset_size: int | None = None, neighboring_relation=NEIGHBORING_RELATION) -> PrivacyLedger:
        """The saved ledger (an empty one if there is none yet, which needs ``dataset_size``)."""
        if self.ledger_path.exists():
            try:
                ledger = PrivacyLedger.from_dict(self._read_json(self.ledger_path))
            except (KeyError, TypeError, ValueError) as error:
                raise RunDirectoryError(
                    f"{self.ledger_path} is damaged (cannot read {error}); restore it from a "
                    "copy of the run folder: without it the run's spending is unknown"
                ) from None
            if dataset_size is not None and ledger.dataset_size != dataset_size:
                raise RunDirectoryError(
                    f"{self.ledger_path} covers {ledger.dataset_size} examples, the dataset has {dataset_size}"
                )
            return ledger
        if dataset_size is None:
            raise RunDirectoryError(f"{self.ledger_path} does not exist")
        return PrivacyLedger(dataset_size, neighboring_relation)

    def save_release(self, name: str, **arrays: np.ndarray) -> None:
        """Save a release (e.g. a stage's noisy labels with their indices) before it is used."""
        self._writing()
        write_atomic(self.release_path(name), lambda tmp: np.savez(tmp, **arrays))

    def load_release(self, name: str) -> dict[str, np.ndarray] | None:
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
        """For each saved release, the configuration it depended on (None if it was not recorded)."""
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
        continuing would repeat steps outside the recorded release, so it is an error."""
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
        return load_torch(self.checkpoint_path(stage))

    def rewrite_metrics(self, rows: list[dict[str, Any]]) -> None:
        self._writing()
        write_text_atomic(self.metrics_path, "".join(json.dumps(row) + "\n" for row in rows))

    def append_metrics(self, row: dict[str, Any]) -> None:
        self._writing()
        with open(self.metrics_path, "a") as handle:
            handle.write(json.dumps(row) + "\n")

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics_path.exists():
            return []
        return [json.loads(line) for line in self.metrics_path.read_text().splitlines() if line.strip()]

    def read_data_facts(self) -> dict[str, Any] | None:
        """What the run knows of its dataset's public shape (:func:`labeldp.runs.run.data_facts`)."""
        return self._read_json(self.data_path) if self.data_path.exists() else None

    def read_summary(self) -> dict[str, Any] | None:
        return self._read_json(self.summary_path) if self.summary_path.exists() else None

    def elapsed(self) -> float:
        return self._read_json(self.elapsed_path)["seconds"] if self.elapsed_path.exists() else 0.0

    def write_elapsed(self, seconds: float) -> None:
        self._writing()
        write_json_atomic(self.elapsed_path, {"seconds": seconds})
