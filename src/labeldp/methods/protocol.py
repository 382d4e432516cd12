"""What a method may ask of the run it executes in: the small protocol every method is written against.

A run (:class:`labeldp.runs.context.MethodContext`) implements it, and so do ``labeldp tune``'s contexts
(which hand a candidate the tune's releases instead of drawing, or stop a method once its releases are
made). A method imports this protocol, the boundary and the layers below; never ``labeldp.runs`` or
``labeldp.experiments``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import torch
    from torch import nn

    from labeldp.accounting import PrivacyLedger
    from labeldp.boundary import Release
    from labeldp.config.run import RunConfig
    from labeldp.data.dataset import LabeledDataset
    from labeldp.training.records import EpochRecord


class MethodContext(Protocol):
    """The run a method executes in.

    Attributes
    ----------
    config : RunConfig
        The run's resolved configuration.
    data : LabeledDataset
        Its dataset: public inputs, private training labels.
    device : torch.device
        Where models train.
    progress : bool
        Whether to show progress.
    parallel, main : bool
        Whether this process is one of several (torchrun), and whether it is the one that releases.
    """

    config: RunConfig
    data: LabeledDataset
    device: torch.device
    progress: bool
    parallel: bool
    main: bool

    def spend(self, name: str, draw: Callable[[PrivacyLedger], Release]) -> Release:
        """Release ``name``: drawn once by ``draw(ledger)`` (a ``release_*`` function of
        :mod:`labeldp.boundary`, recording on ``ledger``), saved before it is used, read back when it
        was saved before; never drawn twice."""

    def will_draw(self, name: str) -> bool:
        """Whether :meth:`spend` of ``name`` would draw it (work only a draw needs is done before it)."""

    def saved_release(self, name: str) -> Release:
        """Release ``name`` as :meth:`spend` made it (an earlier stage's, to train on again)."""

    def new_model(self, stage: int) -> nn.Module:
        """The model of ``stage``, initialised from the seed's public stream for it."""

    def train(
        self,
        model: nn.Module,
        stage: int,
        stages: int,
        indices: np.ndarray,
        targets: np.ndarray,
        description: str | None = None,
        soft_labels: bool = False,
    ) -> None:
        """Train ``model`` on the inputs ``indices`` with released ``targets``, checkpointed as ``stage``."""

    def predict_proba(self, model: nn.Module, inputs: np.ndarray, temperature: float = 1.0) -> np.ndarray:
        """``model``'s class probabilities on ``inputs`` (a collective call under torchrun)."""

    def on_epoch_end(self, stage: int, stages: int) -> Callable[[EpochRecord], None]:
        """The callback that records an epoch's metrics."""

    def checkpoint_path(self, stage: int) -> Path:
        """Where the training of ``stage`` keeps its checkpoint."""

    def private_path(self, name: str) -> Path | None:
        """Where a private-side trainer keeps what it computed from true labels while the run is
        unfinished (PATE's teacher votes), on the process that releases; None on the others."""

    def discard_private(self) -> None:
        """Delete what :meth:`private_path` held, once it is no longer needed."""


__all__ = ["MethodContext"]
