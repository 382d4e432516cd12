"""Private labels as a type: true labels that only the release boundary and the private-side trainers open.

The true labels of a dataset enter labeldp wrapped in a :class:`PrivateLabels`. It knows its length,
its public label domain and which rows it holds, and nothing else can be read from it: turning it into
an array (``numpy.asarray``, which every numpy, pandas and scikit-learn function calls), iterating,
comparing, converting to a number or pickling it raises :class:`PrivateLabelAccessError`. So a metric,
a scorer, a stratified split or a worker process that tries to compute on private labels fails loudly
instead of computing on them.

Exactly one function reads them: :func:`unseal`, which takes nothing but ``PrivateLabels`` (true
labels are wrapped at the line that reads them, never carried as a plain array). It is called by the
release boundary (:mod:`labeldp.boundary`: its releases), which randomises the labels and records the
spend, and by the private-side trainers, which read them inside the mechanism they implement (DP-SGD's
noised gradient steps, PATE's teachers, DP-SGD's private selection). ``tests/boundary/test_labels.py``
holds the one list of the functions that read them (``docs/ARCHITECTURE.md`` shows it) and fails on a
read anywhere else: a use of ``unseal`` under any name, or a touch of this module's private names.

**Release once, shared.** Every view of the same labels (``labels[rows]``, as scikit-learn's
cross-validation takes them) shares one *root*: the labels as they entered, the releases made of them,
their ledger and their budget. :meth:`PrivateLabels.release_once` draws a release of the root's rows
the first time a given release is asked for and returns the same release to every later fit, fold or
candidate that asks for it (what a search's folds share). A release that cannot be shared is drawn by
:meth:`PrivateLabels.release_new`. Without a :class:`LabelBudget`, no row is released twice; with one,
a release is drawn only if the composition of what the root's rows have spent (per row, with
dp_accounting) stays within it.

The labels never leave the process they entered: a copy in another process would release them again
with a ledger and budget of its own. Pickling is refused (joblib's process workers, ``n_jobs`` > 1
with the default backend, cannot receive them; its threading backend shares them, and the root's lock
makes each release happen once), and labels that reached another process without pickling (a fork:
``multiprocessing``'s default on Linux, a pool's workers) are refused there by the process id they
were made in, whatever started the process.
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
from labeldp.accounting.datasets import DatasetLedger, Spend, total_epsilon
from labeldp.accounting.rounding import format_epsilon
from labeldp.boundary.budget import LabelBudget
from labeldp.boundary.domain import LabelDomain
from labeldp.errors import BudgetError, ConfigError, DataError

T = TypeVar("T")

#: how to release labels once and search on the release: shown wherever code tries to read private labels
RELEASE_ONCE_ROUTE = (
    "Release them once and compute on the release, which is free:\n"
    "    released = labeldp.privatize(y, classes=classes, epsilon=1.0)   # one release, one spend\n"
    "    GridSearchCV(LabelDPClassifier(...), grid, scoring=labeldp.released_scorer('roc_auc')).fit(X, released)"
)


class PrivateLabelAccessError(BaseException):
    """Code tried to compute on private labels outside the release boundary.

    A ``BaseException`` (like ``KeyboardInterrupt`` and pytest's outcomes), not an ``Exception``: code
    that catches ``Exception`` and carries on (scikit-learn's ``error_score``, which turns a failed
    scorer into a NaN score) cannot swallow it. ``labeldp`` on the command line reports it as an error.

    Parameters
    ----------
    *args : object
        As for ``BaseException``: labeldp gives one message, which says what was tried and, where it
        helps, how to release once and compute on the release (:data:`RELEASE_ONCE_ROUTE`).
    """


class LabelsInAnotherProcessError(PrivateLabelAccessError, Exception):
    """Private labels were pickled for another process, or reached one without pickling (a fork).

    Also an ``Exception``: a process pool hands it back to the caller, which raises it (a
    ``BaseException`` kills a pool's worker or its task thread, and the caller waits forever).
    Swallowing it is harmless: nothing was drawn.
    """


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
        self.dataset: DatasetLedger | None = None  # the named dataset's ledger, across runs
        self.name = f"labels {uuid.uuid4()}"  # this set of labels' line on that ledger

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
        """Refuse a read in a process other than the one the labels were made in (a fork copies them
        without pickling, with a ledger and budget that the parent never sees)."""
        if os.getpid() != self.process:
            raise LabelsInAnotherProcessError(
                f"these labels were made in process {self.process} and reached process {os.getpid()} without "
                "pickling (a fork, a multiprocessing pool's worker): a release here would have a ledger and budget "
                "of its own that the first process never sees, so labeldp refuses it. Release them in the process "
                "that made them, before the workers start, and hand the workers the release. " + RELEASE_ONCE_ROUTE
            )


#: where in scikit-learn a search reads its labels, and the argument that makes it read none
_SEARCH_ARGUMENTS = (
    ("sklearn.model_selection._split", "cv: a stratified split (cv=5 on a classifier) reads the labels; pass "
     "cv=KFold(5) (or any split that reads no label). "),
    ("sklearn.metrics._scorer", "scoring: a metric of scikit-learn reads the labels; pass "
     "scoring=labeldp.released_scorer('roc_auc') (or 'accuracy'), which scores the fold's released labels. "),
    ("sklearn.metrics", "a metric of scikit-learn reads the labels; score released labels with "
     "labeldp.released_scorer. "),
)  # fmt: skip


def _the_argument_to_change() -> str:
    """The argument of a scikit-learn search that made it read private labels, from the call stack."""
    import traceback

    modules = [frame.filename for frame in traceback.extract_stack()]
    for module, advice in _SEARCH_ARGUMENTS:
        if any(module.replace(".", "/") in path for path in modules):
            return "Change " + advice
    return ""


class PrivateLabels:
    """True labels of ``n`` rows over a public label domain, readable only through :func:`unseal`.

    What can be read: ``len(labels)``, ``labels.shape``, ``labels.classes``, ``labels.num_classes``
    (public) and ``labels.positions`` (which rows of the labels as they entered a view holds).
    ``labels[rows]`` (indices, a slice or a boolean mask) is a view of the same labels.

    Parameters
    ----------
    labels : array_like or pandas.Series
        The true labels, one per row (numpy, pandas or a list).
    classes : sequence or None, optional
        The label domain, in order (public: declared, never read off the labels). Each label is
        matched to it as text (``1``, ``1.0`` and ``true`` are one value); a label outside it, or a
        missing one, is an error that names neither the label, nor its row, nor how many there are.
        Leave it out for numeric labels (a regression), which are kept as finite numbers.
    budget : LabelBudget or None, optional
        A :class:`LabelBudget` that lets the labels be released more than once, up to its
        epsilon; without one, each row is released at most once.
    dataset : str or None, optional
        The dataset's name (public): every release of these labels joins that dataset's ledger across
        runs and sessions (``docs/dataset-ledger.md``), with every other ``PrivateLabels`` of the name,
        and ``$LABELDP_TOTAL_EPSILON`` caps it there.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``labels`` are private already, ``classes`` are not at least two distinct values, or
        ``budget`` caps other labels already.
    labeldp.errors.DataError
        If a label is missing or outside ``classes``, or, without ``classes``, the labels are not a
        non-empty 1-d array of finite numbers.
    """

    __slots__ = ("_root", "_rows", "_classes", "_num_classes", "_grid")

    def __init__(
        self,
        labels,
        classes: Sequence[Any] | None = None,
        *,
        budget: LabelBudget | None = None,
        dataset: str | None = None,
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
            root.dataset = DatasetLedger.of({"name": dataset})
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
        """Labels given as class positions in [0, ``num_classes``) (what a dataset loader reads).

        Parameters
        ----------
        indices : array_like of int
            (n,) the true labels' class positions (integers, or floats holding whole numbers).
        num_classes : int
            K, the size of the label domain.
        classes : sequence or None, optional
            The declared label values, in order (default None: the labels carry positions only).

        Returns
        -------
        PrivateLabels
            New labels, with no release and no budget.

        Raises
        ------
        labeldp.errors.DataError
            If ``indices`` is not a non-empty 1-d array of whole numbers in [0, num_classes) (which
            labels are not, and how many, is not said).
        labeldp.errors.ConfigError
            If ``num_classes`` is not an integer of at least 2.
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
        """Labels nobody can open, not even the boundary: ``size`` rows whose true labels were held back
        (what a tuning candidate holds: it may only read releases).

        Parameters
        ----------
        size : int
            The number of rows.
        num_classes : int
            K, the size of the label domain.

        Returns
        -------
        PrivateLabels
            Labels that :func:`unseal` and every release refuse (:class:`PrivateLabelAccessError`).
        """
        root = _Root(np.zeros(int(size), dtype=np.int64), None)
        root.withheld = True
        return cls._make(root, None, None, int(num_classes))

    @classmethod
    def concatenate(cls, parts: Sequence[PrivateLabels]) -> PrivateLabels:
        """New labels: the rows of ``parts``, one after the other (e.g. the training labels and an
        auditor's canaries). The result is a new set of labels, with no release and no budget.

        Parameters
        ----------
        parts : sequence of PrivateLabels
            The labels to join, over the same classes.

        Returns
        -------
        PrivateLabels
            New labels: what has been released of the parts is not carried over.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``parts`` is empty or holds something other than PrivateLabels, or the parts differ in
            their classes (number or declared values), or one of them is on a grid.
        PrivateLabelAccessError
            If a part was withheld.
        """
        parts = list(parts)
        if not parts or any(not isinstance(part, PrivateLabels) for part in parts):
            raise ConfigError("concatenate takes a non-empty sequence of PrivateLabels")
        domains = {(part._num_classes, part._classes) for part in parts}
        if len(domains) != 1 or any(part._grid is not None for part in parts):
            raise ConfigError("only labels over the same classes can be concatenated")
        root = _Root(np.concatenate([_open(part) for part in parts]), None)
        root.dataset = next((part._root.dataset for part in parts if part._root.dataset is not None), None)
        return cls._make(root, None, parts[0]._classes, parts[0]._num_classes)

    @classmethod
    def public(cls, indices, num_classes: int) -> PrivateLabels:
        """Labels that are not private (an auditor's planted canary labels) in the same type, so that
        they can be concatenated with private ones.

        Parameters
        ----------
        indices : array_like of int
            (n,) class positions in [0, num_classes).
        num_classes : int
            K, the size of the label domain.

        Returns
        -------
        PrivateLabels
            As :meth:`from_indices` returns them (without classes).

        Raises
        ------
        labeldp.errors.DataError
            If ``indices`` is not a non-empty 1-d array of whole numbers in [0, num_classes).
        """
        return cls.from_indices(indices, num_classes)

    def replaced(self, rows, indices) -> PrivateLabels:
        """New labels: these, with the rows ``rows`` given the class positions ``indices`` (an auditor's
        planted labels, which are the auditor's own). A new set of labels, with no release.

        The true labels are copied into the new set, inside the boundary; nothing is released.

        Parameters
        ----------
        rows : array_like of int
            Rows of this view.
        indices : array_like of int
            The planted class positions, one per row of ``rows``, in [0, num_classes).

        Returns
        -------
        PrivateLabels
            New labels with this view's classes, no release and no budget.

        Raises
        ------
        labeldp.errors.DataError
            If ``indices`` is not a non-empty 1-d array of whole numbers in [0, num_classes).
        labeldp.errors.ConfigError
            For numeric labels (class labels only).
        PrivateLabelAccessError
            If these labels were withheld.
        """
        if self._num_classes is None:
            raise ConfigError("replaced plants class labels: these labels are numbers (a regression)")
        values = _open(self).copy()
        planted = PrivateLabels.from_indices(indices, self._num_classes)
        values[np.asarray(rows, dtype=np.int64)] = _open(planted)
        root = _Root(values, None)
        root.dataset = self._root.dataset  # releases of them are releases of these labels' dataset too
        return PrivateLabels._make(root, None, self._classes, self._num_classes)

    # -- what is public --------------------------------------------------------------------------
    def __len__(self) -> int:
        return self._root.values.size if self._rows is None else self._rows.size

    @property
    def shape(self) -> tuple[int]:
        """The view's shape, as an array's (public).

        Returns
        -------
        tuple of int
            ``(len(self),)``.
        """
        return (len(self),)

    @property
    def size(self) -> int:
        """The view's number of rows (public).

        Returns
        -------
        int
            ``len(self)``.
        """
        return len(self)

    @property
    def ndim(self) -> int:
        """The number of dimensions, as an array's.

        Returns
        -------
        int
            1.
        """
        return 1

    @property
    def num_classes(self) -> int | None:
        """The size of the label domain (None for numeric labels not yet put on a grid).

        Returns
        -------
        int or None
            K, or the number of grid points of labels put on a grid.
        """
        return self._num_classes

    @property
    def classes(self) -> tuple | None:
        """The declared label values, in order (None when the labels were given as positions).

        Returns
        -------
        tuple or None
            The classes (public).
        """
        return self._classes

    @property
    def is_numeric(self) -> bool:
        """Whether these are numeric labels (a regression) not yet put on a grid.

        Returns
        -------
        bool
            True when the labels have no label domain.
        """
        return self._num_classes is None

    @property
    def positions(self) -> np.ndarray:
        """Which rows of the labels as they entered this view holds (public: row numbers, no label).

        Returns
        -------
        numpy.ndarray
            (len(self),) int64 row numbers, a copy.
        """
        return np.arange(self._root.values.size) if self._rows is None else self._rows.copy()

    @property
    def covers_all(self) -> bool:
        """Whether this view holds every row of the labels as they entered, in order.

        Returns
        -------
        bool
            True for the labels as they entered, or a view of all their rows in order.
        """
        return self._rows is None or np.array_equal(self._rows, np.arange(self._root.values.size))

    @property
    def ledger(self) -> PrivacyLedger:
        """What the releases of these labels have spent, per row of the labels as they entered.

        Returns
        -------
        PrivacyLedger
            The ledger shared by every view of the labels (members: rows of the labels as they entered).
        """
        return self._root.ledger

    @property
    def budget(self) -> LabelBudget | None:
        """The cap on what the releases of these labels may spend together.

        Returns
        -------
        LabelBudget or None
            The budget given when the labels entered; None: each row is released at most once.
        """
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
        """Numeric labels as positions on a public grid: each value clipped to the grid's range and
        snapped to its nearest point (ties to the lower), a view of the same labels (their releases
        are releases of these labels).

        Parameters
        ----------
        grid : array_like
            The public grid: at least 2 strictly increasing finite values.

        Returns
        -------
        PrivateLabels
            A view whose values are grid positions, with ``num_classes`` the number of grid points.

        Raises
        ------
        labeldp.errors.ConfigError
            If these labels are not numeric, or ``grid`` is not at least 2 strictly increasing finite
            values.
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
            _the_argument_to_change()
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
        """The release ``key`` of every row of these labels as they entered: drawn by ``draw(labels,
        ledger)`` the first time it is asked for (``labels`` all rows, in order; ``ledger`` one over
        them, on which the release records its events), the same object every later time, whichever view
        asks. ``key`` must name everything the release depends on (mechanism, epsilon, prior, noise
        source), so that two requests with one key may share it. ``bound`` is an event that dominates
        what the release records on each row, checked against the budget before anything is drawn.

        Releases what ``draw`` releases of every row's true label, under the guarantee of the events
        it records: they are recorded, per row, on these labels' ledger (:attr:`ledger`) and charged to
        their budget. A release shared with an earlier request is returned without a new draw or a new
        charge.

        Parameters
        ----------
        key : hashable
            Names the release and everything it depends on.
        bound : dp_accounting.dp_event.DpEvent
            An event that dominates what ``draw`` records on each row.
        draw : callable
            ``draw(labels, ledger)`` -> the release: reads ``labels`` (all rows, in order) with
            :func:`unseal`, randomises them and records its events on ``ledger``.

        Returns
        -------
        object
            What ``draw`` returned, the first time or any later time.

        Raises
        ------
        PrivateLabelAccessError
            If the labels were withheld, or (without a budget) some of their rows were released before.
        labeldp.errors.BudgetError
            If, with a budget, ``bound`` on every row could take the labels past it.
        """
        root = self._root
        with root.lock:
            if key not in root.shared:
                everything = PrivateLabels._make(root, None, self._classes, self._num_classes, self._grid)
                root.shared[key] = everything._draw(bound, np.arange(root.values.size), draw)
            return root.shared[key]

    def release_new(self, bound: dp_event.DpEvent, draw: Callable[[PrivateLabels, PrivacyLedger], T]) -> T:
        """A release of this view's rows that nothing else shares (it depends on more than public
        settings, e.g. on a model trained on an earlier part of it): drawn by ``draw(labels, ledger)``
        with ``ledger`` over this view's rows; checked first, with ``bound``, against the budget.

        Releases what ``draw`` releases of this view's true labels, under the guarantee of the events
        it records: they are recorded, per row, on these labels' ledger (:attr:`ledger`) and charged to
        their budget.

        Parameters
        ----------
        bound : dp_accounting.dp_event.DpEvent
            An event that dominates what ``draw`` records on each row.
        draw : callable
            ``draw(labels, ledger)`` -> the release: reads ``labels`` (this view) with :func:`unseal`,
            randomises them and records its events on ``ledger`` (members: positions in this view).

        Returns
        -------
        object
            What ``draw`` returned.

        Raises
        ------
        PrivateLabelAccessError
            If the labels were withheld, or (without a budget) some of this view's rows were released
            before.
        labeldp.errors.BudgetError
            If, with a budget, ``bound`` on this view's rows could take the labels past it.
        """
        with self._root.lock:
            return self._draw(bound, self.positions, draw)

    def shared_release(self, key: Hashable) -> Any | None:
        """The release ``key`` drawn by :meth:`release_once` (None if there is none yet).

        Reads no label and releases nothing: it returns what was released before.

        Parameters
        ----------
        key : hashable
            The key the release was drawn under.

        Returns
        -------
        object or None
            The release, or None.
        """
        return self._root.shared.get(key)

    def _draw(
        self, bound: dp_event.DpEvent, members: np.ndarray, draw: Callable[[PrivateLabels, PrivacyLedger], T]
    ) -> T:
        root = self._root
        self._check_spend(bound, members)
        ledger = PrivacyLedger(members.size)
        result = draw(self, ledger)
        for entry in ledger.entries:  # the rows' spend, in the numbering of the labels as they entered
            mask = np.zeros(root.values.size, dtype=bool)
            mask[members[entry.members]] = True
            root.ledger.record(entry.event, mask, entry.description)
        if root.dataset is not None:
            root.dataset.record(Spend.of_ledger(root.name, "PrivateLabels", root.ledger, root.delta(), None))
        return result

    def _check_spend(self, bound: dp_event.DpEvent, members: np.ndarray) -> None:
        """Refuse, before anything is drawn, a release that rows already released may not pay for."""
        root = self._root
        root.check_process()
        if root.dataset is not None:  # the named dataset's total, every other set of its labels included
            trial = root.trial(bound, members)
            epsilon = trial.epsilon(root.delta())
            root.dataset.check(Spend(root.name, "PrivateLabels", epsilon, root.delta(), None, epsilon), total_epsilon())
        if root.withheld:
            raise PrivateLabelAccessError(
                "these labels were withheld: they can be read only through the releases "
                "made before (a tuning candidate never releases)"
            )
        touched = np.zeros(root.values.size, dtype=bool)
        for entry in root.ledger.entries:
            touched |= entry.members
        if not touched[members].any():
            return
        if root.budget is None:  # loud: a search must stop here, not score the rest of its grid as NaN
            raise PrivateLabelAccessError(
                f"{int(touched[members].sum()):,} of these {members.size:,} rows were released already, and "
                "another release would spend their budget again. Fits and folds that can share one release do so "
                "(LabelDPClassifier with stages=1, LabelDPRegressor, with the same epsilon and noise settings); a "
                "release that depends on the model, on the rows of a fit or on a searched epsilon cannot be shared. "
                "To allow more releases of the same labels, cap them: PrivateLabels(y, classes=..., "
                "budget=LabelBudget(total_epsilon)). " + RELEASE_ONCE_ROUTE
            )
        after = root.trial(bound, members).epsilon(root.budget.delta)
        if after > root.budget.epsilon + 1e-9:
            raise BudgetError(
                f"this release could take these labels to epsilon {format_epsilon(after, 4)}, past their "
                f"budget {root.budget.epsilon:g} (spent: {format_epsilon(root.budget.spent, 4)}): "
                "refused before anything was drawn. " + RELEASE_ONCE_ROUTE
            )


def unseal(labels: PrivateLabels) -> np.ndarray:
    """The true values behind private ``labels`` (class positions, grid positions, or numbers), in the
    view's row order.

    The one way to read private labels. Call it only in the release boundary or a private-side trainer
    (see the module docstring); ``tests/boundary/test_labels.py`` lists every function that does. It
    takes nothing but :class:`PrivateLabels`: true labels are wrapped where they are read (a loader,
    :func:`~labeldp.boundary.privatize`), so no code carries them as a plain array.

    It releases nothing and records nothing: the caller must randomise what it reads and record the
    spend (:meth:`PrivateLabels.release_once`, :meth:`PrivateLabels.release_new`).

    Parameters
    ----------
    labels : PrivateLabels
        Private labels (a view).

    Returns
    -------
    numpy.ndarray
        (n,) the true values, read-only: int64 class or grid positions, or float64 numbers.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``labels`` is not :class:`PrivateLabels` (a plain array is not taken as true labels).
    PrivateLabelAccessError
        If the labels were withheld.
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
    """The view's values, read-only (the labels as they entered are never changed); withheld labels
    are refused here, so that nothing built from them (a copy, a concatenation) can be released."""
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
