"""Priors for RR-with-prior, and how they meet released labels: cluster histograms over public features
(:mod:`labeldp.priors.clustering`, read first), tempering and weighing (:mod:`labeldp.priors.combine`), and
cells of rows a model scores alike (:mod:`labeldp.priors.cells`).
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.priors.cells import FIRST_SHARE as FIRST_SHARE
    from labeldp.priors.cells import cell_fractions as cell_fractions
    from labeldp.priors.cells import cells_of as cells_of
    from labeldp.priors.clustering import cluster as cluster
    from labeldp.priors.clustering import cluster_priors as cluster_priors
    from labeldp.priors.clustering import consistent_counts as consistent_counts
    from labeldp.priors.clustering import encode as encode
    from labeldp.priors.clustering import histogram_epsilon as histogram_epsilon
    from labeldp.priors.clustering import histogram_priors as histogram_priors
    from labeldp.priors.combine import release_evidence as release_evidence
    from labeldp.priors.combine import temper as temper
    from labeldp.priors.encoders import ENCODER_FILE_SUFFIX as ENCODER_FILE_SUFFIX
    from labeldp.priors.encoders import ENCODERS as ENCODERS
    from labeldp.priors.encoders import is_encoder_file as is_encoder_file

__getattr__, __dir__, __all__ = lazy_exports(__name__)
