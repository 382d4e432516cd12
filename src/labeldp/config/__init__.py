"""The configuration of a run, with no heavy import (no torch, scikit-learn or dp_accounting): each
option's default and command-line help stated once, in its dataclass field (:func:`labeldp.options.option`).

- :mod:`~labeldp.config.run`: :class:`RunConfig`, everything a run needs to be repeated;
- :mod:`~labeldp.config.train`: :class:`TrainConfig`, the training of each stage;
- :mod:`~labeldp.config.dpsgd`, :mod:`~labeldp.config.pate`: DP-SGD's and PATE's own settings;
- :mod:`~labeldp.config.overrides`: ``NAME=VALUE`` overrides, parsed one way for the command line, sweeps and tunes.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "DPSGDConfig": "labeldp.config.dpsgd",
        "PATEConfig": "labeldp.config.pate",
        "RunConfig": "labeldp.config.run",
        "TrainConfig": "labeldp.config.train",
    },
)
