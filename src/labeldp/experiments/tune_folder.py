"""A tune folder's own files: ``tune.json``, ``tune.csv`` and ``candidates/`` beside the final run's."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from labeldp.config.run_config import as_recorded
from labeldp.errors import SECOND_RELEASE, RunDirectoryError
from labeldp.files import write_atomic
from labeldp.runs.rundir import RunDirectory

TUNE_FILE = "tune.json"
TUNE_TABLE = "tune.csv"
CANDIDATES_FOLDER = "candidates"
TABLE_COLUMNS = (
    "key",
    "estimated_clean_accuracy",
    "standard_error",
    "difference",
    "difference_error",
    "held_out",
    "seconds",
    "chosen",
)


def finished(folder: RunDirectory, record: dict[str, Any]) -> dict[str, Any] | None:
    """The saved ``tune.json`` of the same ``record`` (every item equal), or None where the folder holds no
    finished tune; :class:`~labeldp.errors.RunDirectoryError` for another tune's, or a finished run without
    ``tune.json``."""
    path = folder.root / TUNE_FILE
    if not path.exists():
        if folder.read_summary() is not None:
            raise RunDirectoryError(f"{folder.root} holds a finished run: choose another folder for the tune")
        return None
    saved = folder.read_json(path)
    if all(_read(name, saved.get(name)) == value for name, value in record.items()):
        return saved
    raise RunDirectoryError(
        f"{folder.root} holds a finished tune of other candidates or another configuration; "
        f"choose another folder {SECOND_RELEASE}"
    )


def _read(name: str, saved: Any) -> Any:
    """A saved item as this version writes it: the base configuration as it records one."""
    return as_recorded(saved) if name == "base" and isinstance(saved, dict) else saved


def write_table(outcome: dict[str, Any], path: Path) -> None:
    """Write ``tune.csv``: one row per candidate of ``outcome``, in :data:`TABLE_COLUMNS`."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=TABLE_COLUMNS)
            writer.writeheader()
            for row in outcome["results"]:
                writer.writerow(
                    {**{name: row[name] for name in TABLE_COLUMNS[:-1]}, "chosen": row["key"] == outcome["chosen"]}
                )

    write_atomic(path, write)
