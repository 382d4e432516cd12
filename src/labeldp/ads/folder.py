"""The folder of one run of the ads route: its release, written once, and the model trained on it.

Files: ``config.json`` (everything the release and training depend on), ``release.npz`` (what left the
boundary), ``ledger.json``, ``model.pt`` (the model with its hash spec,
:func:`labeldp.training.out_of_core.load_sparse_model`) and ``summary.json``; ``.lock`` keeps a second process
out. The release is saved, then its ledger, before anything is trained on it. A finished folder (with
``summary.json``) is never released into again (:class:`~labeldp.errors.ReleaseExistsError`: that would
spend the labels' budget twice); an unfinished one is continued by the same call from its saved release,
never drawn again, and refused under other settings or holding files that are not a run's.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from labeldp.accounting import PrivacyLedger
from labeldp.accounting.datasets import RELEASE_FILE
from labeldp.boundary import Release
from labeldp.errors import ReleaseExistsError, RunDirectoryError
from labeldp.files import exclusive_lock, write_atomic, write_json_atomic

#: the files of a run folder
FILES = ("config.json", "release.npz", "ledger.json", "model.pt", "summary.json")


class HashedRunFolder:
    """One run's folder (see :mod:`labeldp.ads.folder`), created if missing."""

    def __init__(self, root):
        self.root = Path(root)

    config_path = property(lambda self: self.root / "config.json")
    release_path = property(lambda self: self.root / "release.npz")
    ledger_path = property(lambda self: self.root / "ledger.json")
    model_path = property(lambda self: self.root / "model.pt")
    summary_path = property(lambda self: self.root / "summary.json")

    @contextlib.contextmanager
    def open(self, config: dict[str, Any]) -> Iterator[tuple[Release, PrivacyLedger | None] | None]:
        """Lock the folder for a run of ``config`` (JSON-ready: written on a first run, compared on a continued one)
        and yield its saved ``(release, ledger)``, or None.

        The ledger is None where the run stopped between saving its release and its ledger: the release on disk
        is spent, and the caller records it. Raises :class:`~labeldp.errors.ReleaseExistsError` for a finished run
        or a release made under another configuration, :class:`~labeldp.errors.RunDirectoryError` for a folder
        that is not a run's or whose ledger's release file is missing.
        """
        if self.root.exists() and not self.root.is_dir():
            raise RunDirectoryError(f"cannot create the run folder {self.root}: a file is in the way")
        self.root.mkdir(parents=True, exist_ok=True)
        with exclusive_lock(self.root / ".lock", f"the run folder {self.root}"):
            yield self._saved(json.loads(json.dumps(config)))

    def _saved(self, config: dict[str, Any]) -> tuple[Release, PrivacyLedger | None] | None:
        if self.summary_path.exists():
            raise ReleaseExistsError(
                f"{self.root} holds a finished run: its labels were released once, and releasing them again would "
                "spend their budget a second time. Predict with it (labeldp hashed predict), or write a run of "
                "other labels to a new folder"
            )
        foreign = sorted(p.name for p in self.root.iterdir() if p.name not in (*FILES, ".lock", RELEASE_FILE))
        if foreign:
            raise RunDirectoryError(f"{self.root} holds files that are not a run's ({', '.join(foreign[:5])})")
        if not self.release_path.exists():
            if self.ledger_path.exists():
                raise RunDirectoryError(
                    f"{self.ledger_path} records a release, but {self.release_path} is missing: drawing the labels "
                    "again would spend their budget a second time. Restore the file, or use a new folder"
                )
            write_json_atomic(self.config_path, config)
            return None
        if json.loads(self.config_path.read_text()) != config:
            raise ReleaseExistsError(
                f"{self.root} holds a release made under other settings (config.json): training on it under "
                "these would misstate the run, and releasing again would spend twice. Use a new folder"
            )
        with np.load(self.release_path, allow_pickle=False) as arrays:
            release = Release.from_arrays(dict(arrays))
        # the release is saved before its ledger: a run stopped between the two has released (the file is
        # on disk) without a ledger file, and is recorded from the saved release (None), never drawn again
        return release, PrivacyLedger.load(self.ledger_path) if self.ledger_path.exists() else None

    def save_release(self, release: Release, ledger: PrivacyLedger) -> None:
        """Save the release, then its ledger (whose presence marks a saved release)."""
        # numpy's stub would match the arrays against savez's allow_pickle
        write_atomic(self.release_path, lambda path: np.savez(path, **release.to_arrays()))  # type: ignore[arg-type]
        ledger.save(self.ledger_path)

    def finish(self, summary: dict[str, Any]) -> None:
        """Write ``summary.json``, which marks the run finished (the model is written before)."""
        write_json_atomic(self.summary_path, summary)


def read_summary(root) -> dict[str, Any]:
    """The ``summary.json`` of a finished run."""
    folder = HashedRunFolder(root)
    if not folder.summary_path.exists() or not folder.model_path.exists():
        raise RunDirectoryError(f"{root} holds no finished run of the ads route (summary.json, model.pt)")
    return json.loads(folder.summary_path.read_text())


__all__ = ["FILES", "HashedRunFolder", "read_summary"]
