"""A cap on what the releases of one set of private labels may spend together."""

from __future__ import annotations

import numpy as np

from labeldp.accounting import PrivacyLedger
from labeldp.accounting.rounding import format_epsilon
from labeldp.errors import ConfigError


class LabelBudget:
    """A cap on what the releases of one set of private labels may spend together.

    Given to :class:`PrivateLabels` (``PrivateLabels(y, classes=..., budget=LabelBudget(3))``), it lets the
    same rows be released more than once: a release is refused with a :class:`~labeldp.errors.BudgetError`,
    before anything is drawn, if the per-row composition (dp_accounting, at ``delta``) of what the rows have
    spent and what it may spend would exceed ``epsilon``. Rows released by different fits compose in
    parallel. Without a budget, each row is released at most once.

    Parameters
    ----------
    epsilon : float
        The cap, a finite number > 0.
    delta : float, optional
        The delta at which the composition is measured, in [0, 1).

    Attributes
    ----------
    spent : float
        The worst row's epsilon at ``delta`` so far (0 before the budget is given to labels).
    """

    def __init__(self, epsilon: float, delta: float = 0.0):
        if not epsilon > 0 or not np.isfinite(epsilon):
            raise ConfigError(f"the budget's epsilon must be a finite number > 0, got {epsilon}")
        if not 0.0 <= delta < 1.0:
            raise ConfigError(f"the budget's delta must lie in [0, 1), got {delta}")
        self.epsilon, self.delta = float(epsilon), float(delta)
        self._ledger: PrivacyLedger | None = None

    @property
    def spent(self) -> float:
        """The worst row's composed epsilon at ``delta`` so far (0 before the budget is given to labels)."""
        return 0.0 if self._ledger is None else self._ledger.epsilon(self.delta)

    def _bind(self, ledger: PrivacyLedger) -> None:
        if self._ledger is not None and self._ledger is not ledger:
            raise ConfigError("a LabelBudget caps one set of private labels: give each PrivateLabels its own")
        self._ledger = ledger

    def __repr__(self) -> str:
        return f"LabelBudget(epsilon={self.epsilon:g}, delta={self.delta:g}, spent={format_epsilon(self.spent, 4)})"


__all__ = ["LabelBudget"]
