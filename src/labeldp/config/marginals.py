"""The settings of ``--method marginals`` (``MarginalsConfig``), and their defaults stated once: read by
the run's options and by :class:`~labeldp.estimators.LabelDPLogisticRegression`. A configuration, no torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from labeldp.errors import ConfigError
from labeldp.options import option

#: quantile bins per numeric feature (a categorical feature has one bin per category): every feature is
#: one more set of counts in the release, and the noise on a count grows with the number of features,
#: not of bins
DEFAULT_BINS = 16
#: the ridge penalty on the bins' coefficients, in units of the summed log-likelihood: the noise on a
#: bin's count does not shrink with the number of rows, so neither does the penalty that tames it
DEFAULT_L2 = 100.0


@dataclass
class MarginalsConfig:
    """The logistic regression over public feature bins fitted from noisy label marginals: its bins
    (which shape the release) and its ridge penalty (which acts after it).

    Attributes
    ----------
    bins : int
        The most quantile bins of a numeric feature, besides one for missing values (a categorical feature
        has a bin per category and one for unseen ones); they shape the release (default
        :data:`DEFAULT_BINS`, 16).
    l2 : float
        Ridge penalty on the bins' coefficients, in units of the summed log-likelihood; it acts after the
        release (default :data:`DEFAULT_L2`, 100).
    """

    bins: int = option(
        DEFAULT_BINS,
        help="the most quantile bins of a numeric feature, besides one for missing values (a categorical "
        "feature has a bin per category and one for unseen ones); they shape the release",
    )
    l2: float = option(
        DEFAULT_L2,
        help="ridge penalty on the bins' coefficients, in units of the summed log-likelihood (it acts "
        "after the release)",
    )

    def validate(self) -> None:
        """Refuse settings the fit cannot use.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``bins`` is not an integer >= 2 or ``l2`` is not a finite number > 0.
        """
        if isinstance(self.bins, bool) or int(self.bins) != self.bins or self.bins < 2:
            raise ConfigError(f"marginals.bins must be an integer >= 2, got {self.bins}")
        if not 0 < self.l2 < math.inf:
            raise ConfigError(f"marginals.l2 must be a finite number > 0, got {self.l2}")


__all__ = ["DEFAULT_BINS", "DEFAULT_L2", "MarginalsConfig"]
