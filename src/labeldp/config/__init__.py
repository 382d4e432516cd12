"""The configuration of a run, with no heavy import (no torch, scikit-learn or dp_accounting): each
option's default and help stated once, in its dataclass field. Start with :mod:`labeldp.config.run_config`
(:class:`RunConfig`).
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "DPSGDConfig": "labeldp.config.dpsgd",
        "PATEConfig": "labeldp.config.pate_config",
        "RunConfig": "labeldp.config.run_config",
        "TrainConfig": "labeldp.config.train_config",
    },
)
