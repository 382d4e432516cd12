"""Checkpoints of a training loop, shared by :func:`~labeldp.training.stage.train_stage` and DP-SGD's
:func:`~labeldp.dpsgd.trainer.train_dpsgd`.

A checkpoint is a dict: ``model``, ``optimizer``, ``scheduler``, each trainer's own entries (the
stage's generators and best epoch; DP-SGD's EMA, never its sampling or noise generators), then
``history``. Under ``torchrun`` with ``parallel``, rank 0 alone reads and writes it and hands the
state it read to the others.
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
    """Write ``state`` with ``torch.save`` atomically: a reader sees the old file or the new one."""
    write_atomic(path, lambda tmp: torch.save(state, tmp))


def load_torch(path: Path) -> Any:
    """A file saved by ``torch.save``, or a RunDirectoryError that names it as damaged."""
    try:
        return torch.load(path, weights_only=False)
    except (OSError, RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError) as error:
        raise RunDirectoryError(f"{path} is damaged ({error}); restore it from a copy of the run folder") from None


def read_checkpoint(path: Path | None, *, parallel: bool = False) -> dict | None:
    """The state saved at ``path``, or None; with ``parallel`` (a collective call) rank 0 reads it for every rank."""

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
    """Load ``path`` (if it exists) into the model, optimiser and schedule: ``(state, history)``, or ``(None, [])``.

    The whole state is returned for the caller's own generators; ``parallel`` as in :func:`read_checkpoint`.
    """
    return apply_checkpoint(read_checkpoint(path, parallel=parallel), model, optimizer, scheduler)


def apply_checkpoint(
    state: dict | None,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: torch.optim.lr_scheduler.LRScheduler,
) -> tuple[dict | None, list[EpochRecord]]:
    """:func:`restore_checkpoint` from a state already read (None: start afresh)."""
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
    """The state a checkpoint holds: ``model``, ``optimizer``, ``scheduler``, the ``extra`` entries, ``history``."""
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
    """Write :func:`checkpoint_state` to ``path`` atomically, on rank 0 only; nothing when ``path`` is None."""
    if path is not None and distributed.is_main():
        save_atomic(checkpoint_state(model, optimizer, scheduler, history, **extra), path)
