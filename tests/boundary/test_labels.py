"""Private labels as a type (boundary/labels.py, and the budget of boundary/shared_budget.py, which has
little logic and shares this module): nothing but the release boundary and the private-side trainers
reads them, every attempt to compute on them fails loudly, and every view of them shares one release."""

from __future__ import annotations

import ast
import pickle
import re
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score

from labeldp.accounting import PrivacyLedger, randomized_response_event
from labeldp.boundary import (
    LabelBudget,
    PrivateLabelAccessError,
    PrivateLabels,
    release_external_labels,
    release_hashed_counts,
    release_label_marginals,
    release_laplace_one_hot,
    release_laplace_value,
    release_noisy_histogram,
    release_randomized_response,
    release_rr_on_bins,
    release_rr_with_prior,
    release_true_labels,
    release_vector_labels,
    unseal,
)
from labeldp.boundary import labels as labels_module
from labeldp.boundary.release import true_labels
from labeldp.boundary.release_parts import release_randomized_response_part
from labeldp.data.grid import snap_to_grid
from labeldp.errors import BudgetError, ConfigError, DataError
from labeldp.mechanisms import flip_channel

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "labeldp"
ARCHITECTURE = PACKAGE.parents[1] / "docs" / "ARCHITECTURE.md"

#: Every function of labeldp that reads the value of private labels, by module, with why: the release
#: boundary, and the private-side trainers, which read them inside the mechanism they implement. The one
#: list: docs/ARCHITECTURE.md shows it as a table, row for row and word for word (compared below), and
#: the test below fails on a reader missing from it, or on one it names that reads no more.
READERS: dict[str, tuple[tuple[str, ...], str]] = {
    "boundary/labels.py": (
        ("unseal", "PrivateLabels.concatenate", "PrivateLabels.replaced"),
        "the type itself: `unseal` is the one reader (through `_open`); joining or planting labels copies "
        "their values into new labels without leaving the type",
    ),
    "boundary/release.py": (
        (
            "true_labels",
            "release_randomized_response",
            "release_rr_with_prior",
            "release_rr_on_bins",
            "release_laplace_value",
            "release_true_labels",
            "release_external_labels",
            "release_laplace_one_hot",
            "release_vector_labels",
        ),
        "the `release_*` functions, through `true_labels` (`unseal` and the range check): a mechanism draws "
        "from the labels and the ledger records the event; `release_external_labels` reads a source's reports, "
        "recorded with the guarantee its channel states",
    ),
    "boundary/release_counts.py": (
        ("release_noisy_histogram", "release_label_marginals"),
        "counts over many rows (a noisy histogram, noisy marginals), read through `release.py`'s `true_labels` "
        "and noised inside the release that records them, once per privacy unit",
    ),
    "boundary/release_parts.py": (
        ("release_randomized_response_part",),
        "RR drawn by several processes, each reading its own rows through `release.py`'s `true_labels`; the "
        "recording process joins the parts and records one entry",
    ),
    "boundary/column.py": (
        ("_privatize_positions",),
        "`privatize`: RR or RR-with-prior block by block for a label column released once in memory (a user's "
        "array wrapped as `PrivateLabels` at the line that reads it)",
    ),
    "boundary/release_hashed.py": (
        ("_count",),
        "`release_hashed_counts`: noisy label counts over hashed features, the labels unsealed block by block "
        "as the table streams past; under torchrun each rank counts its own rows and the rank that draws sums them",
    ),
    "dpsgd/trainer.py": (("train_dpsgd",), "DP-SGD's clipped, noised gradient steps are the release"),
    "dpsgd/selection.py": (
        ("_trial",),
        "private selection's held-out count, noised inside the mechanism it implements",
    ),
    "teachers.py": (
        ("train_teachers",),
        "PATE's teachers, whose votes leave only through `release_pate_labels`' GNMax noise",
    ),
}

LABELS_MODULE = "boundary/labels.py"
#: the readers, wherever they are reached from (a name, an alias, an attribute: ``boundary.unseal``)
READ_NAMES = frozenset({"unseal", "true_labels"})
#: what only the type's own module may touch: PrivateLabels' private attributes and methods, and the
#: module's private names (``_open``, ``_Root``), read off the class and the module themselves
PRIVATE_ATTRIBUTES = frozenset(
    {
        *PrivateLabels.__slots__,
        *(name for name in vars(PrivateLabels) if name.startswith("_") and not name.endswith("__")),
    }
)
LABELS_PRIVATE = frozenset(name for name in vars(labels_module) if name.startswith("_") and not name.startswith("__"))
#: calls that reach an attribute by its name as text
GETTERS = frozenset({"getattr", "hasattr", "setattr", "delattr", "attrgetter", "methodcaller"})


def _imported_from(node: ast.ImportFrom, module: str) -> str:
    """The module an ``import from`` reads (a relative import resolved against ``module``)."""
    if not node.level:
        return node.module or ""
    parts = ("labeldp/" + module).removesuffix(".py").split("/")  # a package's __init__ counts as a module in it
    return ".".join(parts[: len(parts) - node.level] + ([node.module] if node.module else []))


def _own_attributes(node: ast.ClassDef) -> set[str]:
    """What a class defines itself (its methods, what it assigns to ``self``): ``self._grid()`` in a class
    with a method ``_grid`` is its own, not PrivateLabels'."""
    own = set()
    for child in ast.walk(node):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            own.add(child.name)
        elif isinstance(child, ast.Attribute) and isinstance(child.ctx, ast.Store):
            if isinstance(child.value, ast.Name) and child.value.id in ("self", "cls"):
                own.add(child.attr)
        elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            own.add(child.id)
    return own


class _Reads(ast.NodeVisitor):
    """The reads of private labels' values in one module, by enclosing function (``Class.method``,
    ``function.inner``; ``<module>`` at the top level): every use of a reader (called or not, by any
    alias, by attribute or by ``getattr``), and outside the type's module every touch of its private
    attributes or private names."""

    def __init__(self, module: str, tree: ast.AST):
        self.module, self.inside = module, module == LABELS_MODULE
        self.scope: list[str] = []
        self.classes: list[set[str]] = []
        self.found: dict[str, list[int]] = {}
        self.names = set(READ_NAMES) | ({"_open"} if self.inside else set())
        for node in ast.walk(tree):  # the readers' local names: unseal as peek, from .labels import _open
            if isinstance(node, ast.ImportFrom):
                source = _imported_from(node, module)
                for alias in node.names:
                    if alias.name in READ_NAMES or (
                        source == "labeldp.boundary.labels" and alias.name in LABELS_PRIVATE
                    ):
                        self.names.add(alias.asname or alias.name)

    def _find(self, node: ast.AST) -> None:
        self.found.setdefault(".".join(self.scope) or "<module>", []).append(node.lineno)

    def _private(self, name: str) -> bool:
        return name in READ_NAMES or (not self.inside and name in PRIVATE_ATTRIBUTES | LABELS_PRIVATE)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        self.classes.append(_own_attributes(node))
        self.generic_visit(node)
        self.classes.pop()
        self.scope.pop()

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in self.names:
            self._find(node)

    def visit_Attribute(self, node: ast.Attribute) -> None:
        own = (
            bool(self.classes)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
            and node.attr in self.classes[-1]
        )
        if self._private(node.attr) and not own:
            self._find(node)
        self.generic_visit(node)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if not self.inside and _imported_from(node, self.module) == "labeldp.boundary.labels":
            if any(alias.name in LABELS_PRIVATE for alias in node.names):
                self._find(node)

    def visit_Call(self, node: ast.Call) -> None:
        called = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
        if called in GETTERS and any(
            isinstance(arg, ast.Constant) and isinstance(arg.value, str) and self._private(arg.value)
            for arg in node.args
        ):
            self._find(node)
        self.generic_visit(node)


def _reads(source: str, module: str) -> dict[str, list[int]]:
    tree = ast.parse(source)
    visitor = _Reads(module, tree)
    visitor.visit(tree)
    return visitor.found


def _documented_readers() -> dict[str, tuple[tuple[str, ...], str]]:
    """docs/ARCHITECTURE.md's table of readers: module -> (functions, why)."""
    lines = ARCHITECTURE.read_text().splitlines()
    start = lines.index("| module | functions | why they read true labels |") + 2
    table = {}
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        module, functions, why = (cell.strip() for cell in line.strip("|").split(" | "))
        table[module.strip("`")] = (tuple(re.findall(r"`([^`]+)`", functions)), why)
    return table


def test_every_read_of_private_labels_is_in_the_one_list_of_readers() -> None:
    """Every read of a private label's value in the package (a use of ``unseal`` or ``true_labels``
    under any name, a touch of PrivateLabels' private attributes or of its module's private names outside
    that module), by module and function: a new reader fails this test until it is added to
    :data:`READERS` on purpose, with why, and a reader that reads no more fails it until it is taken
    off."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        reads = _reads(path.read_text(), module)
        if reads:
            found[module] = reads
    listed = {module: set(functions) for module, (functions, _) in READERS.items()}
    unlisted = {
        module: {function: lines for function, lines in reads.items() if function not in listed.get(module, set())}
        for module, reads in found.items()
    }
    assert {module: reads for module, reads in unlisted.items() if reads} == {}, "readers missing from READERS"
    assert listed == {module: set(reads) for module, reads in found.items()}, "READERS names a function that reads none"


def test_the_architecture_shows_the_one_list_of_readers() -> None:
    assert _documented_readers() == READERS


@pytest.mark.parametrize(
    ("source", "where"),
    [
        ("from labeldp.boundary import unseal as peek\ndef f(y):\n    return peek(y)", "f"),
        ("import labeldp.boundary as b\nclass C:\n    def m(self, y):\n        return b.unseal(y) + 1", "C.m"),
        ("from labeldp.boundary import release\ndef f(y):\n    return release.true_labels(y, 2)", "f"),
        ("def f(y):\n    return y._root.values", "f"),
        ("def f(y):\n    def g():\n        return getattr(y, '_rows')\n    return g", "f.g"),
        ("from labeldp.boundary.labels import _open\nx = _open", "<module>"),
        ("def f(y):\n    from .labels import _Root as R\n    return R", "f"),
        ("readers = [__import__('labeldp').boundary.unseal]", "<module>"),
    ],
)
def test_a_read_is_found_by_any_name(source, where) -> None:
    assert where in _reads(source, "boundary/somewhere.py")
    relative = ast.parse("from .labels import _open").body[0]
    assert _imported_from(relative, "boundary/__init__.py") == _imported_from(relative, "boundary/release.py")


def test_a_class_s_own_private_attribute_is_not_a_read() -> None:
    """``self._grid()`` in a class that defines ``_grid`` is that class's (the regressor's), not PrivateLabels'."""
    own = "class R:\n    def _grid(self):\n        return 1\n    def f(self):\n        return self._grid()"
    assert _reads(own, "r.py") == {}
    assert _reads("class R:\n    def f(self, y):\n        return y._grid", "r.py") == {"R.f": [3]}


@pytest.mark.parametrize(
    "compute",
    [
        np.asarray,
        np.mean,
        lambda y: y == 1,
        list,
        bool,
        lambda y: y[0] + 1,
        pd.Series,
        pickle.dumps,
        lambda y: accuracy_score(y, np.zeros(len(y))),
        lambda y: np.concatenate([y, y]),
        lambda y: 1 in y,
        lambda y: np.asarray(y[:3]),
    ],
)
def test_any_computation_on_private_labels_fails_loudly(compute) -> None:
    labels = PrivateLabels(np.array([0, 1, 1, 0]), [0, 1])
    with pytest.raises(PrivateLabelAccessError):
        compute(labels)
    assert not issubclass(PrivateLabelAccessError, Exception)  # code that catches Exception cannot swallow it


def test_what_is_public_can_be_read() -> None:
    labels = PrivateLabels(pd.Series(["b", "a", "b", "c"]), ["a", "b", "c"])
    assert len(labels) == 4 and labels.shape == (4,) and labels.num_classes == 3 and labels.classes == ("a", "b", "c")
    view = labels[np.array([True, False, True, True])][1:]
    assert view.positions.tolist() == [2, 3] and unseal(view).tolist() == [1, 2]
    assert repr(view) == "PrivateLabels(2 rows of 4, classes ['a', 'b', 'c'])"  # the domain, no label
    with pytest.raises(ValueError):
        unseal(labels).__setitem__(0, 2)  # read-only: the labels as they entered never change


def test_errors_name_neither_a_label_nor_its_row_nor_how_many() -> None:
    for labels in (["a", "b", "secret-answer", "a"], ["a", None, "b", "b"]):
        with pytest.raises(DataError, match="outside the declared classes") as refused:
            PrivateLabels(labels, ["a", "b"])
        assert "secret" not in str(refused.value) and "2" not in str(refused.value) and "1" not in str(refused.value)
    with pytest.raises(DataError) as refused:
        PrivateLabels.from_indices(np.array([0, 1, 7]), 2)
    assert "7" not in str(refused.value)
    with pytest.raises(DataError, match="finite") as refused:
        PrivateLabels(np.array([1.5, np.nan, 3.25]))
    assert "1.5" not in str(refused.value) and "3.25" not in str(refused.value)


def test_views_share_one_release_whichever_asks_first() -> None:
    """Two views (the folds of a search) asking for the same release get the same draw, once; the
    labels' ledger records it over every row, and the view reads its own rows of it."""
    labels = PrivateLabels(np.arange(100) % 3, [0, 1, 2])
    draws = []

    def draw(everything, ledger):
        draws.append(len(everything))
        return release_randomized_response(ledger, everything, np.arange(len(everything)), 3, 1.0, rng=0).labels

    first = labels[:50].release_once("rr", randomized_response_event(1.0, 3), draw)
    second = labels[50:].release_once("rr", randomized_response_event(1.0, 3), draw)
    assert first is second and draws == [100] and len(labels.ledger.entries) == 1
    assert labels.ledger.epsilon() == pytest.approx(1.0, abs=1e-3)


def test_threads_asking_at_once_draw_once() -> None:
    labels = PrivateLabels(np.arange(1000) % 2, [0, 1])
    draws, results = [], []

    def draw(everything, ledger):
        draws.append(1)
        return release_randomized_response(ledger, everything, np.arange(len(everything)), 2, 1.0).labels

    threads = [
        threading.Thread(
            target=lambda i=i: results.append(
                labels[i * 100 : (i + 1) * 100].release_once("rr", randomized_response_event(1.0, 2), draw)
            )
        )
        for i in range(8)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert draws == [1] and all(result is results[0] for result in results)


def test_a_second_release_of_the_same_rows_needs_a_budget_that_can_pay_it() -> None:
    def draw(view, ledger):
        return release_randomized_response(ledger, view, np.arange(len(view)), 2, 1.0).labels

    bound = randomized_response_event(1.0, 2)
    once = PrivateLabels(np.arange(10) % 2, [0, 1])
    once[:5].release_new(bound, draw)
    once[5:].release_new(bound, draw)  # other rows: parallel composition, no second spend
    with pytest.raises(PrivateLabelAccessError, match="released already"):
        once[3:7].release_new(bound, draw)
    assert once.ledger.epsilon() == pytest.approx(1.0, abs=1e-3)
    budget = LabelBudget(2.5)
    capped = PrivateLabels(np.arange(10) % 2, [0, 1], budget=budget)
    capped.release_new(bound, draw)
    capped.release_new(bound, draw)
    with pytest.raises(BudgetError, match="refused before anything was drawn"):
        capped.release_new(bound, draw)
    assert budget.spent == pytest.approx(2.0, abs=1e-3) and len(capped.ledger.entries) == 2
    with pytest.raises(ValueError, match="one set of private labels"):
        PrivateLabels(np.arange(10) % 2, [0, 1], budget=budget)


def test_withheld_labels_cannot_be_read_even_by_the_boundary() -> None:
    withheld = PrivateLabels.withheld(5, 3)
    with pytest.raises(PrivateLabelAccessError, match="withheld"):
        unseal(withheld[:2])
    with pytest.raises(PrivateLabelAccessError, match="withheld"):
        release_randomized_response(None, withheld, np.arange(5), 3, 1.0)


def test_numeric_labels_on_a_grid_snap_as_the_datasets_do() -> None:
    values = np.array([-3.0, 0.4, 0.5, 1.7, 2.5, 9.0])
    grid = np.array([0.0, 1.0, 2.0, 3.0])
    assert unseal(PrivateLabels(values).on_grid(grid)).tolist() == snap_to_grid(values, grid).tolist()
    planted = PrivateLabels.from_indices(np.array([0, 1, 2]), 3).replaced([1], [0])
    assert unseal(planted).tolist() == [0, 0, 2]
    joined = PrivateLabels.concatenate([planted, PrivateLabels.public([2, 2], 3)])
    assert unseal(joined).tolist() == [0, 0, 2, 2, 2] and joined.ledger.entries == ()


def test_nothing_built_from_withheld_labels_can_be_released() -> None:
    """A copy or a concatenation of withheld labels would be new labels the boundary could release
    (of placeholder values): both are refused where the values are read."""
    withheld = PrivateLabels.withheld(10, 3)
    with pytest.raises(PrivateLabelAccessError):
        withheld.replaced([0], [1])
    with pytest.raises(PrivateLabelAccessError):
        PrivateLabels.concatenate([withheld, PrivateLabels.public(np.zeros(2, dtype=int), 3)])


def test_only_labels_over_the_same_classes_are_concatenated() -> None:
    """Labels over other declared classes, even as many, are not joined under the first part's."""
    ab = PrivateLabels(np.array(["a", "b"]), classes=["a", "b"])
    xy = PrivateLabels(np.array(["x", "y"]), classes=["x", "y"])
    with pytest.raises(ConfigError, match="same classes"):
        PrivateLabels.concatenate([ab, xy])
    assert len(PrivateLabels.concatenate([ab[[1]], ab[[0]]])) == 2
    with pytest.raises(ConfigError, match="hold a label twice"):  # a release would draw it twice
        PrivateLabels.concatenate([ab, ab[[1]]])
    with pytest.raises(ConfigError, match="hold a row twice"):
        ab[[0, 0, 1]].release_new(randomized_response_event(1.0, 2), lambda labels, ledger: None)


def test_planting_class_labels_needs_class_labels() -> None:
    """Numeric labels are refused with a sentence, and a domain of fewer than two classes at once."""
    with pytest.raises(ConfigError, match="class labels"):
        PrivateLabels(np.array([1.5, 2.5])).replaced([0], [1])
    with pytest.raises(ConfigError, match="at least 2"):
        PrivateLabels.from_indices(np.zeros(3, dtype=int), 1)


#: the rows every release below is tried on, and each release of them (ledger, labels) -> a release
ROWS = np.arange(4)
RELEASES_OF_LABELS = {
    "randomized_response": lambda ledger, y: release_randomized_response(ledger, y, ROWS, 2, 1.0, 0),
    "rr_with_prior": lambda ledger, y: release_rr_with_prior(ledger, y, ROWS, np.full((4, 2), 0.5), 1.0, 0),
    "rr_on_bins": lambda ledger, y: release_rr_on_bins(ledger, y, ROWS, [0.0, 1.0], [0.5, 0.5], 1.0, 0),
    "laplace_value": lambda ledger, y: release_laplace_value(ledger, y, ROWS, [0.0, 1.0], 1.0, 0),
    "laplace_one_hot": lambda ledger, y: release_laplace_one_hot(ledger, y, ROWS, 2, 1.0, 0),
    "vector_labels": lambda ledger, y: release_vector_labels(ledger, y, ROWS, 2, 1.0, 0),
    "true_labels": lambda ledger, y: release_true_labels(ledger, y, ROWS, 2),
    "external_labels": lambda ledger, y: release_external_labels(ledger, y, ROWS, flip_channel(0.25)),
    "noisy_histogram": lambda ledger, y: release_noisy_histogram(ledger, y, ROWS, [0, 0, 1, 1], 2, 2, 1.0, 0),
    "label_marginals": lambda ledger, y: release_label_marginals(ledger, y, ROWS, ROWS[:, None] % 2, [2], 2, 1.0, 0),
    "randomized_response_part": lambda ledger, y: release_randomized_response_part(
        ledger, y, ROWS, ROWS, 2, 1.0, 0, None, lambda part: [part]
    ),
    "hashed_counts": lambda ledger, y: release_hashed_counts(
        ledger, [(ROWS, ROWS[:, None] % 2, y)], ROWS, 2, 1, 2, 1.0, 0
    ),
}


@pytest.mark.parametrize("release", RELEASES_OF_LABELS.values(), ids=RELEASES_OF_LABELS.keys())
def test_a_release_refuses_a_plain_array_where_private_labels_are_meant(release) -> None:
    """No release takes true labels as a plain array (internal code cannot carry them so): refused
    before anything is drawn or recorded; the same labels wrapped as PrivateLabels are released."""
    y, ledger = np.array([0, 1, 1, 0]), PrivacyLedger(4)
    for plain in (y, y.tolist(), pd.Series(y)):
        with pytest.raises(ConfigError, match="read as PrivateLabels only"):
            release(ledger, plain)
    assert ledger.entries == ()
    release(ledger, PrivateLabels.from_indices(y, 2))
    assert len(ledger.entries) == 1


def test_the_readers_refuse_a_plain_array() -> None:
    """``unseal`` and the releases' ``true_labels`` read PrivateLabels only: an array was handed back
    as it was, taken for true labels."""
    for plain in (np.array([0, 1]), [0, 1], None):
        with pytest.raises(ConfigError, match="got (numpy.ndarray|builtins.list|builtins.NoneType)"):
            unseal(plain)
        with pytest.raises(ConfigError, match="read as PrivateLabels only"):
            true_labels(plain, 2)
    assert true_labels(PrivateLabels.from_indices([0, 1], 2), 2).tolist() == [0, 1]
