"""The record of one epoch of training, which the metrics file and the checkpoints keep."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EpochRecord:
    """One epoch's figures, kept by the metrics file and the checkpoints.

    Attributes
    ----------
    epoch : int
        The epoch, counted from 1.
    train_loss : float or None
        Mean loss on the released labels trained on; None where it would depend on private labels
        without noise (DP-SGD).
    test_accuracy, test_rmse : float or None
        On the public test set, if any: accuracy, or a regression's RMSE of the expected values.
    lr : float
        The learning rate at the end of the epoch.
    seconds : float
        Wall-clock time of the epoch, evaluation included.
    validation_loss : float or None
        Mean loss on held-out released labels, when some are held out.
    """

    epoch: int
    train_loss: float | None
    test_accuracy: float | None
    lr: float
    seconds: float
    test_rmse: float | None = None
    validation_loss: float | None = None


__all__ = ["EpochRecord"]
