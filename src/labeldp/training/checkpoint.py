"""Checkpoints of a training loop, shared by :func:`~labeldp.training.stage.train_stage` and DP-SGD's
:func:`~labeldp.dpsgd.trainer.train_dpsgd`: the files (written atomically, read with an error that
names a damaged one) and the state they hold.

A checkpoint is a dict: ``model``, ``optimizer``, ``scheduler``, then each trainer's own entries (the
stage's random generators and best validation epoch; DP-SGD's EMA, and never its sampling or noise
generators), then ``history``, the epochs so far. Under ``torchrun`` with ``parallel``, rank 0 alone
reads and writes it and the other ranks receive the state it read.
"""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from labeldp import distributed
from labeldp.errors import RunDirectoryError
from labeldp.files import write_atomic
from labeldp.training.records import EpochRecord


def save_atomic(state: dict, path: Path) -> None:
    """Write ``state`` with ``torch.save`` to ``path`` atomically (a reader sees the old file or the new one).

    Parameters
    ----------
    state : dict
        What to save: a checkpoint, a model's state dict.
    path : pathlib.Path
        The file.
    """
    write_atomic(path, lambda tmp: torch.save(state, tmp))


def load_torch(path: Path) -> Any:
    """A file saved by ``torch.save`` (a checkpoint, a model), or an error that names it.

    Parameters
    ----------
    path : pathlib.Path
        The file.

    Returns
    -------
    object
        What the file holds.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If the file cannot be read or unpickled.
    """
    try:
        return torch.load(path, weights_only=False)
    except (OSError, RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as error:
        raise RunDirectoryError(f"{path} is damaged ({error}); restore it from a copy of the run folder") from None


def read_checkpoint(path: Path | None, *, parallel: bool = False) -> dict | None:
    """The state saved at ``path``, or None when there is none. With ``parallel`` (a collective call of
    every process of a ``torchrun`` group) rank 0 reads it and every rank receives it.

    Parameters
    ----------
    path : pathlib.Path or None
        The checkpoint file (None: no checkpoint).
    parallel : bool, optional
        Read on rank 0 only and hand the state to every rank.

    Returns
    -------
    dict or None
        The saved state.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If the file is damaged (on every rank under ``parallel``).
    """

    def read() -> dict | None:
        return load_torch(path) if path is not None and path.exists() else None

    return distributed.on_main(read) if parallel else read()


def restore_checkpoint(
    path: Path | None,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    *,
    parallel: bool = False,
) -> tuple[dict | None, list[EpochRecord]]:
    """Load ``path`` (if it exists) into the model, optimiser and schedule; return the whole saved state
    (for the caller's own generators) and the epoch history, or (None, []) when there is none.

    Parameters
    ----------
    path : pathlib.Path or None
        The checkpoint file (None: no checkpoint).
    model : torch.nn.Module
        Receives the saved weights.
    optimizer : torch.optim.Optimizer
        Receives the saved optimiser state.
    scheduler : torch.optim.lr_scheduler.LRScheduler
        Receives the saved schedule state.
    parallel : bool, optional
        Rank 0 reads the file and every rank resumes from it (:func:`read_checkpoint`).

    Returns
    -------
    tuple
        The saved state (a dict, or None) and the epochs it records (a list of
        :class:`~labeldp.training.records.EpochRecord`).

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If the file is damaged.
    """
    return apply_checkpoint(read_checkpoint(path, parallel=parallel), model, optimizer, scheduler)


def apply_checkpoint(
    state: dict | None,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> tuple[dict | None, list[EpochRecord]]:
    """:func:`restore_checkpoint` from a state already read (None: start afresh).

    Parameters
    ----------
    state : dict or None
        A checkpoint's state, as read by :func:`read_checkpoint`.
    model : torch.nn.Module
        Receives the saved weights.
    optimizer : torch.optim.Optimizer
        Receives the saved optimiser state.
    scheduler : torch.optim.lr_scheduler.LRScheduler
        Receives the saved schedule state.

    Returns
    -------
    tuple
        ``state`` and the epochs it records (a list of :class:`~labeldp.training.records.EpochRecord`),
        or (None, []).
    """
    if state is None:
        return None, []
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    return state, [EpochRecord(**row) for row in state["history"]]


def checkpoint_state(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    history: Sequence[EpochRecord],
    **extra: Any,
) -> dict:
    """The state a checkpoint holds: the model, optimiser and schedule, the trainer's own ``extra``
    entries, and the history.

    Parameters
    ----------
    model : torch.nn.Module
        The model being trained.
    optimizer : torch.optim.Optimizer
        Its optimiser.
    scheduler : torch.optim.lr_scheduler.LRScheduler
        Its learning-rate schedule.
    history : sequence of EpochRecord
        The epochs so far.
    **extra
        The trainer's own entries, saved in the order given.

    Returns
    -------
    dict
        The state, in the order ``model``, ``optimizer``, ``scheduler``, the extra entries, ``history``.
    """
    return {
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "scheduler": scheduler.state_dict(),
        **extra,
        "history": [asdict(record) for record in history],
    }


def save_checkpoint(
    path: Path | None,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
    history: Sequence[EpochRecord],
    **extra: Any,
) -> None:
    """Write :func:`checkpoint_state` to ``path`` atomically, on rank 0 only (the other processes of a
    ``torchrun`` group write nothing); nothing when ``path`` is None.

    Parameters
    ----------
    path : pathlib.Path or None
        The checkpoint file (None: no checkpoint).
    model : torch.nn.Module
        The model being trained.
    optimizer : torch.optim.Optimizer
        Its optimiser.
    scheduler : torch.optim.lr_scheduler.LRScheduler
        Its learning-rate schedule.
    history : sequence of EpochRecord
        The epochs so far.
    **extra
        The trainer's own entries.
    """
    if path is not None and distributed.is_main():
        save_atomic(checkpoint_state(model, optimizer, scheduler, history, **extra), path)
