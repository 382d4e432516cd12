"""The settings of ``--method marginals`` (``MarginalsConfig``), their defaults stated once for the run's
options and :class:`~labeldp.estimators.LabelDPLogisticRegression`. No torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from labeldp.config.shared_options import DEFAULT_L2, L2
from labeldp.errors import ConfigError
from labeldp.options import declared, option

#: quantile bins per numeric feature (a categorical feature has one bin per category): every feature is
#: one more set of counts in the release, and the noise on a count grows with the number of features,
#: not of bins
DEFAULT_BINS = 16


@dataclass(frozen=True)
class MarginalsConfig:
    """The logistic regression over public feature bins fitted from noisy label marginals: its bins shape the
    release, its ridge penalty acts after it (each field's meaning is its option's help)."""

    bins: int = option(
        DEFAULT_BINS,
        help="the most quantile bins of a numeric feature, besides one for missing values (a categorical "
        "feature has a bin per category and one for unseen ones); they shape the release",
    )
    l2: float = declared(L2, "train", free_of=("marginals",))  # it acts on the fit after the release

    def validate(self) -> None:
        """Refuse (:class:`~labeldp.errors.ConfigError`) settings the fit cannot use."""
        if isinstance(self.bins, bool) or int(self.bins) != self.bins or self.bins < 2:
            raise ConfigError(f"marginals.bins must be an integer >= 2, got {self.bins}")
        if not 0 < self.l2 < math.inf:
            raise ConfigError(f"marginals.l2 must be a finite number > 0, got {self.l2}")


__all__ = ["DEFAULT_BINS", "DEFAULT_L2", "MarginalsConfig"]
