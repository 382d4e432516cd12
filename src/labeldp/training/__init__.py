"""Supervised training after the privacy boundary: one stage of plain learning on released labels
(:mod:`labeldp.training.stage`, read first). The private-side trainers live in :mod:`labeldp.dpsgd`
and :mod:`labeldp.teachers`.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "EpochRecord": "labeldp.training.records",
        "TrainConfig": "labeldp.config.train_config",
        "accuracy": "labeldp.training.predictions",
        "predict_logits": "labeldp.training.predictions",
        "predict_proba": "labeldp.training.predictions",
        "predict_values": "labeldp.training.predictions",
        "resolve_device": "labeldp.training.stage",
        "rmse": "labeldp.training.predictions",
        "train_stage": "labeldp.training.stage",
    },
)
