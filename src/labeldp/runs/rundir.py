"""The run directory: everything a run needs to be repeated, resumed and audited (its layout: "The run
directory" in docs/guides/runs.md).

Every file depends on the private labels only through the releases saved in ``noisy_labels/`` and recorded in
``ledger.json``, except ``private/``: what a method computed from true labels without noise (PATE's teacher
votes), deleted once its release is made. Files are replaced atomically, so a crash at any moment leaves a
folder a resumed run can continue from."""

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
from labeldp.errors import SECOND_RELEASE, RunDirectoryError
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
    """Paths and readers/writers of one run's folder.

    Every writer raises :class:`~labeldp.errors.RunDirectoryError` when ``read_only`` (the ranks other than 0
    of a ``torchrun`` run), and every reader when its file is damaged.

    Parameters
    ----------
    root : str or pathlib.Path
        The run folder (it need not exist yet).
    read_only : bool, optional
        Refuse every writer.
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
        """Create the folder with its ``noisy_labels/`` and ``checkpoints/`` (kept if they exist)."""
        self._writing()
        (self.root / "noisy_labels").mkdir(parents=True, exist_ok=True)
        (self.root / "checkpoints").mkdir(exist_ok=True)

    def refuse_foreign_files(self) -> None:
        """Refuse (:class:`~labeldp.errors.RunDirectoryError`) a folder holding files but no labeldp run: a
        run would mix its files in with them."""
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
        """Hold an exclusive lock (``.lock``) on the run inside the ``with`` block: two processes on one run
        could both draw its labels, a double spend. The folder is created; a folder of other files refused.

        Raises
        ------
        labeldp.errors.RunLockedError
            If another process holds the lock.
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
        """``noisy_labels/<name>.npz``, where release ``name`` is saved."""
        return self.root / "noisy_labels" / f"{name}.npz"

    def checkpoint_path(self, stage: int) -> Path:
        """``checkpoints/stage<stage>.pt``, where the training of ``stage`` keeps its checkpoint."""
        return self.root / "checkpoints" / f"stage{stage}.pt"

    def private_path(self, name: str) -> Path:
        """``private/<name>``; the folder ``private/`` is created, readable by the owner only."""
        self._writing()
        folder = self.root / "private"
        folder.mkdir(mode=0o700, exist_ok=True)
        folder.chmod(0o700)  # one made otherwise (a copy, an older version) too
        return folder / name

    def discard_private(self) -> None:
        """Delete ``private/`` and everything in it."""
        self._writing()
        shutil.rmtree(self.root / "private", ignore_errors=True)

    def discard_training(self) -> None:
        """Forget the training state (checkpoints, metrics, ``private/``), keeping every release and the ledger."""
        self._writing()
        shutil.rmtree(self.root / "checkpoints", ignore_errors=True)
        self.metrics_path.unlink(missing_ok=True)
        self.discard_private()

    def read_json(self, path: Path) -> Any:
        """A JSON file of the run folder (or one beside it), read."""
        try:
            return json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise RunDirectoryError(f"{path} is damaged ({error}); restore it from a copy of the run folder") from None

    def read_config(self) -> dict[str, Any] | None:
        """The saved ``config.json``, or None if there is none yet."""
        return self.read_json(self.config_path) if self.config_path.exists() else None

    def write_config(self, config: dict[str, Any]) -> None:
        """Write ``config.json`` (:meth:`RunConfig.to_dict <labeldp.config.run_config.RunConfig.to_dict>`)."""
        self._writing()
        write_json_atomic(self.config_path, config)

    def read_ledger(
        self, dataset_size: int | None = None, neighboring_relation=NEIGHBORING_RELATION, units=None
    ) -> PrivacyLedger:
        """The saved ledger, or an empty one over ``dataset_size`` private rows where none is saved.

        A saved ledger must cover ``dataset_size`` rows (None: read as it is) grouped into the same ``units``;
        it keeps its own neighbouring relation.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If ``ledger.json`` is damaged, covers other rows or units, or is missing while ``dataset_size``
            is None.
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
        """Save a release's arrays before it is used, replacing a file of that name: refusing a second draw is
        the caller's job (:meth:`RunContext.spend <labeldp.runs.context.RunContext.spend>`)."""
        self._writing()
        # numpy's stub would match the arrays against savez's allow_pickle
        write_atomic(self.release_path(name), lambda tmp: np.savez(tmp, **arrays))  # type: ignore[arg-type]

    def load_release(self, name: str) -> dict[str, np.ndarray] | None:
        """Release ``name``'s arrays as :meth:`save_release` saved them, or None if it was not saved."""
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
        """Each saved release's configuration (:func:`~labeldp.config.run_config.release_inputs`; None if not
        recorded), by name."""
        folder = self.root / "noisy_labels"
        found = {}
        for path in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
            release = self.load_release(path.stem)
            assert release is not None  # its file was just found
            found[path.stem] = json.loads(str(release["config"])) if "config" in release else None
        return found

    def keep_metrics_of_checkpoints(self, stages: int, strict: bool = False) -> None:
        """Rewrite ``metrics.jsonl`` to the rows the checkpoints vouch for (a crash may leave extra rows).

        With ``strict`` (a method whose training steps are releases: DP-SGD) a row beyond its checkpoint is
        refused with :class:`~labeldp.errors.RunDirectoryError`: the checkpoint was replaced by an older one,
        and continuing would repeat released steps."""
        written = self.read_metrics()
        rows = []
        for stage in range(1, stages + 1):
            history = self.load_checkpoint(stage)["history"] if self.checkpoint_path(stage).exists() else []
            if strict and sum(row.get("stage") == stage for row in written) > len(history):
                raise RunDirectoryError(
                    f"{self.metrics_path} records more epochs of stage {stage} than {self.checkpoint_path(stage)} "
                    "holds: the steps in between were released, and retraining them would release them again. "
                    "Restore the checkpoint from a copy of the run folder, or start again in a new folder "
                    f"{SECOND_RELEASE}"
                )
            rows += [{"stage": stage, **row} for row in history]
        self.rewrite_metrics(rows)

    def load_checkpoint(self, stage: int) -> dict[str, Any]:
        """The checkpoint of ``stage`` (its ``history``: the metric rows of the epochs it completed)."""
        return load_torch(self.checkpoint_path(stage))

    def rewrite_metrics(self, rows: list[dict[str, Any]]) -> None:
        """Replace ``metrics.jsonl`` with ``rows``."""
        self._writing()
        write_text_atomic(self.metrics_path, "".join(json.dumps(row) + "\n" for row in rows))

    def append_metrics(self, row: dict[str, Any]) -> None:
        """Append one epoch's row to ``metrics.jsonl``."""
        self._writing()
        with open(self.metrics_path, "a") as handle:
            handle.write(json.dumps(row) + "\n")

    def read_metrics(self) -> list[dict[str, Any]]:
        """The rows of ``metrics.jsonl`` (a last line cut short by a crash left out)."""
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
        """``data.json`` (:func:`labeldp.runs.plan.data_facts`), or None."""
        return self.read_json(self.data_path) if self.data_path.exists() else None

    def read_summary(self) -> dict[str, Any] | None:
        """``summary.json``, or None while the run is unfinished."""
        return self.read_json(self.summary_path) if self.summary_path.exists() else None

    def elapsed(self) -> float:
        """The seconds the run has spent over its start and every resume (``elapsed.json``)."""
        return self.read_json(self.elapsed_path)["seconds"] if self.elapsed_path.exists() else 0.0

    def write_elapsed(self, seconds: float) -> None:
        """Record the seconds the run has spent so far."""
        self._writing()
        write_json_atomic(self.elapsed_path, {"seconds": seconds})


def _same_units(saved: np.ndarray | None, units: np.ndarray | None) -> bool:
    """Whether a saved ledger's privacy units are the run's (both none, or the same codes)."""
    if saved is None or units is None:
        return saved is None and units is None
    return np.array_equal(saved, units)
