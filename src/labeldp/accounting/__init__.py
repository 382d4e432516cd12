"""Privacy accounting: the ledger of spends (dp_accounting events) and the release functions."""

from labeldp.accounting.dpsgd import DPSGD_RELATION, calibrate_noise_multiplier, dpsgd_epsilon, dpsgd_event
from labeldp.accounting.ledger import (
    NEIGHBORING_RELATION,
    LedgerEntry,
    PrivacyLedger,
    event_from_dict,
    event_to_dict,
    histogram_event,
    laplace_one_hot_event,
    randomized_response_event,
)
from labeldp.accounting.pate import calibrate_vote_noise, pate_epsilon, pate_event
from labeldp.accounting.release import (
    release_laplace_one_hot,
    release_noisy_histogram,
    release_pate_labels,
    release_randomized_response,
    release_rr_with_prior,
    release_true_labels,
)

__all__ = [
    "calibrate_vote_noise",
    "pate_epsilon",
    "pate_event",
    "release_pate_labels",
    "DPSGD_RELATION",
    "calibrate_noise_multiplier",
    "dpsgd_epsilon",
    "dpsgd_event",
    "NEIGHBORING_RELATION",
    "LedgerEntry",
    "PrivacyLedger",
    "event_from_dict",
    "event_to_dict",
    "histogram_event",
    "laplace_one_hot_event",
    "release_laplace_one_hot",
    "randomized_response_event",
    "release_noisy_histogram",
    "release_randomized_response",
    "release_rr_with_prior",
    "release_true_labels",
]
