"""The configuration of a run, with no heavy import (no torch, scikit-learn or dp_accounting): each
option's default and help stated once, in its dataclass field. Start with :mod:`labeldp.config.run_config`
(:class:`RunConfig`).
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.config.dpsgd import DPSGDConfig as DPSGDConfig
    from labeldp.config.marginals_config import MarginalsConfig as MarginalsConfig
    from labeldp.config.method_options import CellCountsOptions as CellCountsOptions
    from labeldp.config.method_options import LabelOptions as LabelOptions
    from labeldp.config.method_options import LossOptions as LossOptions
    from labeldp.config.method_options import MultiStageOptions as MultiStageOptions
    from labeldp.config.method_options import NoOptions as NoOptions
    from labeldp.config.method_options import StageOptions as StageOptions
    from labeldp.config.pate_config import PATEConfig as PATEConfig
    from labeldp.config.run_config import RunConfig as RunConfig
    from labeldp.config.train_config import TrainConfig as TrainConfig

__getattr__, __dir__, __all__ = lazy_exports(__name__)
