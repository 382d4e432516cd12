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
    """The method asked to train: every release before training has been made."""


class FirstStageTrained(Exception):
    """A candidate asked for a release drawn after its first stage (scored on that stage's model)."""


class ReleaseContext(RunContext):
    """Runs a method until every release ``names`` is drawn, saved and recorded: a release drawn after
    training (LP-2ST's second stage, with the first stage's model as its prior) trains before it as
    the run would."""

    def __init__(self, *args: Any, names: tuple[str, ...], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.names = names

    def train(self, *args: Any, **kwargs: Any) -> None:
        if all(self.out.load_release(name) is not None for name in self.names):
            raise Released
        super().train(*args, **kwargs)


class CandidateContext(RunContext):
    """One candidate: reads the tune's releases (never draws), trains without the held-out examples,
    and evaluates no epoch on the test set. Where the releases ``later`` than the first stage depend
    on the candidate's options, it stops when it would need one: its first stage's model is scored."""

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
        if name in self.later:
            raise FirstStageTrained
        if name not in self.releases:
            raise RunDirectoryError(
                f"a tuning candidate asked for release {name!r}, which the tune did not make: it "
                "would be a second spend"
            )
        return self.releases[name]

    def will_draw(self, name: str) -> bool:
        if name in self.later:  # before the prior's inference that only the draw needs
            raise FirstStageTrained
        return False

    def saved_release(self, name: str) -> Release:
        return self.spend(name, None)

    def train(self, model, *args: Any, **kwargs: Any) -> None:
        super().train(model, *args, **kwargs)
        self.trained = model

    def training_part(self, indices: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keep = ~np.isin(indices, self.held_out)
        return indices[keep], targets[keep]

    def evaluation_set(self) -> None:
        return None


def sealed(data: LabeledDataset) -> LabeledDataset:
    """``data`` with its true training labels withheld (nothing, not even the boundary, can read them):
    what candidates train with."""
    return dataclasses.replace(data, y_train=PrivateLabels.withheld(len(data.y_train), data.num_classes))
