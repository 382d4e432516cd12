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

from labeldp.config.auditing import DEFAULT_CONFIDENCE
from labeldp.errors import ConfigError


def clopper_pearson_lower(successes: int, trials: int, alpha: float) -> float:
    """One-sided lower confidence bound at level 1 - alpha for a binomial proportion.

    Parameters
    ----------
    successes : int
        Number of successes, in [0, trials].
    trials : int
        Number of trials, >= 0.
    alpha : float
        The probability that the bound exceeds the true proportion, in (0, 1).

    Returns
    -------
    float
        The Clopper-Pearson lower bound; 0 when there is no success.

    Raises
    ------
    labeldp.errors.ConfigError
        If not 0 <= successes <= trials.
    """
    if trials < 0 or not 0 <= successes <= trials:
        raise ConfigError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if successes == 0:
        return 0.0
    return float(beta.ppf(alpha, successes, trials - successes + 1))


def clopper_pearson_upper(successes: int, trials: int, alpha: float) -> float:
    """One-sided upper confidence bound at level 1 - alpha for a binomial proportion.

    Parameters
    ----------
    successes : int
        Number of successes, in [0, trials].
    trials : int
        Number of trials, >= 0.
    alpha : float
        The probability that the bound falls below the true proportion, in (0, 1).

    Returns
    -------
    float
        The Clopper-Pearson upper bound; 1 when every trial succeeded.

    Raises
    ------
    labeldp.errors.ConfigError
        If not 0 <= successes <= trials.
    """
    if trials < 0 or not 0 <= successes <= trials:
        raise ConfigError(f"need 0 <= successes <= trials, got {successes} of {trials}")
    if successes == trials:
        return 1.0
    return float(beta.ppf(1 - alpha, successes + 1, trials - successes))


def epsilon_from_precision(precision: float, num_options: int) -> float:
    """The epsilon at which e^eps / (e^eps + num_options - 1) equals ``precision`` (0 below chance).

    Parameters
    ----------
    precision : float
        The fraction of answered guesses that are right.
    num_options : int
        Number of values the secret is uniform over.

    Returns
    -------
    float
        The epsilon: 0 at or below chance (1 / num_options), ``math.inf`` at precision 1.
    """
    if precision <= 1.0 / num_options:
        return 0.0
    if precision >= 1.0:
        return math.inf
    return math.log((num_options - 1) * precision / (1.0 - precision))


def epsilon_lower_bound(
    correct: int, answered: int, num_options: int, confidence: float = DEFAULT_CONFIDENCE, num_tests: int = 1
) -> float:
    """Epsilon lower bound, valid with probability >= ``confidence``, from ``correct`` of ``answered`` guesses.

    The secrets are uniform over ``num_options`` values; the bound is Bonferroni-corrected over
    ``num_tests`` thresholds. It holds for a pure epsilon-DP release (see the module docstring).

    Parameters
    ----------
    correct : int
        Number of right guesses.
    answered : int
        Number of guesses made (the attacker abstained on the rest).
    num_options : int
        Number of values each secret is uniform over, >= 2.
    confidence : float, optional
        Probability that the bound holds, in (0, 1) (default 0.95).
    num_tests : int, optional
        Number of bounds tried, of which the best is kept (default 1).

    Returns
    -------
    float
        The lower bound on epsilon, >= 0; 0 when nothing was answered.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``confidence`` is not in (0, 1), ``num_options`` is below 2, or ``correct`` is not in
        [0, answered].
    """
    if not 0.0 < confidence < 1.0:
        raise ConfigError(f"confidence must lie in (0, 1), got {confidence}")
    if num_options < 2:
        raise ConfigError(f"num_options must be at least 2, got {num_options}")
    if answered == 0:
        return 0.0
    alpha = (1.0 - confidence) / num_tests
    return epsilon_from_precision(clopper_pearson_lower(correct, answered, alpha), num_options)
