"""The arithmetic under the ledger (:mod:`labeldp.accounting.ledger`, whose page says how each event is
accounted): an event's privacy loss distribution under a neighbouring relation, the RDP bound of a private
selection, the pure-DP bound, and events as plain JSON types.
"""

from __future__ import annotations

import contextlib
import logging
import math
import numbers
from typing import Any

import attr
import dp_accounting
from dp_accounting import dp_event
from dp_accounting.pld import common as pld_common
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from dp_accounting.rdp import rdp_privacy_accountant

from labeldp.accounting.events import (
    DPSGD_RELATION,
    GAUSSIAN_SHIFT_RELATION,
    NEIGHBORING_RELATION,
    gaussian_equivalent,
)
from labeldp.errors import ConfigError

#: Discretisation of privacy losses: reported epsilons are pessimistic by at most about this much.
VALUE_DISCRETIZATION = 1e-4


def non_private(event: dp_event.DpEvent) -> bool:
    """Whether ``event`` releases labels without noise anywhere in it (a ledger holding it reports inf)."""
    if isinstance(event, dp_event.NonPrivateDpEvent):
        return True
    if isinstance(event, dp_event.SelfComposedDpEvent) or (
        isinstance(event, dp_event.PoissonSampledDpEvent) and isinstance(event.event, dp_event.GaussianDpEvent)
    ):
        return non_private(event.event)
    if isinstance(event, dp_event.ComposedDpEvent):
        return any(non_private(part) for part in event.events)
    if isinstance(event, dp_event.GaussianDpEvent):
        return event.noise_multiplier == 0
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        return event.num_buckets != 1 and event.noise_parameter == 0
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent):
        return event.noise_parameter == 0
    if isinstance(event, dp_event.LaplaceDpEvent):
        return event.noise_multiplier == 0
    return False


def check_accountable(event: dp_event.DpEvent, relation: dp_accounting.NeighboringRelation) -> None:
    """Refuse (:class:`~labeldp.errors.ConfigError`) an event with a part the ledger cannot account under
    ``relation``; each private part's PLD is then cached."""
    if isinstance(event, dp_event.SelfComposedDpEvent):
        if not isinstance(event.count, numbers.Integral) or isinstance(event.count, bool) or event.count < 0:
            raise ConfigError(f"{event}: a composition's count must be a whole number >= 0")
        check_accountable(event.event, relation)
    elif isinstance(event, dp_event.ComposedDpEvent):
        for part in event.events:
            check_accountable(part, relation)
    elif not non_private(event):
        event_pld(event, relation)
    elif relation != NEIGHBORING_RELATION and isinstance(event, _LABEL_EVENTS):  # noiseless, but of a label
        raise _replace_one_only(event)


def event_pld(
    event: dp_event.DpEvent, relation: dp_accounting.NeighboringRelation = NEIGHBORING_RELATION
) -> pld_lib.PrivacyLossDistribution | None:
    """The pessimistic PLD of ``event`` under ``relation`` (None for no loss), cached by the event's ``repr``.

    Raises :class:`~labeldp.errors.ConfigError` for an event the ledger cannot account under ``relation``, or one
    that has no PLD (:func:`non_private`: ask first).
    """
    if non_private(event):
        raise ConfigError(f"{event} releases labels without privacy: it has no privacy loss distribution")
    key = (repr(event), relation)
    if key not in _PLD_CACHE:
        if len(_PLD_CACHE) >= _PLD_CACHE_SIZE:
            _PLD_CACHE.pop(next(iter(_PLD_CACHE)))
        _PLD_CACHE[key] = _event_pld(event, relation)
    return _PLD_CACHE[key]


#: the label mechanisms' events, which the ledger accounts under the replace-one-label relation only
_LABEL_EVENTS = (dp_event.RandomizedResponseDpEvent, dp_event.DiscreteLaplaceDpEvent, dp_event.LaplaceDpEvent)


def _replace_one_only(event: dp_event.DpEvent) -> ConfigError:
    return ConfigError(f"the ledger accounts {type(event).__name__} under the replace-one-label relation only")


_PLD_CACHE: dict[tuple[str, Any], pld_lib.PrivacyLossDistribution | None] = {}
_PLD_CACHE_SIZE = 64


def _event_pld(
    event: dp_event.DpEvent, relation: dp_accounting.NeighboringRelation
) -> pld_lib.PrivacyLossDistribution | None:
    if isinstance(event, dp_event.NoOpDpEvent):
        return None
    equivalent = gaussian_equivalent(event)
    if equivalent is not None and equivalent != event:
        return event_pld(equivalent, relation)
    if isinstance(event, dp_event.SelfComposedDpEvent):
        inner = event_pld(event.event, relation)
        return None if inner is None or event.count == 0 else inner.self_compose(event.count)
    if isinstance(event, dp_event.ComposedDpEvent):
        return compose_plds([event_pld(e, relation) for e in event.events])
    gaussian, sampling_prob = event, 1.0
    if isinstance(event, dp_event.PoissonSampledDpEvent) and isinstance(event.event, dp_event.GaussianDpEvent):
        gaussian, sampling_prob = event.event, event.sampling_probability
    if isinstance(gaussian, dp_event.GaussianDpEvent):
        if relation == NEIGHBORING_RELATION and sampling_prob != 1.0:
            raise ConfigError("the ledger accounts Poisson-sampled Gaussian events under add-or-remove only")
        return pld_lib.from_gaussian_mechanism(
            gaussian.noise_multiplier,
            sampling_prob=sampling_prob,
            value_discretization_interval=VALUE_DISCRETIZATION,
            neighboring_relation=GAUSSIAN_SHIFT_RELATION,
        )
    if relation != NEIGHBORING_RELATION:
        raise _replace_one_only(event)
    if isinstance(event, dp_event.RandomizedResponseDpEvent):
        if event.num_buckets == 1:
            return None
        return pld_lib.from_randomized_response(
            event.noise_parameter,
            event.num_buckets,
            value_discretization_interval=VALUE_DISCRETIZATION,
            neighboring_relation=NEIGHBORING_RELATION,
        )
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent):
        return _pure_dp_pld(event.noise_parameter * event.sensitivity)
    if isinstance(event, dp_event.LaplaceDpEvent):  # ledgers of runs made before releases were discrete
        return _pure_dp_pld(1.0 / event.noise_multiplier)
    raise ConfigError(f"the ledger cannot account {type(event).__name__}")


def needs_rdp(event: dp_event.DpEvent) -> bool:
    """Whether ``event`` holds a private selection (``RepeatAndSelectDpEvent``, which has no PLD)."""
    if isinstance(event, dp_event.RepeatAndSelectDpEvent):
        return True
    if isinstance(event, dp_event.SelfComposedDpEvent):
        return needs_rdp(event.event)
    if isinstance(event, dp_event.ComposedDpEvent):
        return any(needs_rdp(e) for e in event.events)
    return False


def rdp_epsilon(
    events: list[dp_event.DpEvent], delta: float, relation: dp_accounting.NeighboringRelation = DPSGD_RELATION
) -> float:
    """Epsilon at ``delta`` of ``events`` composed, from dp_accounting's RDP accountant (looser than a PLD)."""
    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=relation)
    with quiet_rdp():
        for event in events:
            accountant.compose(event)
        return float(accountant.get_epsilon(delta))


def pure_epsilon(event: dp_event.DpEvent) -> float | None:
    """The epsilon of a pure (epsilon, 0)-DP event, compositions summed; None if a part is not pure.

    A bound beside the PLD's: composed many times, a pure event's PLD loses the mass that decides delta = 0
    to dp_accounting's truncation, while c releases at epsilon are (c epsilon, 0)-DP.
    """
    exact = _pure_epsilon(event)
    if exact is None:
        return None
    # The event's parameters went through exp and back, and compositions add their rounding: 1 comes back
    # as 1 + 2e-16, which rounding up would print as 1.01. A value within 1e-12 (relative) of a 12-digit
    # one is taken as that value: at most that little below the float sum, against the PLD's own
    # discretisation of 1e-4; any other value is never lowered.
    design = float(f"{exact:.12g}")
    return design if abs(design - exact) <= 1e-12 * abs(exact) else max(design, exact)


def _pure_epsilon(event: dp_event.DpEvent) -> float | None:
    if isinstance(event, dp_event.NoOpDpEvent):
        return 0.0
    if isinstance(event, (dp_event.SelfComposedDpEvent, dp_event.ComposedDpEvent)):
        parts = [_pure_epsilon(e) for e in ([event.event] if hasattr(event, "count") else event.events)]
        pure = [part for part in parts if part is not None]
        if len(pure) < len(parts):
            return None
        return sum(pure) * (event.count if hasattr(event, "count") else 1)
    if isinstance(event, dp_event.RandomizedResponseDpEvent) and 0 < event.noise_parameter:
        k, p = event.num_buckets, event.noise_parameter
        return 0.0 if k == 1 else math.log1p(k * (1 - p) / p)
    if isinstance(event, dp_event.DiscreteLaplaceDpEvent) and event.noise_parameter > 0:
        return event.noise_parameter * event.sensitivity
    if isinstance(event, dp_event.LaplaceDpEvent) and event.noise_multiplier > 0:
        return 1.0 / event.noise_multiplier
    return None


def _pure_dp_pld(epsilon: float) -> pld_lib.PrivacyLossDistribution:
    """The PLD of an (epsilon, 0)-DP guarantee: it dominates every epsilon-DP mechanism's, delta = 0 exact."""
    return pld_lib.from_privacy_parameters(
        pld_common.DifferentialPrivacyParameters(epsilon, 0.0), value_discretization_interval=VALUE_DISCRETIZATION
    )


def compose_plds(plds: list) -> pld_lib.PrivacyLossDistribution | None:
    result = None
    for item in plds:
        if item is not None:
            result = item if result is None else result.compose(item)
    return result


def event_to_dict(event: dp_event.DpEvent) -> dict[str, Any]:
    """A dp_accounting event (nested events included) as plain JSON types, ``{"type": class name, ...}``."""
    out: dict[str, Any] = {"type": type(event).__name__}
    for attribute in attr.fields(type(event)):
        value = getattr(event, attribute.name)
        if isinstance(value, dp_event.DpEvent):
            value = event_to_dict(value)
        elif isinstance(value, (list, tuple)):
            value = [event_to_dict(v) if isinstance(v, dp_event.DpEvent) else v for v in value]
        out[attribute.name] = value
    return out


def event_from_dict(data: dict[str, Any]) -> dp_event.DpEvent:
    """Inverse of :func:`event_to_dict`."""
    fields = dict(data)
    cls = getattr(dp_event, fields.pop("type"))
    for name, value in fields.items():
        if isinstance(value, dict) and "type" in value:
            fields[name] = event_from_dict(value)
        elif isinstance(value, list):
            fields[name] = [event_from_dict(v) if isinstance(v, dict) else v for v in value]
    return cls(**fields)


@contextlib.contextmanager
def quiet_rdp():
    """Silence dp_accounting's RDP accountant, which warns for every Renyi order it leaves out of a bound
    (that only loosens it).
    """
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
