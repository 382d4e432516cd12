"""Label randomisers: pure, vectorised numpy functions (no torch, no accounting).

Start with :mod:`labeldp.mechanisms.rr`. The true labels of a training set are read by these
functions only; call them through :mod:`labeldp.boundary.release` to record each spend on a ledger.
Every ``rng`` is a seed, generator, ``"secure"`` or None (:mod:`labeldp.randomness`); invalid
arguments raise :class:`labeldp.errors.ConfigError`.
"""

from labeldp.mechanisms.bins import BinMaps, optimal_bins, rr_on_bins, rr_on_bins_likelihood, rr_on_bins_probabilities
from labeldp.mechanisms.channels import (
    channel_epsilon,
    check_channel,
    flip_channel,
    is_randomized_response,
    parse_channel,
    rr_channel,
)
from labeldp.mechanisms.discrete_laplace import discrete_laplace, discrete_laplace_pmf, geometric
from labeldp.mechanisms.gnmax import (
    answer_probability,
    confident_gnmax,
    gnmax,
    gnmax_probabilities,
    teacher_votes,
)
from labeldp.mechanisms.histogram import noisy_histogram
from labeldp.mechanisms.label_marginals import noisy_marginals
from labeldp.mechanisms.label_vectors import (
    vector_flip_probability,
    vector_information,
    vector_labels,
    vector_labels_likelihood,
    vector_labels_log_probability,
    vector_labels_one_hot_estimate,
    vector_labels_probabilities,
)
from labeldp.mechanisms.laplace import LAPLACE_GRID, laplace_one_hot, laplace_one_hot_likelihood, laplace_parameter
from labeldp.mechanisms.laplace_value import (
    grid_step,
    laplace_value,
    laplace_value_likelihood,
    laplace_value_log_probabilities,
    laplace_value_parameter,
    released_values,
)
from labeldp.mechanisms.rr import (
    change_probability,
    keep_probability,
    prior_top_k,
    randomized_response,
    randomized_response_likelihood,
    randomized_response_probabilities,
    rr_information,
    rr_with_prior,
    rr_with_prior_likelihood,
    rr_with_prior_probabilities,
)

__all__ = [
    "BinMaps",
    "channel_epsilon",
    "check_channel",
    "flip_channel",
    "is_randomized_response",
    "parse_channel",
    "rr_channel",
    "optimal_bins",
    "rr_on_bins",
    "rr_on_bins_likelihood",
    "rr_on_bins_probabilities",
    "answer_probability",
    "confident_gnmax",
    "gnmax",
    "gnmax_probabilities",
    "teacher_votes",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "noisy_histogram",
    "noisy_marginals",
    "geometric",
    "LAPLACE_GRID",
    "laplace_one_hot",
    "laplace_one_hot_likelihood",
    "laplace_parameter",
    "grid_step",
    "laplace_value",
    "laplace_value_likelihood",
    "laplace_value_log_probabilities",
    "laplace_value_parameter",
    "released_values",
    "change_probability",
    "keep_probability",
    "prior_top_k",
    "randomized_response",
    "randomized_response_likelihood",
    "randomized_response_probabilities",
    "rr_information",
    "rr_with_prior",
    "rr_with_prior_likelihood",
    "rr_with_prior_probabilities",
    "vector_flip_probability",
    "vector_information",
    "vector_labels",
    "vector_labels_likelihood",
    "vector_labels_log_probability",
    "vector_labels_one_hot_estimate",
    "vector_labels_probabilities",
]
