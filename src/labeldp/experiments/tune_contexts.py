"""The contexts a method runs in during a tune: one that stops once the shared releases are made, and
one per candidate that reads them (never draws) on data whose true labels are withheld."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from labeldp.boundary import PrivateLabels, Release
from labeldp.config.run_config import RunConfig
from labeldp.data import LabeledDataset
from labeldp.errors import RunDirectoryError
from labeldp.runs.context import RunContext
from labeldp.runs.rundir import RunDirectory


class TuneStop(BaseException):
    """The tune stopping a method (not an error): a ``BaseException``, as ``GeneratorExit`` is, so that no
    method's ``except Exception`` swallows it and runs on (training, or drawing, where the tune stopped it)."""


class Released(TuneStop):
    """Raised by :meth:`ReleaseContext.train` to stop the method once the shared releases are made."""


class FirstStageTrained(TuneStop):
    """Raised by :class:`CandidateContext` when a candidate asks for a release drawn after its first stage,
    which is then scored on that stage's model."""


class ReleaseContext(RunContext):
    """A :class:`~labeldp.runs.context.RunContext` that runs a method until every release ``names`` is made
    (saved in the tune folder and recorded on its ledger, as a run does); a release drawn after training
    (LP-2ST's second stage) trains before it as the run would."""

    def __init__(self, *args: Any, names: tuple[str, ...], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.names = names

    def train(self, *args: Any, **kwargs: Any) -> None:
        """Raise :class:`Released` once every release ``names`` is saved; else train as a run does."""
        if all(self.out.load_release(name) is not None for name in self.names):
            raise Released
        super().train(*args, **kwargs)


class CandidateContext(RunContext):
    """One tune candidate's :class:`~labeldp.methods.protocol.MethodContext`: it is handed the tune's
    ``releases`` (it never draws nor records), trains without the ``held_out`` positions, and evaluates no
    epoch on the test set. At a release in ``later`` (drawn after the first stage, depending on the
    candidate's options) it stops, and its first stage's model, :attr:`trained`, is scored."""

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
        """The tune's release ``name``; ``draw`` is never called.

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
        """False (a candidate draws nothing); :class:`FirstStageTrained` at a ``later`` release."""
        if name in self.later:  # before the prior's inference that only the draw needs
            raise FirstStageTrained
        return False

    def saved_release(self, name: str) -> Release:
        """As :meth:`spend`."""
        return self.spend(name, None)

    def train(self, model, *args: Any, **kwargs: Any) -> None:
        """Train as a run does, and keep ``model`` as :attr:`trained`."""
        super().train(model, *args, **kwargs)
        self.trained = model

    def training_part(self, indices: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions and targets not held out."""
        keep = ~np.isin(indices, self.held_out)
        return indices[keep], targets[keep]

    def evaluation_set(self) -> None:
        """None: a candidate evaluates no epoch on the test set (the test set chooses nothing)."""
        return None


def sealed(data: LabeledDataset) -> LabeledDataset:
    """``data`` with its true training labels withheld (not even the boundary can read them): what candidates
    train on."""
    return dataclasses.replace(data, y_train=PrivateLabels.withheld(len(data.y_train), data.num_classes))
