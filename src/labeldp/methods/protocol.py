"""What a method may ask of the run it executes in: the small protocol every method is written against.

A run (:class:`labeldp.runs.context.RunContext`) implements it, and so do ``labeldp tune``'s contexts
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
        was saved before; never drawn twice.

        What is released is what ``draw`` releases; a run saves it as ``noisy_labels/<name>.npz`` and
        records it as one ledger entry tagged ``name``
        (:meth:`RunContext.spend <labeldp.runs.context.RunContext.spend>`). A tune's candidate draws
        nothing: it is handed the tune's release.

        Parameters
        ----------
        name : str
            The release's name, also the tag its draw must record it under.
        draw : callable
            ``draw(ledger) -> Release``; called at most once, and never when the release was saved.

        Returns
        -------
        Release
            The release, drawn or read back.
        """

    def will_draw(self, name: str) -> bool:
        """Whether :meth:`spend` of ``name`` would draw it (work only a draw needs is done before it).

        Parameters
        ----------
        name : str
            The release's name.

        Returns
        -------
        bool
            True if the release is not saved yet (a collective call under torchrun).
        """

    def saved_release(self, name: str) -> Release:
        """Release ``name`` as :meth:`spend` made it (an earlier stage's, to train on again).

        Parameters
        ----------
        name : str
            The release's name.

        Returns
        -------
        Release
            The saved release (nothing is released again).
        """

    def new_model(self, stage: int) -> nn.Module:
        """The model of ``stage``, initialised from the seed's public stream for it.

        Parameters
        ----------
        stage : int
            The stage, from 1.

        Returns
        -------
        torch.nn.Module
            The untrained model, on the run's device.
        """

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
        """Train ``model`` on the inputs ``indices`` with released ``targets``, checkpointed as ``stage``.

        Parameters
        ----------
        model : torch.nn.Module
            The model, trained in place.
        stage : int
            The stage, from 1 (its checkpoint and seeds).
        stages : int
            The run's number of stages.
        indices : numpy.ndarray
            The training examples' positions.
        targets : numpy.ndarray
            Their released targets: labels, (n, K) likelihoods, (n, 3, K) binned evidence or values.
        description : str or None, optional
            The progress bar's label.
        soft_labels : bool, optional
            Train (n, K) likelihoods by cross-entropy to their normalised rows.
        """

    def predict_proba(self, model: nn.Module, inputs: np.ndarray, temperature: float = 1.0) -> np.ndarray:
        """``model``'s class probabilities on ``inputs`` (a collective call under torchrun).

        Parameters
        ----------
        model : torch.nn.Module
            The model.
        inputs : numpy.ndarray
            The inputs, one row per example.
        temperature : float, optional
            The softmax's temperature (default 1.0).

        Returns
        -------
        numpy.ndarray
            (n, K) probabilities.
        """

    def on_epoch_end(self, stage: int, stages: int) -> Callable[[EpochRecord], None]:
        """The callback that records an epoch's metrics.

        Parameters
        ----------
        stage : int
            The stage being trained, from 1.
        stages : int
            The run's number of stages.

        Returns
        -------
        callable
            Called with each epoch's :class:`~labeldp.training.records.EpochRecord`.
        """

    def checkpoint_path(self, stage: int) -> Path:
        """Where the training of ``stage`` keeps its checkpoint.

        Parameters
        ----------
        stage : int
            The stage, from 1.

        Returns
        -------
        pathlib.Path
            The checkpoint file (it may not exist).
        """

    def private_path(self, name: str) -> Path | None:
        """Where a private-side trainer keeps what it computed from true labels while the run is
        unfinished (PATE's teacher votes), on the process that releases; None on the others.

        Parameters
        ----------
        name : str
            The file's name.

        Returns
        -------
        pathlib.Path or None
            The file (in a folder readable by the owner only), or None off the releasing process.
        """

    def discard_private(self) -> None:
        """Delete what :meth:`private_path` held, once it is no longer needed."""


__all__ = ["MethodContext"]
