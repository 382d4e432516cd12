"""The privacy boundary: the only code that reads private labels and builds what a release records.

- :mod:`~labeldp.boundary.labels`: :class:`PrivateLabels`, true labels as a type, and :func:`unseal`,
  the one function that reads them (called here and by the private-side trainers only).
- :mod:`~labeldp.boundary.budget`: :class:`LabelBudget`, a cap on what releases of the same labels spend.
- :mod:`~labeldp.boundary.domain`: :class:`LabelDomain`, the declared classes and how values match them.
- :mod:`~labeldp.boundary.release`: the ``release_*`` functions: a mechanism draws, the ledger records
  the event, a :class:`Release` comes back with its noise channel.
- :mod:`~labeldp.boundary.release_counts`: the releases of counts over many rows (a noisy label
  histogram, noisy label marginals), charged once per privacy unit.
- :mod:`~labeldp.boundary.release_hashed`: noisy label counts over hashed features, streamed block by block.
- :mod:`~labeldp.boundary.units`: privacy units, the public rule bounding each unit's rows.
- :mod:`~labeldp.boundary.released`: :class:`ReleasedLabels`, what a learner trains on.
- :mod:`~labeldp.boundary.column`: :func:`privatize`, a label column released once in memory, and
  :func:`table_ledger` for one released elsewhere (Spark, Dask).
- :mod:`~labeldp.boundary.table_source` and :mod:`~labeldp.boundary.release_folder`: the same out of
  core, streamed from Parquet and CSV into a release folder written once (:func:`privatize_table`,
  :func:`load_release`).
"""

from labeldp.boundary.budget import LabelBudget
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
)
from labeldp.boundary.release_counts import release_external_counts, release_label_marginals, release_noisy_histogram
from labeldp.boundary.release_folder import privatize_table
from labeldp.boundary.release_hashed import release_hashed_counts
from labeldp.boundary.released import ReleasedLabels

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
    "table_ledger",
    "unseal",
]
