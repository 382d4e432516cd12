"""Supervised training after the privacy boundary: one stage of plain learning on labels a method
released (:mod:`labeldp.boundary.release`), with augmentation, mixup, schedules, checkpoints and evaluation.

:func:`train_stage` learns from whatever targets it is given: in a run, the label-DP methods give it
released labels and their noise channels. The private-side trainers are elsewhere: DP-SGD in
:mod:`labeldp.dpsgd`, and PATE's teachers in :mod:`labeldp.pate` (which train with
:func:`train_stage` on their own disjoint parts of the true labels, inside the mechanism).
"""

from labeldp.training.stage import (
    EpochRecord,
    TrainConfig,
    accuracy,
    predict_logits,
    predict_proba,
    predict_values,
    resolve_device,
    rmse,
    train_stage,
)

__all__ = ["EpochRecord", "TrainConfig", "accuracy", "predict_logits", "predict_proba", "predict_values",
           "resolve_device", "rmse", "train_stage"]
