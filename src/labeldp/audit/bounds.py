"""From guesses to an empirical epsilon lower bound, with a Clopper-Pearson confidence interval.

The game: each canary's secret label is drawn uniformly from ``num_options`` labels; an attacker
sees the released output and either abstains or guesses. For an epsilon-DP release, every answered
guess is right with probability at most e^eps / (e^eps + num_options - 1), whatever the attacker
does (for each output z, the probability of z under the guessed label is at most e^eps times its
probability under each of the other num_options - 1 labels). With many canaries in one release the
number of correct guesses is stochastically dominated by a binomial with that rate (Steinke, Nasr
and Jagielski, "Privacy auditing with one (1) training run", 2023, for pure DP), so a one-sided
Clopper-Pearson lower bound on the precision turns into a lower bound on epsilon.

Trying several abstention thresholds and keeping the best is corrected for by Bonferroni: each of
``num_tests`` bounds is computed at level (1 - confidence) / num_tests.
"""

from __future__ import annotations

import math

from scipy.stats import beta
from labeldp.errors import ConfigError


def clopper_pearson_lower(successes: int, trials: int, alpha: float) -> float:
    """One-sided lower confidence bound at level 1 - alpha for a binomial proportion."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ConfigError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if successes == 0:
        return 0.0
    return float(beta.ppf(alpha, successes, trials - successes + 1))


def clopper_pearson_upper(successes: int, trials: int, alpha: float) -> float:
    """One-sided upper confidence bound at level 1 - alpha for a binomial proportion."""
    if trials < 0 or not 0 <= successes <= trials:
        raise ConfigError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if successes == trials:
        return 1.0
    return float(beta.ppf(1 - alpha, successes + 1, trials - successes))


def epsilon_from_precision(precision: float, num_options: int) -> float:
    """The epsilon at which e^eps / (e^eps + num_options - 1) equals ``precision`` (0 below chance)."""
    if precision <= 1.0 / num_options:
        return 0.0
    if precision >= 1.0:
        return math.inf
    return math.log((num_options - 1) * precision / (1.0 - precision))


def epsilon_lower_bound(correct: int, answered: int, num_options: int, confidence: float = 0.95,
                        num_tests: int = 1) -> float:
    """Epsilon lower bound, valid with probability >= ``confidence``, from ``correct`` of ``answered``
    guesses of secrets uniform over ``num_options`` values (Bonferroni over ``num_tests`` thresholds)."""
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    if num_options < 2:
        raise ConfigError(f"num_options must be at least 2, got {num_options}")
    if answered == 0:
        return 0.0
    alpha = (1.0 - confidence) / num_tests
    return epsilon_from_precision(clopper_pearson_lower(correct, answered, alpha), num_options)
