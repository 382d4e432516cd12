"""Private labels as a type (boundary/labels.py, and the budget of boundary/budget.py, which has
little logic and shares this module): nothing but the release boundary and the private-side trainers
reads them, every attempt to compute on them fails loudly, and every view of them shares one release."""

from __future__ import annotations

import ast
import pickle
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score

from labeldp.accounting import randomized_response_event
from labeldp.boundary import LabelBudget, PrivateLabelAccessError, PrivateLabels, release_randomized_response, unseal
from labeldp.data.grid import snap_to_grid
from labeldp.errors import BudgetError, ConfigError, DataError

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "labeldp"
#: the only modules that read private labels: the release boundary, and the private-side trainers,
#: which read them inside the mechanism they implement (docs/ARCHITECTURE.md says why each one)
UNSEALED_IN = {
    "boundary/release.py",
    "boundary/release_hashed.py",
    "boundary/column.py",
    "dpsgd/trainer.py",
    "dpsgd/selection.py",
    "teachers.py",
}


def _calls(tree: ast.AST, name: str) -> list[int]:
    """Lines that call ``name`` (as a name or an attribute)."""
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) == name or getattr(node.func, "attr", None) == name)
    ]


def test_only_the_boundary_and_the_private_side_trainers_unseal_labels() -> None:
    """Every call of ``unseal`` in the package, by module: a new reader of private labels fails this test
    until it is added here (and to the architecture's list) on purpose. Nothing outside the type's own
    module reaches into its root."""
    callers, reaching_in = {}, []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        source = path.read_text()
        tree = ast.parse(source)
        if module == "boundary/labels.py":  # the type itself
            continue
        lines = _calls(tree, "unseal")
        if lines:
            callers[module] = lines
        reaching_in += [
            f"{module}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and node.attr == "_root"
        ]
    assert set(callers) == UNSEALED_IN, callers
    assert reaching_in == []


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
    assert len(PrivateLabels.concatenate([ab, ab[[1]]])) == 3


def test_planting_class_labels_needs_class_labels() -> None:
    """Numeric labels are refused with a sentence, and a domain of fewer than two classes at once."""
    with pytest.raises(ConfigError, match="class labels"):
        PrivateLabels(np.array([1.5, 2.5])).replaced([0], [1])
    with pytest.raises(ConfigError, match="at least 2"):
        PrivateLabels.from_indices(np.zeros(3, dtype=int), 1)
