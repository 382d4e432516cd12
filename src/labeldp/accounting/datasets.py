"""The ledger of a dataset across runs: what every release of its labels has spent, composed.

Design and limits: ``docs/dataset-ledger.md``. A dataset's key comes from public facts only (its label
column's name, its columns, its number of rows, a digest of its ids; or a name the user gives), so
neighbouring datasets share one file. Each release appends one JSON line under a lock, flushed to disk;
the latest line of a release (a run folder, a release folder) counts, so a run that resumes is never
counted twice. The composition is dp_accounting's, of each release's (epsilon, delta) guarantee.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import math
import os
import re
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from labeldp.accounting.rounding import format_epsilon
from labeldp.errors import BudgetError, ConfigError
from labeldp.files import write_text_atomic

#: where the dataset ledgers live unless ``--budget-dir`` says otherwise (each user's, so that every
#: runs folder of theirs composes): ``$LABELDP_BUDGET_DIR``, else ``~/.local/share/labeldp/budget``
BUDGET_DIR_VARIABLE = "LABELDP_BUDGET_DIR"
#: the total a release may not take a dataset past (``--total-epsilon``), carried to sweep workers
TOTAL_EPSILON_VARIABLE = "LABELDP_TOTAL_EPSILON"
#: the file of a run or release folder that holds its release id on the dataset's ledger
RELEASE_FILE = ".dataset-release"
#: the route of a line that withdraws a reservation
CANCELLED = "cancelled"


def budget_dir() -> Path:
    """The folder of the dataset ledgers (see :data:`BUDGET_DIR_VARIABLE`)."""
    folder = os.environ.get(BUDGET_DIR_VARIABLE)
    if folder:
        return Path(folder).expanduser()
    return Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share") / "labeldp" / "budget"


def total_epsilon() -> float | None:
    """The total a dataset may reach (``--total-epsilon``), or None."""
    value = os.environ.get(TOTAL_EPSILON_VARIABLE)
    return None if value in (None, "") else float(value)


def table_facts(path, label_column: str, columns: list[str], rows: int) -> dict[str, Any]:
    """The public facts that name a table's ledger, the same from every route and whatever options name
    (an id column or none): its label column, its columns and its rows; its file's name and path only
    describe it."""
    stem = Path(str(path)).name.split(".")[0]
    return {
        "stem": stem,
        "described": str(path),
        "label_column": label_column,
        "columns": sorted(columns),
        "rows": int(rows),
    }


def dataset_key(facts: dict[str, Any]) -> str:
    """The ledger's name for a dataset: the name the user gave, or a readable stem and a digest of the
    public ``facts`` (never a label)."""
    if facts.get("name"):
        name = str(facts["name"])
        if not re.fullmatch(r"[A-Za-z0-9._-]+", name) or name.startswith("."):
            raise ConfigError(f"a dataset name is letters, digits, '.', '_' and '-', got {name!r}")
        return name
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", str(facts.get("stem") or facts.get("dataset") or "dataset"))[:40]
    public = {k: v for k, v in facts.items() if k not in ("stem", "described")}  # a copy elsewhere is the same data
    digest = hashlib.sha256(json.dumps(public, sort_keys=True, default=str).encode()).hexdigest()[:12]
    return f"{stem}-{digest}"


@dataclass(frozen=True)
class Spend:
    """One release's guarantee on the dataset: (epsilon, delta) per ``unit`` (None: per row), and per row."""

    release: str
    route: str
    epsilon: float
    delta: float
    unit: str | None
    row_epsilon: float

    @classmethod
    def of_ledger(cls, release: str, route: str, ledger, delta: float, unit: str | None) -> Spend:
        """The spend a run's :class:`~labeldp.accounting.PrivacyLedger` records."""
        epsilon = ledger.epsilon(delta)
        row = ledger.row_epsilon(delta) if ledger.units is not None else epsilon
        return cls(release, route, epsilon, delta, unit if ledger.units is not None else None, row)


def compose(spends: list[Spend]) -> tuple[float, float, str | None]:
    """The dataset's (epsilon, delta) and its unit: per unit where every release is of the same unit,
    else per row. Pure releases add exactly; with a delta, dp_accounting composes the (epsilon, delta)
    guarantees, reported at the deltas' sum."""
    units = {spend.unit for spend in spends}
    unit = units.pop() if len(units) == 1 else None
    pairs = [(s.epsilon if unit is not None else s.row_epsilon, s.delta) for s in spends]
    if not pairs:
        return 0.0, 0.0, unit
    if any(math.isinf(epsilon) for epsilon, _ in pairs):
        return math.inf, 0.0, unit
    delta = sum(d for _, d in pairs)
    if delta == 0.0:
        return sum(e for e, _ in pairs), 0.0, unit
    plds = [pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(e, d)) for e, d in pairs]
    composed = plds[0]
    for pld in plds[1:]:
        composed = composed.compose(pld)
    return min(composed.get_epsilon_for_delta(delta), sum(e for e, _ in pairs)), delta, unit


class DatasetLedger:
    """The ledger file of one dataset in ``folder``: ``<key>.jsonl``, one line a release recorded."""

    def __init__(self, key: str, described: str, folder: Path | None = None):
        self.key, self.described = key, described
        self.folder = budget_dir() if folder is None else Path(folder)
        self.path = self.folder / f"{key}.jsonl"

    @classmethod
    def of(cls, facts: dict[str, Any], folder: Path | None = None) -> DatasetLedger:
        return cls(dataset_key(facts), str(facts.get("described") or facts.get("stem") or "a dataset"), folder)

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / f".{self.key}.lock", "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)  # waits: appends are short
            yield

    def spends(self) -> list[Spend]:
        """The latest spend of each release (a line cut short by a crash is not one)."""
        latest: dict[str, Spend] = {}
        if not self.path.exists():
            return []
        for line in self.path.read_text().splitlines():
            try:
                item = json.loads(line)
            except ValueError:
                continue  # the last line of a writer killed mid-write
            if "release" in item:
                fields = {k: item[k] for k in ("release", "route", "epsilon", "delta", "unit", "row_epsilon")}
                numbers = {k: _number(fields[k]) for k in ("epsilon", "row_epsilon")}
                latest[item["release"]] = Spend(**{**fields, **numbers})
        return [spend for spend in latest.values() if spend.route != CANCELLED]  # withdrawn: drew nothing

    def composed(self, also: Spend | None = None) -> tuple[float, float, str | None]:
        """The dataset's composed (epsilon, delta, unit), with ``also`` in place of its release's spend."""
        spends = [s for s in self.spends() if also is None or s.release != also.release]
        return compose(spends + ([also] if also is not None else []))

    def check(self, planned: Spend, total: float | None) -> tuple[float, float]:
        """The dataset's epsilon before and after ``planned``; refused before anything is drawn if it
        would pass ``total``, else reserved on the ledger at once (under the lock, so that two processes
        checking together see each other's spend; :meth:`cancel` withdraws it if nothing is drawn)."""
        with self._locked():
            before = self.composed()[0]
            after = self.composed(planned)[0]
            if total is not None and after > total + 1e-9 and after > before:
                raise BudgetError(
                    f"dataset {self.key} ({self.described}) has spent epsilon {format_epsilon(before)}; this release "
                    f"would take it to {format_epsilon(after)}, past --total-epsilon {total:g}: refused before "
                    f"anything was drawn (its ledger: {self.path})"
                )
            self._append(planned, reserved=True)
        return before, after

    def cancel(self, release: str) -> None:
        """Withdraw the reservation of a release that drew nothing (it failed before its first draw)."""
        self.record(Spend(release, CANCELLED, 0.0, 0.0, None, 0.0))

    def record(self, spend: Spend, final: bool = True) -> None:
        """Append ``spend`` under the lock, flushed to disk; a line a killed writer left unfinished is cut.
        Not ``final`` (a run between its releases): the line keeps at least the spend reserved for the
        whole run, so that a check meanwhile sees what the run will spend."""
        with self._locked():
            reserved = {s.release: s for s in self.spends()}.get(spend.release)
            if not final and reserved is not None:
                spend = Spend(
                    spend.release, spend.route, max(spend.epsilon, reserved.epsilon), max(spend.delta, reserved.delta),
                    spend.unit, max(spend.row_epsilon, reserved.row_epsilon),
                )  # fmt: skip
            self._append(spend)

    def _append(self, spend: Spend, reserved: bool = False) -> None:
        numbers = {
            k: v if math.isfinite(v) else "inf"
            for k, v in (("epsilon", spend.epsilon), ("row_epsilon", spend.row_epsilon))
        }
        fields = {**spend.__dict__, **numbers, "described": self.described, "time": time.time(), "reserved": reserved}
        with open(self.path, "a+b") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":  # a writer killed mid-line: cut back to its last full line
                    handle.seek(0)
                    data = handle.read()
                    handle.truncate(data.rfind(b"\n") + 1)
            handle.seek(0, os.SEEK_END)
            handle.write(json.dumps(fields).encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())

    def summary(self) -> dict[str, Any]:
        epsilon, delta, unit = self.composed()
        return {
            "key": self.key,
            "ledger": str(self.path),
            "epsilon": _rounded(epsilon),
            "delta": delta,
            "per": unit or "row",
            "releases": len(self.spends()),
        }


def folder_release(folder: Path, release: str | None = None) -> str:
    """The id under which a run or release folder's spend is on its dataset's ledger: written into the
    folder once (``release``, else a new one), so that a folder deleted and made again under the same
    path is a new release, never the old one's line replaced."""
    saved = saved_release(folder)
    release = saved or release or new_release(folder)
    _PENDING.pop(str(Path(folder).resolve()), None)  # a folder made again later is a new release
    if saved is None:
        write_text_atomic(Path(folder) / RELEASE_FILE, release)
    return release


def saved_release(folder: Path) -> str | None:
    """The release id a folder holds (:func:`folder_release`), or None; an id made for another path (a
    copied or moved folder) is not this folder's: its draws from now on are a release of its own."""
    path = Path(folder) / RELEASE_FILE
    release = path.read_text().strip() if path.exists() else None
    return release if release and release.startswith(f"{Path(folder).resolve()}#") else None


def new_release(folder) -> str:
    """The release id of a folder that holds none yet: the same for every check of this process until
    the folder's first release writes it (:func:`folder_release`); its path and a random suffix."""
    path = str(Path(folder).resolve())
    return _PENDING.setdefault(path, f"{path}#{uuid.uuid4().hex[:12]}")


_PENDING: dict[str, str] = {}


def _number(value) -> float:
    return math.inf if value == "inf" else float(value)


def _rounded(epsilon: float) -> float | None:
    return None if math.isinf(epsilon) else math.ceil(epsilon * 1e6) / 1e6


def ledgers(folder: Path | None = None) -> list[DatasetLedger]:
    """Every dataset ledger in ``folder``."""
    folder = budget_dir() if folder is None else Path(folder)
    found = []
    for path in sorted(folder.glob("*.jsonl")) if folder.exists() else []:
        described = "a dataset"
        for line in path.read_text().splitlines()[:1]:
            with contextlib.suppress(ValueError):
                described = json.loads(line).get("described", described)
        found.append(DatasetLedger(path.stem, described, folder))
    return found


__all__ = [
    "BUDGET_DIR_VARIABLE",
    "DatasetLedger",
    "Spend",
    "TOTAL_EPSILON_VARIABLE",
    "budget_dir",
    "compose",
    "dataset_key",
    "table_facts",
    "ledgers",
    "total_epsilon",
]
