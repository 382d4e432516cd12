"""The neighbour test: every route of tests/neighbours.py on neighbouring tables (one label changed, to
another class, to a word among numbers, to a missing-value spelling; one privacy unit's labels
changed): everything before the release (console, warnings, errors, exit code, the files written) is
identical, a duplicated row is refused where ids are named, and everything after the release depends
on the labels only through it (replayed with every true label replaced, the outputs are the same).
Every command and public name is a route or excluded with its reason."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import labeldp
from labeldp.boundary import PrivateLabels
from labeldp.cli import COMMANDS
from labeldp.randomness import NoiseSource, SecureGenerator
from tests.neighbours import EXCLUDED, INPUTS, ROUTES, ROW, Route, covered, file_names, replaced, table


class ReleaseReached(BaseException):
    """Raised where the first noise of a release is asked for."""


def _stop(*args, **kwargs):
    _check_reserved(Path.cwd())
    raise ReleaseReached


def _history(root: Path) -> dict[tuple[str, str], list[dict]]:
    """Every line of each release on each dataset ledger of the route's budget folder, in order."""
    found: dict[tuple[str, str], list[dict]] = {}
    for path in sorted((root / ".budget").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            item = json.loads(line)
            found.setdefault((path.stem, item["release"]), []).append(item)
    return found


def _lines(root: Path) -> list[dict]:
    """The latest line of each release on every dataset ledger, the reserved spend it followed beside it."""
    found = []
    for lines in _history(root).values():
        if lines[-1]["route"] != "cancelled":
            found.append({**lines[-1], "most_reserved": max(x["epsilon"] for x in lines if x["reserved"]) if any(
                x["reserved"] for x in lines) else None})  # fmt: skip
    return found


#: the releases on the dataset ledgers when a route starts (its setup's)
_SETUP: set[tuple[str, str]] = set()


def _check_reserved(root: Path) -> None:
    """At its first noise, a route has reserved its spend (or recorded it whole, as DP-SGD does) on every dataset
    ledger it is on: one entry point for every spend, one step."""
    history = _history(root)
    started = [
        lines[-1]
        for key, lines in history.items()
        if key not in _SETUP and lines[-1]["route"] != "cancelled" and any(line["reserved"] for line in lines)
    ]
    assert started, f"a release drew before it was reserved ({root})"
    for line in started:
        missing = [group for group in line["groups"] if (group, line["release"]) not in history]
        assert not missing, f"{line['release']} is reserved on {line['groups']} but not on {missing}"


def _check_accounting(root: Path) -> None:
    """Each route's line on the dataset ledgers is what its own ledger spent, per person under replace-one label."""
    from labeldp.accounting import PrivacyLedger
    from labeldp.accounting.policy import Guarantee, group_bound

    lines = [line for line in _lines(root) if not line["release"].startswith("absorbed:")]
    assert lines, "the route is on no dataset ledger"
    for line in lines:
        assert not line["reserved"], f"{line['release']}: its reservation was never followed by its spend"
        assert line["most_reserved"] is not None, f"{line['release']}: spent without a reservation"
        assert line["epsilon"] <= line["most_reserved"] + 1e-9, f"{line['release']}: spent more than it reserved"
        path = root / (line["run"] or ".") / "ledger.json"
        saved = json.loads(path.read_text())
        guarantee = Guarantee.of_ledger(PrivacyLedger.from_dict(saved), saved["delta"], line["unit"])
        people = line["people"]
        if people is not None and people["column"] == line["unit"]:
            expected = guarantee.epsilon
        else:
            expected = group_bound(guarantee.per_row, guarantee.delta, people["most_rows"] if people else 1)[0]
        assert line["epsilon"] == pytest.approx(expected, rel=1e-9), (line, expected)


@dataclass(frozen=True)
class Observed:
    """What a route showed; ``held``: the files of a run's ``private/`` folder (the true labels' state, the owner's
    alone until its release is made), by name only."""

    outcome: str
    console: str
    warnings: tuple[str, ...]
    files: dict[str, str]
    held: tuple[str, ...] = ()


_TIMES = re.compile(r"\d[\d,.]*\s*(?:s\b|ms\b|rows/s|labels/s|it/s)|\d+:\d\d")
_VOLATILE = ("seconds", "elapsed", "time", "per_second", "rate_rows")


def _digest(path: Path, root: Path) -> str:
    if path.suffix == ".npz":  # each array by its type, shape and content, the folder in its text named <ROOT>
        with np.load(path) as arrays:
            return repr({name: _array(array, root) for name, array in arrays.items()})
    data = re.sub(rb"#[0-9a-f]{12}", b"#<id>", path.read_bytes().replace(str(root).encode(), b"<ROOT>"))
    if path.suffix == ".json":
        try:
            value = json.loads(data)
        except ValueError:
            pass
        else:
            return json.dumps(_without_times(value), sort_keys=True)
    if path.suffix == ".jsonl":
        return json.dumps([_without_times(json.loads(line)) for line in data.splitlines() if line.strip()])
    if path.suffix == ".pt":  # tensors by their bytes, the rest without its timings
        return repr(_without_times(_plain(torch.load(io.BytesIO(data), weights_only=False))))
    if path.suffix in (".csv", ".txt"):
        return _TIMES.sub("<t>", data.decode(errors="replace"))
    return hashlib.sha256(data).hexdigest()


def _array(array: np.ndarray, root: Path) -> tuple:
    if array.dtype.kind == "U":
        text = json.dumps(np.char.replace(array, str(root), "<ROOT>").tolist())
        return "text", array.shape, hashlib.sha256(text.encode()).hexdigest()
    return array.dtype.str, array.shape, hashlib.sha256(array.tobytes()).hexdigest()


def _plain(value):
    if isinstance(value, torch.Tensor):
        return hashlib.sha256(value.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _without_times(value):
    if isinstance(value, dict):
        return {k: _without_times(v) for k, v in value.items() if not any(word in str(k) for word in _VOLATILE)}
    if isinstance(value, list):
        return [_without_times(v) for v in value]
    return value


def observe(route: Route, root: Path, frame: pd.DataFrame, monkeypatch, patch=None) -> Observed:
    """Run ``route`` on ``frame`` in ``root`` (its setup first, on the base table); ``patch(m)`` is applied
    around the run alone."""
    root.mkdir(parents=True, exist_ok=True)
    out = io.StringIO()
    with monkeypatch.context() as m:
        m.chdir(root)
        m.setenv("LABELDP_BUDGET_DIR", str(root / ".budget"))  # the dataset ledgers are among what is compared
        setup_files: set[str] = set()
        if route.setup is not None:
            earlier = set(file_names(root))
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                route.setup()
            setup_files = set(file_names(root)) - earlier
        _SETUP.clear()
        _SETUP.update(_history(root))
        if patch is not None:
            patch(m)
        with (
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(out),
            warnings.catch_warnings(record=True) as caught,
        ):
            warnings.simplefilter("always")
            try:
                outcome = f"exit {route.run(frame)}"
            except ReleaseReached:
                outcome = "release reached"
            except BaseException as error:  # noqa: BLE001 - compared, not swallowed: the neighbours must agree
                outcome = f"{type(error).__name__}: {error}"
    written = [name for name in file_names(root) if (root / name).is_file() and name not in INPUTS | setup_files]
    held = tuple(name for name in written if Path(name).parent.name == "private")
    assert not held or outcome == "release reached", f"a run that ended kept {held}"
    files = {name: _digest(root / name, root) for name in written if name not in held}
    console = _TIMES.sub("<t>", out.getvalue().replace(str(root), "<ROOT>"))
    return Observed(
        outcome, console, tuple(sorted({str(w.message).replace(str(root), "<ROOT>") for w in caught})), files, held
    )


class _StopAtNoise(SecureGenerator):
    """A noise stream that stops the route at its first draw: what a release does before it is compared too."""

    def __init__(self, *args, **kwargs) -> None:
        pass

    words = random = integers = normal = staticmethod(_stop)


def _stop_at_release(m) -> None:
    m.setattr(NoiseSource, "generator", lambda self, *args: _StopAtNoise())
    m.setattr(NoiseSource, "seed", _stop)
    m.setattr(NoiseSource, "key", _stop)


def _labels(route: Route) -> np.ndarray:
    values = [int(c) if c.isdigit() else c for c in route.classes[:2]]
    return np.array(values, dtype=object)[np.arange(len(table())) % 2]


def neighbours(route: Route) -> dict[str, pd.DataFrame]:
    """The route's neighbouring tables of its base table, by how they differ."""
    labels = _labels(route)
    found = {}
    for value in route.classes[1:]:
        changed = labels.copy()
        changed[ROW] = int(value) if value.isdigit() else value
        found[f"row {ROW} labelled {value!r}"] = table(changed)
    if route.units:
        base = table()
        flipped = labels.copy()
        mask = (base["user"] == base["user"][ROW]).to_numpy()
        flipped[mask] = [labels[1] if value == labels[0] else labels[0] for value in flipped[mask]]
        found["one unit's labels changed"] = table(flipped)
    return found


@pytest.mark.parametrize("route", ROUTES, ids=[r.name for r in ROUTES])
def test_neighbours_are_alike_until_the_release(route: Route, tmp_path, monkeypatch) -> None:
    base = observe(route, tmp_path / "base", table(_labels(route)), monkeypatch, _stop_at_release)
    assert base.outcome == ("release reached" if route.releases else "exit 0"), base.console
    for name, frame in neighbours(route).items():
        assert observe(route, tmp_path / "n", frame, monkeypatch, _stop_at_release) == base, name
        shutil.rmtree(tmp_path / "n")
    if route.ids:  # a row held twice is refused before anything is drawn
        frame = table(_labels(route))
        twice = observe(route, tmp_path / "dup", pd.concat([frame, frame.iloc[[ROW]]]), monkeypatch, _stop_at_release)
        assert twice.outcome != "release reached" and "duplicated" in twice.console + twice.outcome


@pytest.mark.parametrize("route", [r for r in ROUTES if r.name.startswith(("train on a CSV", "privatize a CSV"))],
                         ids=lambda r: r.name)  # fmt: skip
def test_a_label_past_the_first_block_of_a_large_csv_reads_alike(route: Route, tmp_path, monkeypatch) -> None:
    """60,000 rows, the last one's label a word among numbers: a reader that guessed a column's type
    from the first block of the file would fail on this neighbour only."""
    rows = 60_000
    labels = np.array([0, 1], dtype=object)[np.arange(rows) % 2]
    frame = pd.DataFrame({"id": np.arange(rows), "user": np.arange(rows) % 997, "x": (np.arange(rows) % 13) / 13})
    frame["site"] = "s" + (np.arange(rows) % 5).astype(str)
    base = observe(route, tmp_path / "base", frame.assign(y=labels), monkeypatch, _stop_at_release)
    assert base.outcome == "release reached", base.console
    changed = labels.copy()
    changed[-1] = "refused"
    assert observe(route, tmp_path / "n", frame.assign(y=changed), monkeypatch, _stop_at_release) == base


def _strip(root: Path, outputs: tuple[str, ...]) -> None:
    for path in sorted(root.rglob("*"), reverse=True):
        if path.name in outputs and path.exists():
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _recording(recorded: list):
    original = PrivateLabels._draw

    def draw_recorded(self, bound, members, draw):
        def wrapped(labels, ledger):
            result = draw(labels, ledger)
            recorded.append((result, [(e.event, e.members.copy(), e.description) for e in ledger.entries]))
            return result

        return original(self, bound, members, wrapped)

    return lambda m: m.setattr(PrivateLabels, "_draw", draw_recorded)


def _replaying(recorded: list):
    original = PrivateLabels._draw

    def draw_replayed(self, bound, members, draw):
        result, entries = recorded.pop(0)

        def wrapped(labels, ledger):
            for event, rows, description in entries:
                ledger.record(event, rows, description)
            return result

        return original(self, bound, members, wrapped)

    return lambda m: m.setattr(PrivateLabels, "_draw", draw_replayed)


@pytest.mark.parametrize("route", [r for r in ROUTES if r.replay in ("folder", "draws")], ids=lambda r: r.name)
def test_after_the_release_the_labels_matter_only_through_it(route: Route, tmp_path, monkeypatch) -> None:
    frame = table(_labels(route))
    if route.replay == "draws":
        recorded: list = []
        first = observe(route, tmp_path / "a", frame, monkeypatch, _recording(recorded))
        assert recorded, "the route drew nothing through PrivateLabels"
        _check_accounting(tmp_path / "a")
        again = observe(route, tmp_path / "c", replaced(frame), monkeypatch, _replaying(recorded))
        assert again == first
        return
    root = tmp_path / "run"  # one path throughout: a run folder records its table's
    full = observe(route, root, frame, monkeypatch)
    assert full.outcome == "exit 0", full.console
    _check_accounting(root)
    shutil.copytree(root, tmp_path / "saved")
    _strip(root, route.outputs)
    resumed = observe(route, root, frame, monkeypatch)
    remade = {name for name in full.files if Path(name).parts[1:2] and Path(name).parts[1] in route.outputs}
    assert resumed.outcome == "exit 0" and remade <= set(resumed.files), resumed.console
    shutil.rmtree(root)
    shutil.copytree(tmp_path / "saved", root)
    _strip(root, route.outputs)
    replayed = observe(route, root, replaced(frame), monkeypatch)
    differing = [
        k for k in sorted(resumed.files.keys() | replayed.files.keys()) if resumed.files.get(k) != replayed.files.get(k)
    ]
    assert replayed == resumed, differing


@pytest.mark.parametrize(
    "route", [r for r in ROUTES if r.releases and r.replay not in ("folder", "draws")], ids=lambda r: r.name
)
def test_each_route_s_dataset_ledger_line_is_its_own_ledger_s_spend(route: Route, tmp_path, monkeypatch) -> None:
    full = observe(route, tmp_path, table(_labels(route)), monkeypatch)
    assert full.outcome in ("exit 0", "exit None"), full.console
    _check_accounting(tmp_path)


def test_every_command_and_public_name_is_a_route_or_excluded_with_a_reason() -> None:
    commands = {f"labeldp {name}" for name in COMMANDS if name != "hashed"} | {
        "labeldp hashed train",
        "labeldp hashed predict",
    }
    public = {f"labeldp.{name}" for name in labeldp.__all__ if name != "__version__"}
    assert commands | public <= covered(), sorted((commands | public) - covered())
    assert all(reason for reason in EXCLUDED.values())
