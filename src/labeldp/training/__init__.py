"""Supervised training after the privacy boundary: one stage of plain learning on released labels
(:mod:`labeldp.training.stage`, read first). The private-side trainers live in :mod:`labeldp.dpsgd`
and :mod:`labeldp.teachers`.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.config.train_config import TrainConfig as TrainConfig
    from labeldp.training.predictions import accuracy as accuracy
    from labeldp.training.predictions import predict_logits as predict_logits
    from labeldp.training.predictions import predict_proba as predict_proba
    from labeldp.training.predictions import predict_values as predict_values
    from labeldp.training.predictions import rmse as rmse
    from labeldp.training.records import EpochRecord as EpochRecord
    from labeldp.training.stage import resolve_device as resolve_device
    from labeldp.training.stage import train_stage as train_stage

__getattr__, __dir__, __all__ = lazy_exports(__name__)
