"""The ads route: impressions with public high-cardinality categoricals and private conversions, hashed
into sparse features and trained out of core, released once through the boundary into a run folder.

- :mod:`~labeldp.ads.route`: :func:`fit_hashed` (labeldp's own release: noisy label counts, or randomized
  response), :func:`fit_from_noisy_source` (labels a source randomized), :func:`predict_hashed`;
- :mod:`~labeldp.ads.reports`: :func:`fit_from_reports` (a source's aggregate reports);
- :mod:`~labeldp.ads.folder`: the run folder, released into once;
- :mod:`~labeldp.ads.train`: the pieces below it, which ``benchmarks/ads_scale.py`` composes too.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "HashedConfig": "labeldp.config.hashed",
        "HashedTable": "labeldp.ads.train",
        "hash_spec": "labeldp.ads.train",
        "fit_hashed": "labeldp.ads.route",
        "fit_from_noisy_source": "labeldp.ads.route",
        "predict_hashed": "labeldp.ads.route",
        "fit_from_reports": "labeldp.ads.reports",
        "read_summary": "labeldp.ads.folder",
    },
)
