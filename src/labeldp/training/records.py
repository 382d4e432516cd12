"""The record of one epoch of training, which the metrics file and the checkpoints keep."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class EpochRecord:
    """One epoch's figures. ``train_loss`` is the mean loss on the released labels the stage trained
    on; None for trainers whose loss would depend on private labels without noise (DP-SGD). A
    regression reports ``test_rmse`` (of the predicted expected values) instead of ``test_accuracy``.
    ``validation_loss`` is the loss on held-out released labels, when some are held out.

    Attributes
    ----------
    epoch : int
        The epoch, counted from 1.
    train_loss : float or None
        Mean training loss on the released labels (None for DP-SGD).
    test_accuracy : float or None
        Accuracy on the public test set (None without one, or for a regression).
    lr : float
        The learning rate at the end of the epoch.
    seconds : float
        Wall-clock time of the epoch, evaluation included.
    test_rmse : float or None
        A regression's RMSE on the public test set.
    validation_loss : float or None
        Mean loss on the held-out released labels.
    """

    epoch: int
    train_loss: float | None
    test_accuracy: float | None
    lr: float
    seconds: float
    test_rmse: float | None = None
    validation_loss: float | None = None


__all__ = ["EpochRecord"]
