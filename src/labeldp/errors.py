r"""The errors labeldp raises for anything a user can cause; the command line catches their base class.

Each is a :class:`LabelDPError` whose message says what is wrong and what to do; the argument errors
are also ``ValueError``\\s, as scikit-learn's and numpy's are. Anything else that escapes is a bug and
shows its traceback.
"""

from __future__ import annotations


class LabelDPError(Exception):
    """Base class of the errors a user can cause; ``labeldp`` prints their message, not a traceback."""


class ConfigError(LabelDPError, ValueError):
    """An option or argument that cannot work (checked before any privacy budget is spent)."""


class DataError(LabelDPError, ValueError):
    """A dataset file or array that cannot be used as it is (checked before any release)."""


class MissingFileError(LabelDPError, FileNotFoundError):
    """A file or folder labeldp was pointed at does not exist."""


class BudgetError(BaseException):
    """The privacy budget cannot pay for what was asked.

    Raised before any release that costs more than the budget (PATE's queries, DP-SGD with a given noise
    multiplier, a release of :class:`~labeldp.boundary.PrivateLabels` beyond their ``LabelBudget``), and
    by PATE after its release when no query was answered. A ``BaseException``, like
    :class:`~labeldp.boundary.PrivateLabelAccessError`: a search that catches ``Exception``
    (scikit-learn's ``error_score``) must stop at a refused release, not score it as NaN and go on.
    """


class RunDirectoryError(LabelDPError):
    """A run folder labeldp will not continue from.

    A damaged file, another run's folder, a recorded release whose labels are missing.
    """


class RunLockedError(RunDirectoryError):
    """Another process holds the lock: of a run folder (a tune's, a candidate's), a private selection or a release."""


class ReleaseExistsError(LabelDPError, FileExistsError):
    """A label release is already where a new one would go: releasing again would spend the budget twice.

    Raised by :func:`~labeldp.boundary.release_folder.privatize_table`.
    """


class InsecureNoiseWarning(UserWarning):
    """A run whose noise can be regenerated from its configuration (``insecure_noise_seed``): its epsilon
    does not hold against anyone who reads it.

    Issued by :func:`~labeldp.runs.run.train_run` for a private method and by
    :func:`~labeldp.dpsgd.selection.select_dpsgd`.
    """


#: what a message adds where it offers to release labels again: the cost, so that restoring is weighed first
SECOND_RELEASE = "(a second release of these labels, counted again on their dataset ledgers)"
