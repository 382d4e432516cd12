"""The run directory: everything a run needs to be repeated, resumed and audited.

Layout: ``config.json``, ``ledger.json``, ``noisy_labels/{stage{t},prior,pate}.npz`` (every release
of private information: noisy labels per stage, the noisy cluster histogram, PATE's answers),
``checkpoints/stage{t}.pt`` (and, for PATE until its answers are released, ``checkpoints/teachers.npz``),
``metrics.jsonl`` (one row per epoch), ``summary.json`` and ``model.pt``. Files are replaced
atomically, so a crash at any moment leaves a directory that a resumed run can continue from.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from pathlib import Path
from typing import Iterator
from typing import Any

import numpy as np

from labeldp.accounting import NEIGHBORING_RELATION, PrivacyLedger


class RunLockedError(RuntimeError):
    """The run directory is in use by another process."""


def write_json_atomic(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


class RunDirectory:
    """Paths and readers/writers for one run's folder."""

    def __init__(self, root: str | os.PathLike):
        self.root = Path(root)

    config_path = property(lambda self: self.root / "config.json")
    ledger_path = property(lambda self: self.root / "ledger.json")
    metrics_path = property(lambda self: self.root / "metrics.jsonl")
    summary_path = property(lambda self: self.root / "summary.json")
    model_path = property(lambda self: self.root / "model.pt")
    elapsed_path = property(lambda self: self.root / "elapsed.json")

    def create(self) -> None:
        (self.root / "noisy_labels").mkdir(parents=True, exist_ok=True)
        (self.root / "checkpoints").mkdir(exist_ok=True)

    @contextlib.contextmanager
    def lock(self) -> Iterator[None]:
        """Hold an exclusive lock on the run for the duration (two processes on one run could
        otherwise both draw noisy labels: a double spend). Raises ``RunLockedError`` if taken."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunLockedError(f"another process is using the run directory {self.root}") from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def release_path(self, name: str) -> Path:
        return self.root / "noisy_labels" / f"{name}.npz"

    def checkpoint_path(self, stage: int) -> Path:
        return self.root / "checkpoints" / f"stage{stage}.pt"

    def read_config(self) -> dict[str, Any] | None:
        return json.loads(self.config_path.read_text()) if self.config_path.exists() else None

    def write_config(self, config: dict[str, Any]) -> None:
        write_json_atomic(self.config_path, config)

    def read_ledger(self, dataset_size: int, neighboring_relation=NEIGHBORING_RELATION) -> PrivacyLedger:
        if self.ledger_path.exists():
            ledger = PrivacyLedger.load(self.ledger_path)
            if ledger.dataset_size != dataset_size:
                raise ValueError(f"{self.ledger_path} covers {ledger.dataset_size} examples, the dataset has {dataset_size}")
            return ledger
        return PrivacyLedger(dataset_size, neighboring_relation)

    def save_release(self, name: str, **arrays: np.ndarray) -> None:
        """Save a release (e.g. a stage's noisy labels with their indices) before it is used."""
        path = self.release_path(name)
        tmp = path.with_name(path.stem + ".tmp.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, path)

    def load_release(self, name: str) -> dict[str, np.ndarray] | None:
        path = self.release_path(name)
        if not path.exists():
            return None
        with np.load(path) as data:
            return {key: data[key] for key in data.files}

    def rewrite_metrics(self, rows: list[dict[str, Any]]) -> None:
        tmp = self.metrics_path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(json.dumps(row) + "\n" for row in rows))
        os.replace(tmp, self.metrics_path)

    def append_metrics(self, row: dict[str, Any]) -> None:
        with open(self.metrics_path, "a") as handle:
            handle.write(json.dumps(row) + "\n")

    def read_metrics(self) -> list[dict[str, Any]]:
        if not self.metrics_path.exists():
            return []
        return [json.loads(line) for line in self.metrics_path.read_text().splitlines() if line.strip()]

    def read_summary(self) -> dict[str, Any] | None:
        return json.loads(self.summary_path.read_text()) if self.summary_path.exists() else None

    def elapsed(self) -> float:
        return json.loads(self.elapsed_path.read_text())["seconds"] if self.elapsed_path.exists() else 0.0

    def write_elapsed(self, seconds: float) -> None:
        write_json_atomic(self.elapsed_path, {"seconds": seconds})
