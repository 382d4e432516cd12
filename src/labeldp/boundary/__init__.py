"""The privacy boundary: the only code that reads private labels and builds what a release records.

Start with :mod:`labeldp.boundary.labels` (:class:`PrivateLabels` and :func:`unseal`, the one function
that reads them), then :mod:`labeldp.boundary.release` (the ``release_*`` functions: a mechanism draws,
the ledger records the event, a :class:`Release` comes back with its noise channel). Tables and folders are
read and written by :mod:`labeldp.tables`, below it; the release folder's names are exported here.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.boundary.column import privatize as privatize
    from labeldp.boundary.domain import LabelDomain as LabelDomain
    from labeldp.boundary.domain import class_array as class_array
    from labeldp.boundary.domain import fit_classes as fit_classes
    from labeldp.boundary.labels import RELEASE_ONCE_ROUTE as RELEASE_ONCE_ROUTE
    from labeldp.boundary.labels import LabelsInAnotherProcessError as LabelsInAnotherProcessError
    from labeldp.boundary.labels import PrivateLabelAccessError as PrivateLabelAccessError
    from labeldp.boundary.labels import PrivateLabels as PrivateLabels
    from labeldp.boundary.labels import unseal as unseal
    from labeldp.boundary.release import Release as Release
    from labeldp.boundary.release import release_dpsgd_plan as release_dpsgd_plan
    from labeldp.boundary.release import release_external_labels as release_external_labels
    from labeldp.boundary.release import release_laplace_one_hot as release_laplace_one_hot
    from labeldp.boundary.release import release_laplace_value as release_laplace_value
    from labeldp.boundary.release import release_pate_labels as release_pate_labels
    from labeldp.boundary.release import release_randomized_response as release_randomized_response
    from labeldp.boundary.release import release_rr_on_bins as release_rr_on_bins
    from labeldp.boundary.release import release_rr_with_prior as release_rr_with_prior
    from labeldp.boundary.release import release_true_labels as release_true_labels
    from labeldp.boundary.release import release_vector_labels as release_vector_labels
    from labeldp.boundary.release_counts import release_external_counts as release_external_counts
    from labeldp.boundary.release_counts import release_label_marginals as release_label_marginals
    from labeldp.boundary.release_counts import release_noisy_histogram as release_noisy_histogram
    from labeldp.boundary.release_folder import privatize_table as privatize_table
    from labeldp.boundary.release_hashed import release_hashed_counts as release_hashed_counts
    from labeldp.boundary.released import ReleasedLabels as ReleasedLabels
    from labeldp.boundary.released import load_release as load_release
    from labeldp.boundary.shared_budget import LabelBudget as LabelBudget
    from labeldp.tables.folder_format import CHANNEL_PREFIX as CHANNEL_PREFIX
    from labeldp.tables.folder_format import K_COLUMN as K_COLUMN
    from labeldp.tables.folder_format import RELEASED_COLUMN as RELEASED_COLUMN
    from labeldp.tables.folder_format import read_sidecar as read_sidecar
    from labeldp.tables.keys import canonical_label as canonical_label

__getattr__, __dir__, __all__ = lazy_exports(__name__)
