"""Producers of (n, K) prior matrices for RR-with-prior, and how priors meet released labels.

- :mod:`~labeldp.priors.cluster`: cluster histograms over public features (Algorithm 4 of Ghazi et
  al. 2021), the histogram released through :mod:`labeldp.boundary.release`;
- :mod:`~labeldp.priors.combine`: tempering, and the posterior weight of a release under a prior.

The other prior, a model's predicted probabilities, is :func:`labeldp.training.predict_proba`.
"""

from labeldp.priors.cluster import (
    ENCODER_FILE_SUFFIX,
    ENCODERS,
    cluster,
    cluster_priors,
    consistent_counts,
    encode,
    histogram_epsilon,
    histogram_priors,
    is_encoder_file,
)
from labeldp.priors.combine import release_evidence, temper

__all__ = ["ENCODERS", "ENCODER_FILE_SUFFIX", "cluster", "cluster_priors", "consistent_counts", "encode",
           "histogram_epsilon", "histogram_priors", "is_encoder_file", "release_evidence", "temper"]
