"""PATE for label DP (Papernot et al. 2017, 2018): teachers, their votes, and the student's queries.

The training set is split into disjoint parts, a teacher trained (non-privately) on each, and the
teachers vote on training inputs chosen before any vote is seen (under label DP inputs are public).
A noisy aggregator (:mod:`labeldp.mechanisms.gnmax`) turns the votes into the student's labels.

Privacy: only the aggregated answers leave; replacing one label changes one teacher, which
:mod:`labeldp.accounting.calibration` charges for. The votes themselves are *not* private: they stay
in the run's ``private/`` folder only until the answers are released, so a crash does not retrain
the teachers.
"""

from __future__ import annotations

import dataclasses
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from labeldp import distributed
from labeldp.boundary import PrivateLabels, unseal
from labeldp.config.pate_config import PATEConfig
from labeldp.config.train_config import TrainConfig
from labeldp.errors import RunDirectoryError
from labeldp.files import write_atomic
from labeldp.randomness import public_rng, public_seed
from labeldp.training.predictions import predict_logits
from labeldp.training.stage import train_stage


def partition_teachers(num_examples: int, teachers: int, seed: int) -> np.ndarray:
    """Each example's teacher: ``teachers`` parts of sizes differing by at most one, from a public stream."""
    order = public_rng(seed, "pate-partition").permutation(num_examples)
    teacher_of = np.empty(num_examples, dtype=np.int64)
    teacher_of[order] = np.arange(num_examples) % teachers
    return teacher_of


def select_queries(num_inputs: int, queries: int, seed: int) -> np.ndarray:
    """The sorted indices of the public inputs the teachers are asked about (public stream ``pate-queries``)."""
    return np.sort(public_rng(seed, "pate-queries").choice(num_inputs, size=queries, replace=False))


def _save_predictions(path: Path, predictions: np.ndarray, done: int) -> None:
    write_atomic(path, lambda tmp: np.savez(tmp, predictions=predictions, done=np.array(done)))


def train_teachers(
    build_model: Callable[[int], nn.Module],
    inputs: np.ndarray,
    labels: PrivateLabels,
    teacher_of: np.ndarray,
    query_inputs: np.ndarray,
    num_classes: int,
    config: TrainConfig,
    *,
    augmentation: str = "none",
    seed: int = 0,
    checkpoint: str | os.PathLike | None = None,
    progress: bool = True,
    parallel: bool = False,
) -> np.ndarray | None:
    """Train one teacher per part of (``inputs``, ``labels``); their (teachers, queries) int16 votes.

    Reads the private labels and releases nothing: the votes are *not* private and may leave only through
    :func:`~labeldp.boundary.release_pate_labels`, which records the spend. Teacher t is
    ``build_model(t)``, trained on ``teacher_of == t`` from the public stream ``pate-training``. With
    ``checkpoint``, the finished teachers' votes are saved after each and a rerun continues with the next.
    With ``parallel`` (a collective call of a torchrun group) the ranks train a teacher each per round and
    rank 0 alone touches the checkpoint and returns the votes (None on the others).

    Raises
    ------
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld (they can be read only through earlier releases).
    """
    true_labels = unseal(labels)  # the teachers read the true labels: their votes leave only through GNMax's noise
    teachers = int(teacher_of.max()) + 1
    predictions = np.zeros((teachers, len(query_inputs)), dtype=np.int16)
    path = Path(checkpoint) if checkpoint is not None else None

    def resume() -> int:
        nonlocal predictions
        if path is not None and path.exists():
            try:
                with np.load(path) as saved:
                    if saved["predictions"].shape == predictions.shape:
                        predictions = saved["predictions"]
                        return int(saved["done"])
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:
                raise RunDirectoryError(
                    f"{path} is damaged ({error}); delete it: the teachers it holds (raw votes, "
                    "nothing released yet) are trained again"
                ) from None
        return 0

    if parallel and distributed.active():
        done = distributed.on_main(resume)  # first: it replaces ``predictions`` with the saved votes on rank 0
        return _train_teachers_in_rounds(
            build_model,
            inputs,
            true_labels,
            teacher_of,
            query_inputs,
            num_classes,
            config,
            augmentation,
            seed,
            path,
            progress,
            predictions,
            done,
        )
    done = resume()
    bar = tqdm(
        range(done, teachers),
        desc="teachers",
        unit="teacher",
        disable=None if progress else True,
        initial=done,
        total=teachers,
    )
    for teacher in bar:
        part = np.flatnonzero(teacher_of == teacher)
        model = build_model(teacher)
        train_stage(
            model,
            inputs[part],
            true_labels[part],
            num_classes,
            config,
            augmentation=augmentation,
            seed=public_seed(seed, "pate-training", teacher),
            progress=False,
        )
        predictions[teacher] = predict_logits(model, query_inputs).argmax(dim=1).numpy()
        if path is not None:
            _save_predictions(path, predictions, teacher + 1)
    return predictions


def _train_teachers_in_rounds(
    build_model: Callable[[int], nn.Module],
    inputs: np.ndarray,
    labels: np.ndarray,
    teacher_of: np.ndarray,
    query_inputs: np.ndarray,
    num_classes: int,
    config: TrainConfig,
    augmentation: str,
    seed: int,
    path: Path | None,
    progress: bool,
    predictions: np.ndarray,
    done: int,
) -> np.ndarray | None:
    """:func:`train_teachers` across the ranks: teacher ``done + round * ranks + rank`` on each rank."""
    teachers, ranks, me = len(predictions), distributed.world_size(), distributed.rank()
    rounds = tqdm(range(done, teachers, ranks), desc="teachers", unit="round", disable=None if progress else True)
    for first in rounds:
        teacher, votes = first + me, None
        if teacher < teachers:
            part = np.flatnonzero(teacher_of == teacher)
            model = build_model(teacher)
            train_stage(
                model,
                inputs[part],
                labels[part],
                num_classes,
                config,
                augmentation=augmentation,
                seed=public_seed(seed, "pate-training", teacher),
                progress=False,
            )
            votes = predict_logits(model, query_inputs).argmax(dim=1).numpy().astype(np.int16)
        # each rank's (teacher, votes), gathered on rank 0
        collected: list[Any] | None = [None] * ranks if distributed.is_main() else None
        torch.distributed.gather_object((teacher, votes), collected, dst=0)
        if collected is not None:
            for teacher, votes in collected:
                if votes is not None:
                    predictions[teacher] = votes
            if path is not None:
                _save_predictions(path, predictions, min(first + ranks, teachers))
    return predictions if distributed.is_main() else None


def teacher_train_config(student: TrainConfig, config: PATEConfig) -> TrainConfig:
    """The teachers' training settings: the student's, with PATE's epochs and batch size and no mixup."""
    return dataclasses.replace(
        student, epochs=config.teacher_epochs, batch_size=config.teacher_batch_size, mixup_alpha=0.0
    )
