"""Priors for RR-with-prior, and how they meet released labels.

:mod:`~labeldp.priors.clustering` builds cluster histograms over public features (Algorithm 4 of Ghazi
et al. 2021); :mod:`~labeldp.priors.combine` tempers priors and weighs a release under one. The other
prior, a model's predicted probabilities, is :func:`labeldp.training.predict_proba`.
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
