"""scikit-learn estimators that learn from labels released under label differential privacy."""

from labeldp.estimators.classifier import (LabelDPClassifier, LabelDPRegressor, ReleasedLabels, clean_accuracy_estimate,
                                           clean_accuracy_terms, released_labels_for, released_log_likelihood)
from labeldp.estimators.logistic import LabelDPLogisticRegression, PublicBins

__all__ = ["LabelDPClassifier", "LabelDPLogisticRegression", "LabelDPRegressor", "PublicBins", "ReleasedLabels",
           "clean_accuracy_estimate", "clean_accuracy_terms", "released_labels_for", "released_log_likelihood"]
