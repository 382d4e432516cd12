"""The budget a user sets over their datasets (:class:`BudgetPolicy`) and what one release guarantees each
person under replace-one-label (:class:`Guarantee`), the relation every dataset ledger composes in
(``docs/dataset-ledger.md``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import dp_accounting
from dp_accounting.pld import pld_privacy_accountant

from labeldp.accounting.events import DPSGD_RELATION
from labeldp.errors import ConfigError

#: the variables :meth:`BudgetPolicy.from_environment` reads where the caller gives neither value
BUDGET_DIR_VARIABLE = "LABELDP_BUDGET_DIR"
TOTAL_EPSILON_VARIABLE = "LABELDP_TOTAL_EPSILON"
#: the relation every dataset ledger's epsilon is stated under
LABEL_RELATION = "replace-one label"


@dataclass(frozen=True)
class BudgetPolicy:
    """Where the dataset ledgers live, and the epsilon no group's worst person may pass (None: no cap).

    Built once at the edge (the command line, a public function) and passed to every route.
    """

    folder: Path
    total_epsilon: float | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "folder", Path(self.folder).expanduser())
        if self.folder.exists() and not self.folder.is_dir():
            raise ConfigError(f"the budget folder {self.folder} is a file: name a folder (--budget-dir DIR)")
        total = self.total_epsilon
        if total is not None and (isinstance(total, bool) or not (math.isfinite(total) and total > 0)):
            raise ConfigError(
                f"--total-epsilon must be a finite number above 0, got {total!r}; leave it out for no cap"
            )

    @classmethod
    def from_environment(cls, folder: str | os.PathLike | None = None, total_epsilon: float | None = None):
        """The policy given, each value left out read from ``$LABELDP_BUDGET_DIR`` and ``$LABELDP_TOTAL_EPSILON``
        (the folder's default: ``~/.local/share/labeldp/budget``, one per user, so that all their runs compose)."""
        if folder is None:
            folder = os.environ.get(BUDGET_DIR_VARIABLE) or Path(
                os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share", "labeldp", "budget"
            )
        if total_epsilon is None and os.environ.get(TOTAL_EPSILON_VARIABLE, "").strip():
            text = os.environ[TOTAL_EPSILON_VARIABLE]
            try:
                total_epsilon = float(text)
            except ValueError:
                raise ConfigError(
                    f"${TOTAL_EPSILON_VARIABLE} must be a number (a point for decimals: 1.5), got {text!r}"
                ) from None
        return cls(Path(folder), total_epsilon)


def group_bound(epsilon: float, delta: float, rows: int) -> tuple[float, float]:
    """What an (``epsilon``, ``delta``) guarantee per row gives ``rows`` rows changed together: (k epsilon,
    delta (1 + e^epsilon + ... + e^((k-1) epsilon))), the group privacy of k changes made one at a time."""
    if rows <= 1:
        return epsilon, delta
    if math.isinf(epsilon):
        return math.inf, delta
    spread = delta * sum(math.exp(i * epsilon) for i in range(rows)) if delta else 0.0
    return rows * epsilon, min(spread, 1.0)


@dataclass(frozen=True)
class Guarantee:
    """One release's guarantee under replace-one-label: (``epsilon``, ``delta``) per ``unit`` (a privacy unit
    column, None: each row), ``row_epsilon`` each row's own; ``private`` False for a reference run without
    privacy, which dataset ledgers keep apart."""

    epsilon: float
    delta: float
    unit: str | None = None
    row_epsilon: float | None = None
    private: bool = True

    @property
    def per_row(self) -> float:
        return self.epsilon if self.row_epsilon is None else self.row_epsilon

    @classmethod
    def of_ledger(cls, ledger, delta: float, unit: str | None = None) -> Guarantee:
        """What a run's :class:`~labeldp.accounting.PrivacyLedger` guarantees each row, or each ``unit`` where it
        composes per unit, converted to replace-one-label: an add-or-remove ledger (DP-SGD) is accounted again
        under replace-one by dp_accounting's PLD accountant, or given the group bound of two changes (a
        label replaced is its example removed and added again) where the accountant cannot (private
        selection, accounted by RDP)."""
        if ledger.neighboring_relation == DPSGD_RELATION:
            epsilon, delta = _replace_one(ledger, delta)
            return cls(epsilon, delta, None, epsilon, math.isfinite(epsilon))
        epsilon = ledger.epsilon(delta)
        if ledger.units is None:
            return cls(epsilon, delta, None, epsilon, math.isfinite(epsilon))
        return cls(epsilon, delta, unit, ledger.row_epsilon(delta), math.isfinite(epsilon))


def _replace_one(ledger, delta: float) -> tuple[float, float]:
    accountant = pld_privacy_accountant.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    events = [entry.event for entry in ledger.entries]
    if not events or not all(accountant.supports(event) for event in events):
        return group_bound(ledger.epsilon(delta), delta, 2)
    key = (repr(events), delta)  # a run's reservation and its record ask alike: a second of PLDs, once
    if key not in _REPLACE_ONE:
        for event in events:  # every entry counted for every example: never fewer
            accountant.compose(event)
        if len(_REPLACE_ONE) >= 64:
            _REPLACE_ONE.pop(next(iter(_REPLACE_ONE)))
        _REPLACE_ONE[key] = float(accountant.get_epsilon(delta))
    return _REPLACE_ONE[key], delta


_REPLACE_ONE: dict[tuple[str, float], float] = {}


__all__ = [
    "BUDGET_DIR_VARIABLE",
    "BudgetPolicy",
    "Guarantee",
    "LABEL_RELATION",
    "TOTAL_EPSILON_VARIABLE",
    "group_bound",
]
