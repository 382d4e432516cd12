"""From guesses to an empirical epsilon lower bound, with a Clopper-Pearson confidence interval.

The game: each canary's secret is uniform over ``num_options`` labels; an attacker sees the release
and abstains or guesses. Under epsilon-DP an answered guess is right with probability at most e^eps /
(e^eps + num_options - 1), whatever the attacker does, and with many canaries in one release the
number right is dominated by a binomial of that rate (Steinke, Nasr and Jagielski 2023, pure DP): a
one-sided Clopper-Pearson lower bound on the precision is a lower bound on epsilon. Keeping the best
of ``num_tests`` abstention thresholds is paid by Bonferroni, each bound at level (1 - confidence) / num_tests.
"""

from __future__ import annotations

import math

from scipy.stats import beta

from labeldp.config.auditing import DEFAULT_CONFIDENCE
from labeldp.errors import ConfigError


def clopper_pearson_lower(successes: int, trials: int, alpha: float) -> float:
    """One-sided Clopper-Pearson lower bound at level 1 - ``alpha`` on a binomial proportion (0 without a success)."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ConfigError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if successes == 0:
        return 0.0
    return float(beta.ppf(alpha, successes, trials - successes + 1))


def clopper_pearson_upper(successes: int, trials: int, alpha: float) -> float:
    """One-sided Clopper-Pearson upper bound at level 1 - ``alpha`` on a binomial proportion (1 if all succeeded)."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ConfigError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if successes == trials:
        return 1.0
    return float(beta.ppf(1 - alpha, successes + 1, trials - successes))


def epsilon_from_precision(precision: float, num_options: int) -> float:
    """The epsilon at which e^eps / (e^eps + num_options - 1) equals ``precision``: 0 at or below chance, inf at 1."""
    if precision <= 1.0 / num_options:
        return 0.0
    if precision >= 1.0:
        return math.inf
    return math.log((num_options - 1) * precision / (1.0 - precision))


def epsilon_lower_bound(
    correct: int, answered: int, num_options: int, confidence: float = DEFAULT_CONFIDENCE, num_tests: int = 1
) -> float:
    """Epsilon lower bound, holding with probability >= ``confidence``, from ``correct`` of ``answered`` guesses.

    For a pure epsilon-DP release (see :mod:`labeldp.audit.bounds`), Bonferroni-corrected over
    ``num_tests`` thresholds; 0 when nothing was answered.
    """
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    if num_options < 2:
        raise ConfigError(f"num_options must be at least 2, got {num_options}")
    if answered == 0:
        return 0.0
    alpha = (1.0 - confidence) / num_tests
    return epsilon_from_precision(clopper_pearson_lower(correct, answered, alpha), num_options)
