"""The contexts a method runs in during a tune: one that stops once the shared releases are made, and
one per candidate that reads them (never draws) on data whose true labels are withheld."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from labeldp.boundary import PrivateLabels, Release
from labeldp.config.run import RunConfig
from labeldp.data import LabeledDataset
from labeldp.errors import RunDirectoryError
from labeldp.runs.context import RunContext
from labeldp.runs.rundir import RunDirectory


class Released(Exception):
    """The method asked to train: every release before training has been made.

    Raised by :meth:`ReleaseContext.train` to stop the method; not an error.

    Parameters
    ----------
    *args : object
        As :class:`Exception`'s (raised without any).
    """


class FirstStageTrained(Exception):
    """A candidate asked for a release drawn after its first stage (scored on that stage's model).

    Raised by :class:`CandidateContext` to stop the candidate's method; not an error.

    Parameters
    ----------
    *args : object
        As :class:`Exception`'s (raised without any).
    """


class ReleaseContext(RunContext):
    """Runs a method until every release ``names`` is drawn, saved and recorded: a release drawn after
    training (LP-2ST's second stage, with the first stage's model as its prior) trains before it as
    the run would.

    The releases are made by :meth:`RunContext.spend <labeldp.runs.context.RunContext.spend>`: saved in
    the tune folder's ``noisy_labels/`` and recorded on its ledger, as a run records them.

    Parameters
    ----------
    *args, **kwargs
        :class:`~labeldp.runs.context.RunContext`'s: the tune's configuration, its folder, the data,
        the device, progress.
    names : tuple of str
        The releases the candidates share.

    Attributes
    ----------
    names : tuple of str
        As given.
    """

    def __init__(self, *args: Any, names: tuple[str, ...], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.names = names

    def train(self, *args: Any, **kwargs: Any) -> None:
        """Stop the method once every release ``names`` is saved; else train as a run does.

        Parameters
        ----------
        *args, **kwargs
            :meth:`RunContext.train <labeldp.runs.context.RunContext.train>`'s.

        Raises
        ------
        Released
            If every release ``names`` is saved.
        """
        if all(self.out.load_release(name) is not None for name in self.names):
            raise Released
        super().train(*args, **kwargs)


class CandidateContext(RunContext):
    """One candidate: reads the tune's releases (never draws), trains without the held-out examples,
    and evaluates no epoch on the test set. Where the releases ``later`` than the first stage depend
    on the candidate's options, it stops when it would need one: its first stage's model is scored.

    It releases nothing and records nothing: every release it hands out is one the tune made.

    Parameters
    ----------
    config : RunConfig
        The candidate's resolved configuration.
    out : RunDirectory
        The candidate's folder (its configuration, metrics and checkpoints; no release, no ledger).
    data : LabeledDataset
        The data, its true training labels withheld (:func:`sealed`).
    device : torch.device
        Where models train.
    releases : dict of str to Release
        The tune's shared releases, by name.
    held_out : numpy.ndarray
        The held-out training examples' positions, never trained on.
    later : tuple of str
        The releases drawn after the first stage that depend on the candidate's options.

    Attributes
    ----------
    releases, held_out, later
        As given.
    trained : torch.nn.Module or None
        The last model trained (the first stage's, when the candidate stops at a later release); None
        before any training.
    """

    #: the tune's release is on the dataset's ledger under the tune's folder: a candidate adds nothing
    records_spend = False

    def __init__(
        self,
        config: RunConfig,
        out: RunDirectory,
        data: LabeledDataset,
        device,
        releases: dict[str, Release],
        held_out: np.ndarray,
        later: tuple[str, ...],
    ):
        super().__init__(config, out, data, device, progress=False)
        self.releases, self.held_out, self.later = releases, held_out, later
        self.trained = None

    def spend(self, name, draw) -> Release:
        """The tune's release ``name``, never drawn (``draw`` is not called).

        Parameters
        ----------
        name : str
            The release's name.
        draw : callable or None
            Ignored.

        Returns
        -------
        Release
            The tune's release.

        Raises
        ------
        FirstStageTrained
            If ``name`` is one of the ``later`` releases.
        labeldp.errors.RunDirectoryError
            If the tune did not make ``name`` (drawing it would be a second spend).
        """
        if name in self.later:
            raise FirstStageTrained
        if name not in self.releases:
            raise RunDirectoryError(
                f"a tuning candidate asked for release {name!r}, which the tune did not make: it "
                "would be a second spend"
            )
        return self.releases[name]

    def will_draw(self, name: str) -> bool:
        """Never: a candidate draws nothing.

        Parameters
        ----------
        name : str
            The release's name.

        Returns
        -------
        bool
            False.

        Raises
        ------
        FirstStageTrained
            If ``name`` is one of the ``later`` releases (before the work only its draw needs).
        """
        if name in self.later:  # before the prior's inference that only the draw needs
            raise FirstStageTrained
        return False

    def saved_release(self, name: str) -> Release:
        """The tune's release ``name`` (as :meth:`spend`).

        Parameters
        ----------
        name : str
            The release's name.

        Returns
        -------
        Release
            The tune's release.

        Raises
        ------
        FirstStageTrained
            If ``name`` is one of the ``later`` releases.
        labeldp.errors.RunDirectoryError
            If the tune did not make ``name``.
        """
        return self.spend(name, None)

    def train(self, model, *args: Any, **kwargs: Any) -> None:
        """Train as a run does (without the held-out examples), and keep ``model`` as :attr:`trained`.

        Parameters
        ----------
        model : torch.nn.Module
            The model, trained in place.
        *args, **kwargs
            The rest of :meth:`RunContext.train <labeldp.runs.context.RunContext.train>`'s.
        """
        super().train(model, *args, **kwargs)
        self.trained = model

    def training_part(self, indices: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The training inputs and targets without the held-out examples.

        Parameters
        ----------
        indices : numpy.ndarray
            The training examples' positions.
        targets : numpy.ndarray
            Their targets, one per position.

        Returns
        -------
        tuple of numpy.ndarray
            ``(indices, targets)`` of the examples not held out.
        """
        keep = ~np.isin(indices, self.held_out)
        return indices[keep], targets[keep]

    def evaluation_set(self) -> None:
        """None: a candidate evaluates no epoch on the test set (the test set chooses nothing)."""
        return None


def sealed(data: LabeledDataset) -> LabeledDataset:
    """``data`` with its true training labels withheld (nothing, not even the boundary, can read them):
    what candidates train with.

    Parameters
    ----------
    data : LabeledDataset
        The tune's dataset.

    Returns
    -------
    LabeledDataset
        A copy whose ``y_train`` is withheld labels of the same size and classes.
    """
    return dataclasses.replace(data, y_train=PrivateLabels.withheld(len(data.y_train), data.num_classes))
