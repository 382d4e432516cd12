"""The defaults of the logistic model fitted from noisy label marginals, stated once: read by the
options of ``--method marginals`` (:class:`~labeldp.config.run.RunConfig`) and by
:class:`~labeldp.estimators.LabelDPLogisticRegression`."""

from __future__ import annotations

#: quantile bins per numeric feature (a categorical feature has one bin per category): every feature is
#: one more set of counts in the release, and the noise on a count grows with the number of features,
#: not of bins
DEFAULT_BINS = 16
#: the ridge penalty on the bins' coefficients, in units of the summed log-likelihood: the noise on a
#: bin's count does not shrink with the number of rows, so neither does the penalty that tames it
DEFAULT_L2 = 100.0

__all__ = ["DEFAULT_BINS", "DEFAULT_L2"]
