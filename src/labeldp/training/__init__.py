"""Supervised training after the privacy boundary: one stage of plain learning on released labels.

:func:`train_stage` learns from whatever targets it is given; in a run, the label-DP methods give it
released labels and their noise channels. The private-side trainers are elsewhere: DP-SGD in
:mod:`labeldp.dpsgd`, and PATE's teachers in :mod:`labeldp.teachers` (which call :func:`train_stage`
on their own disjoint parts of the true labels, inside the mechanism).
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "EpochRecord": "labeldp.training.records",
        "TrainConfig": "labeldp.config.train",
        "accuracy": "labeldp.training.predict",
        "predict_logits": "labeldp.training.predict",
        "predict_proba": "labeldp.training.predict",
        "predict_values": "labeldp.training.predict",
        "resolve_device": "labeldp.training.stage",
        "rmse": "labeldp.training.predict",
        "train_stage": "labeldp.training.stage",
    },
)
