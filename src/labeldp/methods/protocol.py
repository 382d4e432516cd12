""":class:`MethodContext`, what a method may ask of the run it executes in.

A run (:class:`labeldp.runs.context.RunContext`) implements it, and so do ``labeldp tune``'s contexts
(which hand a candidate the tune's releases, or stop a method once its releases are made). A method
imports this protocol, the boundary and the layers below, never ``labeldp.runs`` or ``labeldp.experiments``.
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
    from labeldp.config.run_config import RunConfig
    from labeldp.data.dataset import LabeledDataset
    from labeldp.training.records import EpochRecord


class MethodContext(Protocol):
    """The run a method executes in.

    Every release goes through :meth:`spend`, which draws it at most once: a method's own docstring
    names its releases and the ``release_*`` function of :mod:`labeldp.boundary` that draws each.

    Attributes
    ----------
    config : RunConfig
        The run's resolved configuration.
    data : LabeledDataset
        Public inputs, private training labels.
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
        """Release ``name``: drawn once by ``draw(ledger)``, saved before it is used, read back if saved.

        ``draw`` is a ``release_*`` function of :mod:`labeldp.boundary` recording on ``ledger`` under the tag
        ``name``; it is never called twice, nor when the release was saved. A run saves it as
        ``noisy_labels/<name>.npz`` as one ledger entry; a tune's candidate draws nothing and is handed the
        tune's release.
        """

    def will_draw(self, name: str) -> bool:
        """Whether :meth:`spend` of ``name`` would draw (a collective call under torchrun).

        Work only a draw needs is done before it, on every process.
        """

    def saved_release(self, name: str) -> Release:
        """Release ``name`` as :meth:`spend` made it (an earlier stage's, to train on again); nothing is released."""

    def new_model(self, stage: int) -> nn.Module:
        """The untrained model of ``stage`` (from 1), on the run's device, initialised from the seed's public stream."""

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
        """Train ``model`` in place on the inputs ``indices`` with released ``targets``, checkpointed as ``stage``.

        ``targets`` are labels, (n, K) likelihoods, (n, 3, K) binned evidence or values; ``soft_labels``
        trains (n, K) likelihoods by cross-entropy to their normalised rows.
        """

    def predict_proba(self, model: nn.Module, inputs: np.ndarray, temperature: float = 1.0) -> np.ndarray:
        """``model``'s (n, K) class probabilities on ``inputs`` (a collective call under torchrun)."""

    def on_epoch_end(self, stage: int, stages: int, description: str | None = None) -> Callable[[EpochRecord], None]:
        """The callback that records each epoch's :class:`~labeldp.training.records.EpochRecord` (shown as
        ``description``, default ``stage <stage>/<stages>``)."""

    def checkpoint_path(self, stage: int) -> Path:
        """Where the training of ``stage`` keeps its checkpoint (it may not exist)."""

    def private_path(self, name: str) -> Path | None:
        """Where a private-side trainer keeps what it computed from true labels while the run is unfinished.

        PATE's teacher votes; in a folder readable by the owner only, on the releasing process (None on the others).
        """

    def discard_private(self) -> None:
        """Delete what :meth:`private_path` held, once it is no longer needed."""


__all__ = ["MethodContext"]
