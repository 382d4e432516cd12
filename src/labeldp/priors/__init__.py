"""Priors for RR-with-prior, and how they meet released labels: cluster histograms over public features
(:mod:`labeldp.priors.clustering`, read first) and tempering and weighing (:mod:`labeldp.priors.combine`).
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "ENCODER_FILE_SUFFIX": "labeldp.priors.encoders",
        "ENCODERS": "labeldp.priors.encoders",
        "cluster": "labeldp.priors.clustering",
        "cluster_priors": "labeldp.priors.clustering",
        "consistent_counts": "labeldp.priors.clustering",
        "encode": "labeldp.priors.clustering",
        "histogram_epsilon": "labeldp.priors.clustering",
        "histogram_priors": "labeldp.priors.clustering",
        "is_encoder_file": "labeldp.priors.encoders",
        "release_evidence": "labeldp.priors.combine",
        "temper": "labeldp.priors.combine",
    },
)
