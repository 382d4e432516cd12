"""Private labels as a type: true labels that only the release boundary and the private-side trainers open.

A :class:`PrivateLabels` refuses every computation on its values (:class:`PrivateLabelAccessError`), so a
metric, a scorer, a stratified split or a worker process fails loudly instead of reading them;
:func:`unseal` is the one reader. What users' code meets is ``docs/threat-model.md``'s table.
"""

from __future__ import annotations

import os
import threading
import uuid
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np
from dp_accounting import dp_event

from labeldp.accounting import PrivacyLedger
from labeldp.accounting.policy import BudgetPolicy, Guarantee
from labeldp.accounting.rounding import format_epsilon
from labeldp.accounting.spending import Source, Spending
from labeldp.boundary.domain import LabelDomain
from labeldp.boundary.label_access import (
    RELEASE_ONCE_ROUTE,
    LabelsInAnotherProcessError,
    PrivateLabelAccessError,
    refuse_parallel_search,
    the_argument_to_change,
)
from labeldp.boundary.shared_budget import LabelBudget
from labeldp.errors import BudgetError, ConfigError, DataError

T = TypeVar("T")


class _Root:
    """The labels as they entered, and what has been released of them: shared by every view."""

    def __init__(self, values: np.ndarray, budget: LabelBudget | None):
        self.values = values
        self.ledger = PrivacyLedger(values.size)
        self.budget = budget
        if budget is not None:
            budget._bind(self.ledger)
        self.shared: dict[Hashable, Any] = {}
        self.lock = threading.RLock()
        self.withheld = False
        self.process = os.getpid()
        self.dataset: Spending | None = None  # the releases' spend on the named dataset's ledger, across runs
        self.name = f"labels#{uuid.uuid4().hex[:12]}"  # this set of labels' line on that ledger

    def delta(self) -> float:
        return self.budget.delta if self.budget is not None else 0.0

    def trial(self, bound: dp_event.DpEvent, members: np.ndarray) -> PrivacyLedger:
        """The ledger as it would be after a release dominated by ``bound`` on ``members``."""
        trial = PrivacyLedger(self.values.size)
        for entry in self.ledger.entries:
            trial.record(entry.event, entry.members, entry.description)
        mask = np.zeros(self.values.size, dtype=bool)
        mask[members] = True
        trial.record(bound, mask, "the new release")
        return trial

    def check_process(self) -> None:
        """Refuse a read in a process other than the one the labels were made in: a fork copies them without
        pickling, with a ledger and budget the parent never sees.
        """
        if os.getpid() != self.process:
            raise LabelsInAnotherProcessError(
                f"these labels were made in process {self.process} and reached process {os.getpid()} without "
                "pickling (a fork, a multiprocessing pool's worker): a release here would have a ledger and budget "
                "of its own that the first process never sees, so labeldp refuses it. Release them in the process "
                "that made them, before the workers start, and hand the workers the release. " + RELEASE_ONCE_ROUTE
            )


class PrivateLabels:
    """True labels of ``n`` rows over a public label domain, readable only through :func:`unseal`.

    Public: ``len(labels)``, ``shape``, ``classes``, ``num_classes`` and ``positions`` (which rows of the
    labels as they entered a view holds); ``labels[rows]`` (indices, a slice or a mask) is a view. Every view
    shares one root: the labels as they entered, their releases, their :attr:`ledger` and :attr:`budget`.
    :meth:`release_once` draws a release of all rows the first time it is asked for and hands every later fit,
    fold or candidate the same one; :meth:`release_new` draws one nothing shares. Without a budget no row is
    released twice. The labels never leave their process: pickling is refused (use joblib's threading
    backend, whose threads share one release), and a fork's copy is refused by process id.

    Parameters
    ----------
    labels : array_like or pandas.Series
        The true labels, one per row.
    classes : sequence or None, optional
        The label domain, in order: public, declared, never read off the labels. Labels are matched to it as
        text (``1``, ``1.0`` and ``true`` are one value); a label outside it or missing is an error naming
        neither the label, nor its row, nor how many. None for numeric labels (a regression), kept as finite
        numbers.
    budget : LabelBudget or None, optional
        Lets the labels be released more than once, while the composition of each row's spend stays within it.
    dataset, policy : optional
        The dataset's public name: every release joins its ledger across runs (``docs/dataset-ledger.md``), in
        the folder and under the cap of ``policy`` (None: :meth:`.BudgetPolicy.from_environment`).
    """

    __slots__ = ("_root", "_rows", "_classes", "_num_classes", "_grid")

    def __init__(
        self,
        labels,
        classes: Sequence[Any] | None = None,
        *,
        budget: LabelBudget | None = None,
        dataset: str | None = None,
        policy: BudgetPolicy | None = None,
    ):
        if isinstance(labels, PrivateLabels):
            raise ConfigError("these labels are private already: use them as they are")
        if classes is None:
            values = _numeric_values(labels)
            num_classes = None
        else:
            domain = LabelDomain(classes)
            classes = domain.declared
            values = domain.positions(labels, "the labels")
            num_classes = domain.size
        root = _Root(values, budget)
        if dataset is not None:
            policy = policy or BudgetPolicy.from_environment()
            root.dataset = Spending(policy, Source(name=dataset), root.name, "PrivateLabels")
        self._init(root, None, classes, num_classes, None)

    def _init(
        self,
        root: _Root,
        rows: np.ndarray | None,
        classes: tuple | None,
        num_classes: int | None,
        grid: np.ndarray | None,
    ) -> None:
        self._root, self._rows, self._classes, self._num_classes, self._grid = root, rows, classes, num_classes, grid

    @classmethod
    def _make(
        cls,
        root: _Root,
        rows: np.ndarray | None,
        classes: tuple | None,
        num_classes: int | None,
        grid: np.ndarray | None = None,
    ) -> PrivateLabels:
        labels = object.__new__(cls)
        labels._init(root, rows, classes, num_classes, grid)
        return labels

    @classmethod
    def from_indices(cls, indices, num_classes: int, classes: Sequence[Any] | None = None) -> PrivateLabels:
        """Labels given as class positions in [0, ``num_classes``) (what a dataset loader reads), with no release
        and no budget.
        """
        if int(num_classes) != num_classes or num_classes < 2:
            raise ConfigError(f"num_classes must be an integer of at least 2, got {num_classes!r}")
        array = np.asarray(indices)
        if array.ndim != 1 or array.size == 0:
            raise DataError("labels must be a non-empty 1-d array")
        if array.dtype.kind == "f":
            if not (np.all(np.isfinite(array)) and np.all(array == np.round(array))):
                raise DataError("labels must be whole numbers (class positions)")
        elif array.dtype.kind not in "iu":
            raise DataError(f"class positions must be integers, got dtype {array.dtype}")
        positions = array.astype(np.int64)
        if positions.min() < 0 or positions.max() >= num_classes:
            raise DataError(
                f"labels must lie in [0, {num_classes}) (class positions); some do not (which, and how "
                "many, is not said: the labels are private)"
            )
        return cls._make(_Root(positions, None), None, None if classes is None else tuple(classes), int(num_classes))

    @classmethod
    def withheld(cls, size: int, num_classes: int) -> PrivateLabels:
        """``size`` rows whose true labels were held back: not even the boundary can open them (what a tuning
        candidate holds: it may only read earlier releases).
        """
        root = _Root(np.zeros(int(size), dtype=np.int64), None)
        root.withheld = True
        return cls._make(root, None, None, int(num_classes))

    @classmethod
    def concatenate(cls, parts: Sequence[PrivateLabels]) -> PrivateLabels:
        """New labels, the rows of ``parts`` (over the same classes) one after the other, e.g. training labels and
        an auditor's canaries; what was released of the parts is not carried over.
        """
        parts = list(parts)
        if not parts or any(not isinstance(part, PrivateLabels) for part in parts):
            raise ConfigError("concatenate takes a non-empty sequence of PrivateLabels")
        domains = {(part._num_classes, part._classes) for part in parts}
        if len(domains) != 1 or any(part._grid is not None for part in parts):
            raise ConfigError("only labels over the same classes can be concatenated")
        named = {getattr(p._root.dataset.source, "name", ""): p._root.dataset for p in parts if p._root.dataset}
        by_root: dict[int, list[np.ndarray]] = {}
        for part in parts:
            by_root.setdefault(id(part._root), []).append(part.positions)
        twice = any(np.unique(np.concatenate(p)).size < sum(map(len, p)) for p in by_root.values())
        if len(named) > 1 or twice:  # a label twice would be drawn twice, its person charged once
            raise ConfigError(f"these parts hold a label twice, or labels of datasets {sorted(named)}: one set each")
        root = _Root(np.concatenate([_open(part) for part in parts]), None)
        root.dataset = next((spending.renamed(root.name) for spending in named.values()), None)
        return cls._make(root, None, parts[0]._classes, parts[0]._num_classes)

    @classmethod
    def public(cls, indices, num_classes: int) -> PrivateLabels:
        """Labels that are not private (an auditor's planted canaries) in the same type, to concatenate with
        private ones.
        """
        return cls.from_indices(indices, num_classes)

    def replaced(self, rows, indices) -> PrivateLabels:
        """New labels: these with ``rows`` given the class positions ``indices`` (an auditor's planted labels,
        which are the auditor's own), copied inside the boundary; no release, no budget.
        """
        if self._num_classes is None:
            raise ConfigError("replaced plants class labels: these labels are numbers (a regression)")
        values = _open(self).copy()
        planted = PrivateLabels.from_indices(indices, self._num_classes)
        values[np.asarray(rows, dtype=np.int64)] = _open(planted)
        root = _Root(values, None)
        root.dataset = self._root.dataset and self._root.dataset.renamed(root.name)  # these labels' dataset's too
        return PrivateLabels._make(root, None, self._classes, self._num_classes)

    # -- what is public --------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._root.values.size if self._rows is None else self._rows.size

    @property
    def shape(self) -> tuple[int]:
        """``(len(self),)``, as an array's; a search that would copy the labels to other processes is refused."""
        refuse_parallel_search()
        return (len(self),)

    @property
    def size(self) -> int:
        """The view's number of rows."""
        return len(self)

    @property
    def ndim(self) -> int:
        """1, as an array's."""
        return 1

    @property
    def num_classes(self) -> int | None:
        """K, or the number of grid points of labels on a grid; None for numeric labels."""
        return self._num_classes

    @property
    def classes(self) -> tuple | None:
        """The declared label values, in order (None when the labels were given as positions)."""
        return self._classes

    @property
    def is_numeric(self) -> bool:
        """Whether these are numeric labels (a regression) not yet put on a grid."""
        return self._num_classes is None

    @property
    def positions(self) -> np.ndarray:
        """Which rows of the labels as they entered this view holds (a copy; row numbers, no label)."""
        return np.arange(self._root.values.size) if self._rows is None else self._rows.copy()

    @property
    def covers_all(self) -> bool:
        """Whether this view holds every row of the labels as they entered, in order."""
        return self._rows is None or np.array_equal(self._rows, np.arange(self._root.values.size))

    @property
    def ledger(self) -> PrivacyLedger:
        """What the releases of these labels have spent, shared by every view (members: rows as they entered)."""
        return self._root.ledger

    @property
    def budget(self) -> LabelBudget | None:
        """The cap on what the releases of these labels may spend together; None: each row is released once."""
        return self._root.budget

    def __getitem__(self, rows) -> PrivateLabels:
        if isinstance(rows, tuple) and rows and all(part is Ellipsis for part in rows[1:]):
            rows = rows[0]  # labels[rows, ...], as scikit-learn indexes arrays
        selected = np.arange(len(self))[rows] if isinstance(rows, slice) else np.asarray(rows)
        if selected.dtype == bool:
            if selected.shape != (len(self),):
                raise ConfigError(f"a row mask must have shape ({len(self)},), got {selected.shape}")
            selected = np.flatnonzero(selected)
        if selected.ndim != 1 or (selected.size and selected.dtype.kind not in "iu"):
            raise PrivateLabelAccessError(
                "private labels are indexed by rows only (an index array, a slice or a "
                "boolean mask); a single label cannot be read. " + RELEASE_ONCE_ROUTE
            )
        selected = selected.astype(np.int64)
        if selected.size and (selected.min() < -len(self) or selected.max() >= len(self)):
            raise ConfigError(f"row indices must lie in [0, {len(self)})")
        selected = np.where(selected < 0, selected + len(self), selected)
        rows_of_root = selected if self._rows is None else self._rows[selected]
        return PrivateLabels._make(self._root, rows_of_root, self._classes, self._num_classes, self._grid)

    def on_grid(self, grid) -> PrivateLabels:
        """A view of numeric labels as positions on the public ``grid``: clipped to its range, snapped to the
        nearest point (ties to the lower); its releases are releases of these labels.
        """
        if not self.is_numeric:
            raise ConfigError("only numeric labels (PrivateLabels without classes) are put on a grid")
        points = np.asarray(grid, dtype=np.float64)
        if points.ndim != 1 or points.size < 2 or not np.all(np.diff(points) > 0) or not np.all(np.isfinite(points)):
            raise ConfigError("a grid must be at least 2 strictly increasing finite values")
        return PrivateLabels._make(self._root, self._rows, None, int(points.size), points)

    def __repr__(self) -> str:
        domain = (
            f"classes {list(self._classes)}"
            if self._classes is not None
            else "numeric"
            if self.is_numeric
            else f"{self._num_classes} classes"
        )
        view = "" if self._rows is None else f" of {self._root.values.size:,}"
        return f"PrivateLabels({len(self):,} rows{view}, {domain})"

    # -- what is refused ---------------------------------------------------------------------------
    def _refuse(self, *args: Any, **kwargs: Any):
        raise PrivateLabelAccessError(
            the_argument_to_change()
            + "This code tried to compute on private labels (an array conversion, a comparison, iteration or "
            "pickling: a metric, a scorer, a stratified split or a worker process). Only the release "
            "boundary reads them. " + RELEASE_ONCE_ROUTE
        )

    def _refuse_to_leave(self, *args: Any, **kwargs: Any):
        raise LabelsInAnotherProcessError(
            "private labels do not leave the process they entered (pickling them for a worker process, e.g. "
            "n_jobs > 1 in scikit-learn): a copy would release them again with a ledger of its own. Use n_jobs=1, or "
            "joblib's threading backend (with joblib.parallel_backend('threading'): the threads share one release), "
            "or release once and hand the release to the workers. " + RELEASE_ONCE_ROUTE
        )

    __array__ = __iter__ = __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse
    __bool__ = __int__ = __float__ = __index__ = __contains__ = _refuse
    __reduce__ = __reduce_ex__ = __getstate__ = _refuse_to_leave
    __hash__ = object.__hash__

    def __array_ufunc__(self, *args: Any, **kwargs: Any):
        self._refuse()

    def __array_function__(self, *args: Any, **kwargs: Any):
        self._refuse()

    def __copy__(self) -> PrivateLabels:  # immutable: a copy is the same labels (and the same root)
        return self

    def __deepcopy__(self, memo: dict) -> PrivateLabels:
        return self

    # -- releasing -----------------------------------------------------------------------------------
    def release_once(
        self, key: Hashable, bound: dp_event.DpEvent, draw: Callable[[PrivateLabels, PrivacyLedger], T]
    ) -> T:
        """The release ``key`` of every row of the labels as they entered: drawn by ``draw(labels, ledger)`` the
        first time, the same object (no new draw, no new charge) every later time, whichever view asks.

        ``key`` must name everything the release depends on (mechanism, epsilon, prior, noise source).
        ``draw`` reads ``labels`` (all rows, in order) with :func:`unseal`, randomises them and records its
        events on ``ledger``; they are recorded per row on :attr:`ledger` and charged to the budget, under
        whose guarantee the release holds. ``bound``, an event dominating what ``draw`` records on each row, is
        checked against the budget before anything is drawn.

        Raises :class:`PrivateLabelAccessError` for withheld labels or, without a budget, rows released before;
        :class:`~labeldp.errors.BudgetError` if ``bound`` could take the labels past their budget.
        """
        root = self._root
        with root.lock:
            if key not in root.shared:
                everything = PrivateLabels._make(root, None, self._classes, self._num_classes, self._grid)
                root.shared[key] = everything._draw(bound, np.arange(root.values.size), draw)
            return root.shared[key]

    def release_new(self, bound: dp_event.DpEvent, draw: Callable[[PrivateLabels, PrivacyLedger], T]) -> T:
        """A release of this view's rows that nothing shares (it depends on more than public settings, e.g. a
        model trained on an earlier part): as :meth:`release_once`, ``ledger``'s members being this view's positions.
        """
        with self._root.lock:
            return self._draw(bound, self.positions, draw)

    def shared_release(self, key: Hashable) -> Any | None:
        """The release ``key`` drawn by :meth:`release_once`, or None; reads no label."""
        return self._root.shared.get(key)

    def _draw(
        self, bound: dp_event.DpEvent, members: np.ndarray, draw: Callable[[PrivateLabels, PrivacyLedger], T]
    ) -> T:
        root = self._root
        self._check_spend(bound, members)
        ledger = PrivacyLedger(members.size)
        try:
            return draw(self, ledger)
        finally:  # what the draw released is spent, even where it fails afterwards (a fit between two releases)
            for entry in ledger.entries:  # the rows' spend, in the numbering of the labels as they entered
                mask = np.zeros(root.values.size, dtype=bool)
                mask[members[entry.members]] = True
                root.ledger.record(entry.event, mask, entry.description)
            if root.dataset is not None and ledger.entries:
                root.dataset.record(Guarantee.of_ledger(root.ledger, root.delta()))

    def _check_spend(self, bound: dp_event.DpEvent, members: np.ndarray) -> None:
        """Refuse, before anything is drawn, a release that rows already released may not pay for."""
        root = self._root
        root.check_process()
        if root.withheld:
            raise PrivateLabelAccessError(
                "these labels were withheld: they can be read only through the releases "
                "made before (a tuning candidate never releases)"
            )
        if np.unique(members).size < members.size:
            raise ConfigError("these labels hold a row twice (a repeated index): a release would draw it twice")
        touched = np.zeros(root.values.size, dtype=bool)
        for entry in root.ledger.entries:
            touched |= entry.members
        if touched[members].any() and root.budget is None:  # loud: a search must stop here, not score NaN
            raise PrivateLabelAccessError(
                f"{int(touched[members].sum()):,} of these {members.size:,} rows were released already, and "
                "another release would spend their budget again. Fits and folds that can share one release do so "
                "(LabelDPClassifier with stages=1, LabelDPRegressor, with the same epsilon and noise settings); a "
                "release that depends on the model, on the rows of a fit or on a searched epsilon cannot be shared. "
                "To allow more releases of the same labels, cap them: PrivateLabels(y, classes=..., "
                "budget=LabelBudget(total_epsilon)). " + RELEASE_ONCE_ROUTE
            )
        budget = root.budget
        after = root.trial(bound, members).epsilon(budget.delta) if budget and touched[members].any() else 0.0
        if budget is not None and after > budget.epsilon + 1e-9:
            raise BudgetError(
                f"this release could take these labels to epsilon {format_epsilon(after, 4)}, past their "
                f"budget {budget.epsilon:g} (spent: {format_epsilon(budget.spent, 4)}): "
                "refused before anything was drawn. " + RELEASE_ONCE_ROUTE
            )
        if root.dataset is not None:  # last: the named dataset's total, every other set of its labels included
            root.dataset.reserve(Guarantee.of_ledger(root.trial(bound, members), root.delta()), quiet=True)


def unseal(labels: PrivateLabels) -> np.ndarray:
    """The true values behind private ``labels`` in the view's row order, read-only: int64 class or grid
    positions, or float64 numbers.

    The one way to read private labels, called only by the release boundary and the private-side trainers
    (``tests/boundary/test_labels.py`` lists every caller). It takes nothing but :class:`PrivateLabels`
    (true labels are wrapped where they are read; a plain array raises
    :class:`~labeldp.errors.ConfigError`). It releases and records nothing: the caller randomises what it
    reads and records the spend.
    """
    if not isinstance(labels, PrivateLabels):
        given = f"{type(labels).__module__}.{type(labels).__qualname__}"
        raise ConfigError(
            f"private labels are read as PrivateLabels only, got {given}: "
            "wrap the true labels where they are read, PrivateLabels(y, classes=[...]) (or, for class positions, "
            "PrivateLabels.from_indices(positions, num_classes)); a plain array is not taken as true labels"
        )
    return _open(labels)


def _open(labels: PrivateLabels) -> np.ndarray:
    """The view's values, read-only; withheld labels are refused here, so nothing built from them (a copy, a
    concatenation) can be released.
    """
    labels._root.check_process()
    if labels._root.withheld:
        raise PrivateLabelAccessError(
            "these labels were withheld: they can be read only through the releases made "
            "before (a tuning candidate never releases)"
        )
    values = labels._root.values if labels._rows is None else labels._root.values[labels._rows]
    if labels._grid is not None:
        grid = labels._grid  # as labeldp.data.grid.snap_to_grid: clipped, nearest point, ties to the lower
        midpoints = (grid[1:] + grid[:-1]) / 2
        values = np.searchsorted(midpoints, np.clip(values, grid[0], grid[-1]), side="left").astype(np.int64)
    values = values.view()
    values.flags.writeable = False
    return values


def _numeric_values(labels) -> np.ndarray:
    try:
        values = np.asarray(labels, dtype=np.float64)
    except (TypeError, ValueError):
        raise DataError(
            "labels without declared classes must be numbers (a regression); for classes give classes=[...]"
        ) from None
    if values.ndim != 1 or values.size == 0:
        raise DataError("labels must be a non-empty 1-d array or Series")
    if not np.all(np.isfinite(values)):
        raise DataError("numeric labels must be finite (some are missing or infinite; which is not said)")
    return values


__all__ = ["LabelsInAnotherProcessError", "PrivateLabelAccessError", "PrivateLabels", "RELEASE_ONCE_ROUTE", "unseal"]
