"""The ads route: impressions with public high-cardinality categoricals and private conversions, hashed
into sparse features, trained out of core and released once into a run folder. Start with
:mod:`labeldp.ads.route`; :mod:`labeldp.ads.reports` fits from a source's aggregate reports.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.ads.folder import read_summary as read_summary
    from labeldp.ads.reports import fit_from_reports as fit_from_reports
    from labeldp.ads.route import fit_from_noisy_source as fit_from_noisy_source
    from labeldp.ads.route import fit_hashed as fit_hashed
    from labeldp.ads.route import predict_hashed as predict_hashed
    from labeldp.ads.run_pieces import HashedTable as HashedTable
    from labeldp.ads.run_pieces import hash_spec as hash_spec
    from labeldp.config.hashed_config import HashedConfig as HashedConfig

__getattr__, __dir__, __all__ = lazy_exports(__name__)
