"""Producers of (n, K) prior matrices for RR-with-prior: cluster histograms over public features.

The other prior, a model's predicted probabilities, is :func:`labeldp.training.predict_proba`.
"""

from labeldp.priors.cluster import ENCODERS, cluster, cluster_priors, encode, histogram_priors

__all__ = ["ENCODERS", "cluster", "cluster_priors", "encode", "histogram_priors"]
