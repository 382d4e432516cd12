"""Privacy accounting through ``dp_accounting``: each release's event, the ledger that composes them per
example, and the calibration of the Gaussian mechanisms' noise. Start with
:mod:`labeldp.accounting.ledger`.
"""

from labeldp.accounting.calibration import (
    calibrate_noise_multiplier,
    calibrate_vote_noise,
    dpsgd_epsilon,
    max_queries,
    pate_epsilon,
)
from labeldp.accounting.events import (
    DPSGD_RELATION,
    NEIGHBORING_RELATION,
    dpsgd_event,
    hashed_counts_event,
    histogram_event,
    laplace_one_hot_event,
    laplace_value_event,
    marginals_event,
    non_private_event,
    pate_event,
    randomized_response_event,
    rr_on_sets_event,
    stated_event,
    vector_labels_event,
)
from labeldp.accounting.ledger import LedgerEntry, PrivacyLedger, event_from_dict, event_to_dict

__all__ = [
    "DPSGD_RELATION",
    "NEIGHBORING_RELATION",
    "LedgerEntry",
    "PrivacyLedger",
    "calibrate_noise_multiplier",
    "calibrate_vote_noise",
    "dpsgd_epsilon",
    "dpsgd_event",
    "event_from_dict",
    "event_to_dict",
    "hashed_counts_event",
    "histogram_event",
    "laplace_one_hot_event",
    "laplace_value_event",
    "marginals_event",
    "max_queries",
    "non_private_event",
    "pate_epsilon",
    "pate_event",
    "randomized_response_event",
    "rr_on_sets_event",
    "stated_event",
    "vector_labels_event",
]
