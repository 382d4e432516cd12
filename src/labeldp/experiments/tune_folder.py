"""A tune folder's own files: ``tune.json``, ``tune.csv`` and ``candidates/`` beside the final run's."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from labeldp.errors import RunDirectoryError
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
    """The saved outcome of the same tune, finished; a different tune's finished folder is refused.

    Parameters
    ----------
    folder : RunDirectory
        The tune folder.
    record : dict
        What makes the tune the same: every item must equal the saved ``tune.json``'s.

    Returns
    -------
    dict or None
        The saved ``tune.json``, or None when the folder holds no finished tune.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If the folder holds a finished tune of another record, or a finished run without ``tune.json``.
    """
    path = folder.root / TUNE_FILE
    if not path.exists():
        if folder.read_summary() is not None:
            raise RunDirectoryError(f"{folder.root} holds a finished run: choose another folder for the tune")
        return None
    saved = folder.read_json(path)
    if all(saved.get(name) == value for name, value in record.items()):
        return saved
    raise RunDirectoryError(
        f"{folder.root} holds a finished tune of other candidates or another configuration; "
        "choose another folder (a new release)"
    )


def write_table(outcome: dict[str, Any], path: Path) -> None:
    """Write ``tune.csv`` (atomically): one row per candidate, in :data:`TABLE_COLUMNS`.

    Parameters
    ----------
    outcome : dict
        A tune's outcome (:func:`~labeldp.experiments.tune.tune`): its ``results`` and ``chosen`` key.
    path : pathlib.Path
        The file written.
    """

    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=TABLE_COLUMNS)
            writer.writeheader()
            for row in outcome["results"]:
                writer.writerow(
                    {**{name: row[name] for name in TABLE_COLUMNS[:-1]}, "chosen": row["key"] == outcome["chosen"]}
                )

    write_atomic(path, write)
