"""The events recorded for each mechanism (accounting/events.py): each one's privacy loss matches
or dominates the exact distribution of the mechanism it stands for (RR, RR-with-prior, the noisy
histogram, the noisy marginals), and a composition of Gaussians is accounted as the one Gaussian it
equals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant

from labeldp.accounting import (
    NEIGHBORING_RELATION,
    PrivacyLedger,
    histogram_event,
    marginals_event,
    randomized_response_event,
)
from labeldp.accounting.ledger import event_pld
from labeldp.boundary import PrivateLabels, release_rr_with_prior
from labeldp.mechanisms import discrete_laplace_pmf, randomized_response_probabilities, rr_with_prior_probabilities


def hockey_stick(p: np.ndarray, q: np.ndarray, epsilon: float) -> float:
    return float(np.maximum(p - math.exp(epsilon) * q, 0).sum())


@pytest.mark.parametrize("epsilon", [0.25, 1.0, 3.0])
@pytest.mark.parametrize("num_classes", [2, 10, 100])
def test_rr_event_matches_the_mechanism(epsilon: float, num_classes: int) -> None:
    """dp_accounting's RR event describes exactly our RR: same delta(eps') curve as the true distribution."""
    accountant = pld_privacy_accountant.PLDAccountant(NEIGHBORING_RELATION)
    accountant.compose(randomized_response_event(epsilon, num_classes))
    assert accountant.get_epsilon(0.0) == pytest.approx(epsilon, abs=2e-4)
    probs = randomized_response_probabilities(num_classes, epsilon)
    for eps_prime in (0.0, epsilon / 2):
        assert accountant.get_delta(eps_prime) == pytest.approx(hockey_stick(probs[0], probs[1], eps_prime), abs=1e-3)


def test_rr_with_prior_event_dominates_every_example() -> None:
    """The recorded event's delta(eps') bounds the true worst-case divergence of every released example."""
    rng = np.random.default_rng(0)
    priors = rng.dirichlet(np.full(10, 0.4), size=200)
    labels = PrivateLabels.from_indices(rng.integers(0, 10, 200), 10)
    for epsilon in (0.5, 1.0, 2.0):
        ledger = PrivacyLedger(200)
        release_rr_with_prior(ledger, labels, np.arange(200), priors, epsilon, rng=0)
        accountant = pld_privacy_accountant.PLDAccountant(NEIGHBORING_RELATION)
        accountant.compose(ledger.entries[0].event)
        probs = rr_with_prior_probabilities(priors, epsilon)
        for eps_prime in (0.0, 0.3 * epsilon, 0.8 * epsilon):
            worst = max(
                hockey_stick(probs[i, y], probs[i, y2], eps_prime)
                for i in range(0, 200, 7)
                for y in range(10)
                for y2 in range(10)
            )
            assert accountant.get_delta(eps_prime) >= worst - 1e-4
        assert ledger.epsilon() == pytest.approx(epsilon, abs=2e-4)


def test_a_composition_of_gaussians_is_accounted_as_the_one_gaussian_it_equals() -> None:
    """PATE's hundreds of Gaussian queries are accounted as one Gaussian; the epsilon is that of
    composing the discretised parts in dp_accounting (to its discretisation), at a fraction of the cost."""
    from dp_accounting import dp_event

    from labeldp.accounting.calibration import accountant_epsilon
    from labeldp.accounting.events import GAUSSIAN_SHIFT_RELATION, gaussian_equivalent, pate_event

    event = pate_event(40, 30.0, 60.0)
    equivalent = gaussian_equivalent(event)
    assert equivalent.noise_multiplier == pytest.approx((40 * (2 / 30.0**2 + 1 / 60.0**2)) ** -0.5)
    composed = pld_privacy_accountant.PLDAccountant(GAUSSIAN_SHIFT_RELATION, value_discretization_interval=1e-4)
    composed.compose(event)
    assert accountant_epsilon(event, 1e-5, GAUSSIAN_SHIFT_RELATION) == pytest.approx(
        composed.get_epsilon(1e-5), abs=2e-3
    )
    sampled = dp_event.PoissonSampledDpEvent(0.1, dp_event.GaussianDpEvent(1.0))
    assert gaussian_equivalent(sampled) is None and gaussian_equivalent(dp_event.GaussianDpEvent(0.0)) is None
    assert gaussian_equivalent(dp_event.ComposedDpEvent([dp_event.GaussianDpEvent(1.0), sampled])) is None


@pytest.mark.parametrize("features, num_classes", [(2, 2), (2, 4), (30, 2), (60, 5)])
def test_event_is_epsilon_dp_and_dominates_the_mechanism(features: int, num_classes: int) -> None:
    """The ledger charges the marginals exactly epsilon at delta = 0, however wide the table; and for
    two features and two classes its delta(eps') is at least the exact hockey-stick divergence of the
    mechanism's two unit-shifted cells."""
    epsilon = 0.8
    ledger = PrivacyLedger(1)
    ledger.record(marginals_event(epsilon, features, num_classes), np.array([True]), "marginals")
    assert ledger.epsilon() == pytest.approx(epsilon, abs=1e-3)
    if (features, num_classes) == (2, 2):
        pld = event_pld(marginals_event(epsilon, features, num_classes))
        values = np.arange(-300, 301)
        p, q = discrete_laplace_pmf(values, epsilon / 2), discrete_laplace_pmf(values - 1, epsilon / 2)
        for eps_prime in (0.0, 0.3, 0.6):
            exact = np.maximum(np.outer(p, p) - math.exp(eps_prime) * np.outer(q, q), 0).sum()
            assert pld.get_delta_for_epsilon(eps_prime) >= exact - 1e-9


def test_histogram_event_matches_the_mechanism() -> None:
    """The recorded event's delta(eps') equals the exact divergence of two unit-shifted cells."""
    from labeldp.accounting.ledger import event_pld

    epsilon = 0.6
    a = epsilon / 2
    values = np.arange(-200, 201)
    p1 = discrete_laplace_pmf(values, a)
    p_shift = discrete_laplace_pmf(values - 1, a)
    joint_p = np.outer(p1, p1)  # (A, B) = (c, c') + noise
    joint_q = np.outer(p_shift, p_shift)  # (c + 1, c' + 1): one cell each way, same law by symmetry
    pld = event_pld(histogram_event(epsilon))
    for eps_prime in (0.0, 0.2, 0.4):
        exact = np.maximum(joint_p - math.exp(eps_prime) * joint_q, 0).sum()
        assert pld.get_delta_for_epsilon(eps_prime) == pytest.approx(exact, abs=2e-3)
    assert pld.get_epsilon_for_delta(0.0) == pytest.approx(epsilon, abs=1e-3)
