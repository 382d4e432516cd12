"""The privacy boundary: the only code that reads private labels and builds what a release records.

Start with :mod:`labeldp.boundary.labels` (:class:`PrivateLabels` and :func:`unseal`, the one function
that reads them), then :mod:`labeldp.boundary.release` (the ``release_*`` functions: a mechanism draws,
the ledger records the event, a :class:`Release` comes back with its noise channel).
"""

from labeldp.boundary.column import DEFAULT_BATCH_ROWS, privatize, table_ledger
from labeldp.boundary.domain import LabelDomain, canonical_label, class_array, fit_classes
from labeldp.boundary.folder_format import CHANNEL_PREFIX, K_COLUMN, RELEASED_COLUMN, load_release, read_sidecar
from labeldp.boundary.labels import (
    RELEASE_ONCE_ROUTE,
    LabelsInAnotherProcessError,
    PrivateLabelAccessError,
    PrivateLabels,
    unseal,
)
from labeldp.boundary.release import (
    Release,
    release_dpsgd_plan,
    release_external_labels,
    release_laplace_one_hot,
    release_laplace_value,
    release_pate_labels,
    release_randomized_response,
    release_rr_on_bins,
    release_rr_with_prior,
    release_true_labels,
    release_vector_labels,
)
from labeldp.boundary.release_counts import release_external_counts, release_label_marginals, release_noisy_histogram
from labeldp.boundary.release_folder import privatize_table
from labeldp.boundary.release_hashed import release_hashed_counts
from labeldp.boundary.released import ReleasedLabels
from labeldp.boundary.shared_budget import LabelBudget

__all__ = [
    "CHANNEL_PREFIX",
    "DEFAULT_BATCH_ROWS",
    "K_COLUMN",
    "LabelBudget",
    "LabelDomain",
    "LabelsInAnotherProcessError",
    "PrivateLabelAccessError",
    "PrivateLabels",
    "RELEASED_COLUMN",
    "RELEASE_ONCE_ROUTE",
    "Release",
    "ReleasedLabels",
    "canonical_label",
    "class_array",
    "fit_classes",
    "load_release",
    "privatize",
    "privatize_table",
    "read_sidecar",
    "release_dpsgd_plan",
    "release_external_counts",
    "release_external_labels",
    "release_hashed_counts",
    "release_label_marginals",
    "release_laplace_one_hot",
    "release_laplace_value",
    "release_noisy_histogram",
    "release_pate_labels",
    "release_randomized_response",
    "release_rr_on_bins",
    "release_rr_with_prior",
    "release_true_labels",
    "release_vector_labels",
    "table_ledger",
    "unseal",
]
