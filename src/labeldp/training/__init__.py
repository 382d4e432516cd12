"""Supervised training after the privacy boundary: one stage of plain learning on labels a method
released (:mod:`labeldp.boundary.release`), with augmentation, mixup, schedules, checkpoints and evaluation.

:func:`train_stage` learns from whatever targets it is given: in a run, the label-DP methods give it
released labels and their noise channels. The private-side trainers are elsewhere: DP-SGD in
:mod:`labeldp.dpsgd`, and PATE's teachers in :mod:`labeldp.teachers` (which train with
:func:`train_stage` on their own disjoint parts of the true labels, inside the mechanism).

One module per job: :mod:`~labeldp.training.stage` (:func:`train_stage`, the optimiser and schedule),
:mod:`~labeldp.training.losses` (the losses and the preparation of the targets),
:mod:`~labeldp.training.predict` (predictions and test metrics), :mod:`~labeldp.training.checkpoint`
(checkpoints, shared with DP-SGD's trainer), :mod:`~labeldp.training.records` (the record of an epoch)
and :mod:`~labeldp.training.augment` (augmentation, mixup).
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
