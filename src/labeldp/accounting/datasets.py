"""The ledger of a group of people across runs: what every release of their labels has spent, composed per
person under replace-one-label (design and limits: ``docs/dataset-ledger.md``).

A group is keyed by public facts only: the name the user gives it, the public column that names its people,
or, for a table whose people are not named, its label column, columns and rows. Each release appends one
JSON line under a lock, flushed to disk; the latest line of a release counts (a run that resumes is never
counted twice). Where a release names its people, the group's :class:`~labeldp.accounting.people.PeopleIndex`
records which releases hold each person, and the group's figure is its worst person's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import threading
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from labeldp.accounting.people import People, PeopleIndex
from labeldp.accounting.policy import LABEL_RELATION
from labeldp.accounting.rounding import stored_epsilon
from labeldp.errors import BudgetError, ConfigError
from labeldp.files import exclusive_lock, write_text_atomic

#: the file of a run or release folder that holds its release id on the dataset ledgers
RELEASE_FILE = ".dataset-release"
#: the route of a line that withdraws a reservation
CANCELLED = "cancelled"
#: the key prefixes of the groups labeldp names itself (a user's name takes neither)
PEOPLE, TABLE = "people-", "table-"


def table_facts(path, label_column: str, columns: list[str], rows: int) -> dict[str, Any]:
    """The public facts that key a table's own ledger, the same from every route whatever options name: its
    label column, its columns and its rows; the file only describes it (a copy elsewhere is the same table)."""
    return {
        "described": f"table {Path(str(path)).name} (label column {label_column!r}, {len(columns)} columns, "
        f"{int(rows):,} rows)",
        "label_column": label_column,
        "columns": sorted(columns),
        "rows": int(rows),
    }


def _digest(facts: dict[str, Any]) -> str:
    public = {k: v for k, v in facts.items() if k not in ("stem", "described", "name")}
    return hashlib.sha256(json.dumps(public, sort_keys=True, default=str).encode()).hexdigest()[:12]


def check_name(name: str) -> str:
    """A dataset name as the user gave it, refused unless letters, digits, '.', '_' and '-'."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", str(name)) or str(name).startswith((".", PEOPLE, TABLE)):
        raise ConfigError(
            f"a dataset name is letters, digits, '.', '_' and '-', not starting with '.', {PEOPLE!r} or "
            f"{TABLE!r}; got {name!r}"
        )
    return str(name)


def people_key(column: str) -> str:
    """The key of the group whose people a public column names, when no dataset name is given."""
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", column)[:40]
    exact = "" if readable == column else "-" + hashlib.sha256(column.encode()).hexdigest()[:8]
    return f"{PEOPLE}{readable}{exact}"


@dataclass(frozen=True)
class Spend:
    """One release's line on a group's ledger: (``epsilon``, ``delta``) for each person it holds, under
    replace-one-label; ``people`` (column, count, most_rows) where it names them, else every person's;
    ``groups``, every ledger the release is on; ``private`` False for a reference run, kept apart."""

    release: str
    route: str
    epsilon: float
    delta: float = 0.0
    unit: str | None = None
    row_epsilon: float | None = None
    people: dict[str, Any] | None = None
    private: bool = True
    groups: tuple[str, ...] = ()
    run: str | None = None


@dataclass(frozen=True)
class Worst:
    """A group's figure: its worst person's (``epsilon``, ``delta``), ``at`` how many people share it and
    ``people`` how many it holds (None: its releases name no people, each counts for everyone)."""

    epsilon: float
    delta: float
    at: int | None = None
    people: int | None = None


def compose(spends: Sequence[Spend]) -> tuple[float, float]:
    """The (epsilon, delta) of one person held by ``spends``: pure releases add exactly; with a delta,
    dp_accounting composes the (epsilon, delta) guarantees, reported at the deltas' sum."""
    pairs = [(s.epsilon, s.delta) for s in spends]
    if not pairs:
        return 0.0, 0.0
    if any(math.isinf(epsilon) for epsilon, _ in pairs):
        return math.inf, 0.0
    delta = sum(d for _, d in pairs)
    if delta == 0.0:
        return float(sum(e for e, _ in pairs)), 0.0
    if delta >= 1.0:
        return math.inf, 1.0
    plds = [pld_lib.from_privacy_parameters(pld_common.DifferentialPrivacyParameters(e, d)) for e, d in pairs]
    composed = plds[0]
    for pld in plds[1:]:
        composed = composed.compose(pld)
    return min(composed.get_epsilon_for_delta(delta), sum(e for e, _ in pairs)), delta


@dataclass
class DatasetLedger:
    """The ledger of one group in ``folder``: ``<key>.jsonl``, a line a release, and ``<key>.people``."""

    key: str
    described: str
    folder: Path
    _cache: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.folder = Path(self.folder)

    @property
    def path(self) -> Path:
        return self.folder / f"{self.key}.jsonl"

    @property
    def people_path(self) -> Path:
        return self.folder / f"{self.key}.people"

    @classmethod
    def of_table(cls, facts: dict[str, Any], folder: Path) -> DatasetLedger:
        """A table's own ledger, its rows each a person (a ledger of old runs keyed by the file's name joins it)."""
        ledger = cls(f"{TABLE}{_digest(facts)}", str(facts.get("described") or "a table"), folder)
        ledger._adopt_legacy()
        return ledger

    @classmethod
    def named(cls, name: str, folder: Path, described: str | None = None) -> DatasetLedger:
        return cls(check_name(name), described or f"dataset {name!r}", folder)

    @classmethod
    def of_people(cls, column: str, folder: Path) -> DatasetLedger:
        return cls(people_key(column), f"the people of column {column!r}", folder)

    def _adopt_legacy(self) -> None:
        """Lines of a ledger keyed ``<file name>-<digest>`` (before the file's name stopped keying it) move here."""
        if self.path.exists() or not self.folder.is_dir():
            return
        legacy = [p for p in self.folder.glob(f"*-{self.key.removeprefix(TABLE)}.jsonl") if p != self.path]
        if legacy:
            with self.locked():
                if not self.path.exists():
                    write_text_atomic(self.path, "".join(p.read_text() for p in sorted(legacy)))
                    for old in legacy:
                        old.unlink()

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the budget folder's lock (:func:`folder_locked`)."""
        with folder_locked(self.folder):
            self._cache.clear()
            self._cache["held"] = True  # what is read under the lock stays true until it is released
            try:
                yield
            finally:
                self._cache.clear()

    def lines(self) -> dict[str, Spend]:
        """The latest line of each release, withdrawn ones included (a line cut short by a crash is none)."""
        if "lines" in self._cache:
            return self._cache["lines"]
        latest: dict[str, Spend] = {}
        text = self.path.read_text() if self.path.exists() else ""
        for number, line in enumerate(text.splitlines(), 1):
            try:
                item = json.loads(line)
            except ValueError:
                continue  # the last line of a writer killed mid-write
            if isinstance(item, dict) and "release" in item:
                latest[item["release"]] = _spend(item, self.path, number)
        if self._cache.get("held"):
            self._cache["lines"] = latest
        return latest

    def spends(self) -> list[Spend]:
        """The latest line of each private release that was not withdrawn."""
        return [s for s in self.lines().values() if s.route != CANCELLED and s.private]

    def references(self) -> list[Spend]:
        """Reference runs without privacy: kept apart, never composed."""
        return [s for s in self.lines().values() if s.route != CANCELLED and not s.private]

    def people_column(self) -> str | None:
        """The public column naming this group's people, fixed by its first release that named them."""
        for spend in self.lines().values():
            if spend.people is not None:
                return spend.people["column"]
        return None

    def index(self) -> PeopleIndex:
        if "index" in self._cache:
            return self._cache["index"]
        index = PeopleIndex.load(self.people_path)
        if self._cache.get("held"):
            self._cache["index"] = index
        return index

    def _with(self, planned: Sequence[tuple[Spend, People | None]]) -> PeopleIndex:
        """The index once ``planned`` hold their people (computed once under the lock: a check, then its write)."""
        key = tuple((spend.release, id(people)) for spend, people in planned if people is not None)
        if self._cache.get("with", (None,))[0] == key:
            return self._cache["with"][1]
        index = self.index()
        for spend, people in planned:
            if people is not None:
                index = index.with_release(spend.release, people)
        if self._cache.get("held"):
            self._cache["with"] = (key, index)
        return index

    def worst(self, planned: Sequence[tuple[Spend, People | None]] = (), touched: bool = False) -> Worst:
        """The group's figure, with ``planned`` (a line and its people) in place of their releases' lines; with
        ``touched``, the worst of the people ``planned`` hold."""
        spends = {s.release: s for s in self.spends()}
        index = self._with(planned)
        for spend, _ in planned:
            spends[spend.release] = spend
        everyone = [s for s in spends.values() if s.people is None]
        new = {spend.release for spend, _ in planned}
        if not index.signatures:
            return Worst(*compose(everyone)) if not touched or new & {s.release for s in everyone} else Worst(0.0, 0.0)
        all_touched = bool(new & {s.release for s in everyone})
        composed: dict[tuple[str, ...], tuple[float, float]] = {}
        figures, counts = [], []
        for signature, count in zip(index.signatures, index.counts):
            if touched and not all_touched and not new & set(signature):
                continue
            held = tuple(sorted(r for r in signature if r in spends))
            if held not in composed:
                composed[held] = compose(everyone + [spends[r] for r in held])
            figures.append(composed[held])
            counts.append(count)
        if not figures:
            return Worst(0.0, 0.0, 0, index.count)
        epsilon, delta = max(figures)
        at = sum(count for count, f in zip(counts, figures) if f[0] >= epsilon - 1e-9)
        return Worst(epsilon, delta, at, index.count)

    def append(self, spends: Sequence[tuple[Spend, People | None]], reserved: bool = False) -> None:
        """Write ``spends`` under the lock the caller holds: their people into the index first (a release whose
        line a crash then loses counts for nothing: it drew nothing), then their lines, flushed to disk."""
        index = self._with(spends)
        if index is not self.index():
            index.save(self.people_path)
        with open(self.path, "a+b") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            if size:
                handle.seek(size - 1)
                if handle.read(1) != b"\n":  # a writer killed mid-line: cut back to its last full line
                    handle.seek(0)
                    handle.truncate(handle.read().rfind(b"\n") + 1)
            handle.seek(0, os.SEEK_END)
            for spend, _ in spends:
                fields = {**asdict(spend), "described": self.described, "reserved": reserved}
                fields["epsilon"], fields["row_epsilon"] = _jsonable(spend.epsilon), _jsonable(spend.row_epsilon)
                handle.write(json.dumps(fields).encode() + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        for name in ("lines", "index", "with"):
            self._cache.pop(name, None)

    def record(self, spend: Spend, final: bool = True, people: People | None = None) -> None:
        """Append ``spend`` (its ``people`` into the index where no reservation put them); not ``final`` (a run
        between its releases) it keeps at least the spend reserved for the whole run, so that a check meanwhile
        sees what the run will spend."""
        with self.locked():
            reserved = self.lines().get(spend.release)
            if reserved is not None and reserved.people is not None:
                people = None  # in the index since its reservation
            if not final and reserved is not None and reserved.route != CANCELLED:
                spend = Spend(**{
                    **asdict(spend),
                    "epsilon": max(spend.epsilon, reserved.epsilon),
                    "delta": max(spend.delta, reserved.delta),
                })  # fmt: skip
            self.append([(spend, people)])

    def cancel(self, release: str) -> None:
        """Withdraw the reservation of a release that drew nothing (it failed before its first draw)."""
        with self.locked():
            self.append([(Spend(release, CANCELLED, 0.0), None)])

    def summary(self) -> dict[str, Any]:
        """The group's figure as JSON types, for a run's summary and ``labeldp budget``."""
        worst = self.worst()
        return {
            "key": self.key,
            "described": self.described,
            "ledger": str(self.path),
            "epsilon": _jsonable(worst.epsilon),
            "delta": worst.delta,
            "relation": LABEL_RELATION,
            "per": f"person of column {column!r}" if (column := self.people_column()) else "row",
            "people": worst.people,
            "people_at_worst": worst.at,
            "releases": len(self.spends()),
            "references": len(self.references()),
        }


def _jsonable(value: float | None) -> float | str | None:
    return None if value is None else stored_epsilon(value) if math.isinf(value) else math.ceil(value * 1e12) / 1e12


def _spend(item: dict[str, Any], path: Path, number: int) -> Spend:
    try:
        epsilon = math.inf if item["epsilon"] == "inf" else float(item["epsilon"])
        row = item.get("row_epsilon")
        row = None if row is None else math.inf if row == "inf" else float(row)
        return Spend(
            item["release"],
            item["route"],
            epsilon,
            float(item.get("delta") or 0.0),
            item.get("unit"),
            row,
            item.get("people"),
            bool(item.get("private", math.isfinite(epsilon))),  # an old line at inf: a reference run
            tuple(item.get("groups") or ()),
            item.get("run"),
        )
    except (KeyError, TypeError, ValueError):
        raise BudgetError(
            f"line {number} of {path} is damaged ({json.dumps(item)[:200]}): restore the file from a backup, or "
            "delete the line, which stops counting that release's spend"
        ) from None


def folder_release(folder: Path, release: str | None = None) -> str:
    """The id under which a run or release folder's spend is on the ledgers: written into the folder once
    (``release``, else a new one), so that a folder deleted and made again under the same path is a new
    release, never the old one's line replaced."""
    saved = saved_release(folder)
    release = saved or release or new_release(folder)
    _PENDING.pop(str(Path(folder).resolve()), None)  # a folder made again later is a new release
    if saved is None:
        write_text_atomic(Path(folder) / RELEASE_FILE, release)
    return release


def saved_release(folder: Path) -> str | None:
    """The release id a folder holds (:func:`folder_release`), or None; an id made for another path (a copied
    or moved folder) is not this folder's: its draws from now on are a release of its own."""
    path = Path(folder) / RELEASE_FILE
    release = path.read_text().strip() if path.exists() else None
    return release if release and release.startswith(f"{Path(folder).resolve()}#") else None


def new_release(folder) -> str:
    """The release id of a folder that holds none yet: the same for every check of this process until the
    folder's first release writes it (:func:`folder_release`); its path and a random suffix."""
    path = str(Path(folder).resolve())
    return _PENDING.setdefault(path, f"{path}#{uuid.uuid4().hex[:12]}")


_PENDING: dict[str, str] = {}


def ledgers(folder: Path) -> list[DatasetLedger]:
    """Every group's ledger in ``folder``."""
    found = []
    for path in sorted(Path(folder).glob("*.jsonl")) if Path(folder).is_dir() else []:
        described = "a dataset"
        with contextlib.suppress(ValueError, OSError), open(path) as handle:
            described = json.loads(handle.readline()).get("described", described)
        found.append(DatasetLedger(path.stem, described, Path(folder)))
    return found


def people_groups(folder: Path) -> list[tuple[str, DatasetLedger]]:
    """The groups that follow a column of people (named or not), with that column."""
    return [
        (column, ledger)
        for ledger in ledgers(folder)
        if not ledger.key.startswith(TABLE) and (column := ledger.people_column()) is not None
    ]


@contextlib.contextmanager
def folder_locked(folder: Path) -> Iterator[None]:
    """Hold the budget folder's lock (``.lock``, waited for: every check and line is short), once a process:
    a release's check of every group it is on, and its lines, are one step for every other process."""
    folder = Path(folder)
    key = str(folder.resolve())
    guard = _HELD.setdefault(key, [threading.RLock(), 0, None])
    with guard[0]:
        if guard[1] == 0:
            folder.mkdir(parents=True, exist_ok=True)
            guard[2] = contextlib.ExitStack()
            guard[2].enter_context(exclusive_lock(folder / ".lock"))
        guard[1] += 1
        try:
            yield
        finally:
            guard[1] -= 1
            if guard[1] == 0:
                guard[2].close()  # releases the lock


_HELD: dict[str, list] = {}


__all__ = [
    "DatasetLedger",
    "Spend",
    "Worst",
    "check_name",
    "compose",
    "folder_release",
    "ledgers",
    "new_release",
    "people_groups",
    "people_key",
    "saved_release",
    "table_facts",
]
