"""scikit-learn estimators that learn from labels released under label differential privacy."""

from labeldp.boundary import ReleasedLabels
from labeldp.estimators.classifier import LabelDPClassifier, LabelDPRegressor
from labeldp.estimators.logistic import LabelDPLogisticRegression, PublicBins
from labeldp.released_metrics import (clean_accuracy_estimate, clean_accuracy_terms, released_labels_for,
                                      released_log_likelihood)

__all__ = ["LabelDPClassifier", "LabelDPLogisticRegression", "LabelDPRegressor", "PublicBins", "ReleasedLabels",
           "clean_accuracy_estimate", "clean_accuracy_terms", "released_labels_for", "released_log_likelihood"]
