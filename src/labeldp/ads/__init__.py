"""The ads route: impressions with public high-cardinality categoricals and private conversions, hashed
into sparse features, trained out of core and released once into a run folder. Start with
:mod:`labeldp.ads.route`; :mod:`labeldp.ads.reports` fits from a source's aggregate reports.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "HashedConfig": "labeldp.config.hashed_config",
        "HashedTable": "labeldp.ads.run_pieces",
        "hash_spec": "labeldp.ads.run_pieces",
        "fit_hashed": "labeldp.ads.route",
        "fit_from_noisy_source": "labeldp.ads.route",
        "predict_hashed": "labeldp.ads.route",
        "fit_from_reports": "labeldp.ads.reports",
        "read_summary": "labeldp.ads.folder",
    },
)
