"""PATE for label DP (Papernot et al. 2017, 2018): teachers, their votes, and the student's data.

The labelled training set is split into ``teachers`` disjoint parts, one teacher is trained (non-
privately) on each, and the teachers vote on ``queries`` public inputs chosen before any vote is seen.
A noisy aggregator (:mod:`labeldp.mechanisms.gnmax`) turns the votes into labels, and the student
is trained on the answered queries only. Under label DP every input is public, so the queries are
training inputs; the test set is left for evaluation.

Privacy: only the aggregated answers leave the teachers. Replacing one label changes one teacher,
which is what :mod:`labeldp.accounting.calibration` charges for. The teachers' own predictions are *not*
private: they are kept in the run's ``private/`` folder only until the answers are released, so that
a crash does not retrain the teachers, and deleted after.
"""

from __future__ import annotations

import dataclasses
import os
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from labeldp import distributed
from labeldp.boundary import PrivateLabels, unseal
from labeldp.config.pate import PATEConfig
from labeldp.config.train import TrainConfig
from labeldp.errors import RunDirectoryError
from labeldp.files import write_atomic
from labeldp.randomness import public_rng, public_seed
from labeldp.training.predict import predict_logits
from labeldp.training.stage import train_stage


def partition_teachers(num_examples: int, teachers: int, seed: int) -> np.ndarray:
    """Each example's teacher: a random split into ``teachers`` parts whose sizes differ by at most one.

    The split depends on public settings only (the public stream ``"pate-partition"``), never on a label.

    Parameters
    ----------
    num_examples : int
        The number of training examples.
    teachers : int
        The number of teachers (parts).
    seed : int
        The run's public seed.

    Returns
    -------
    numpy.ndarray
        (num_examples,) int64, each example's teacher in [0, teachers).
    """
    order = public_rng(seed, "pate-partition").permutation(num_examples)
    teacher_of = np.empty(num_examples, dtype=np.int64)
    teacher_of[order] = np.arange(num_examples) % teachers
    return teacher_of


def select_queries(num_inputs: int, queries: int, seed: int) -> np.ndarray:
    """The indices of the public inputs the teachers are asked about (fixed before any vote).

    Parameters
    ----------
    num_inputs : int
        The number of public inputs to choose from.
    queries : int
        How many to choose (at most ``num_inputs``).
    seed : int
        The run's public seed (the public stream ``"pate-queries"``).

    Returns
    -------
    numpy.ndarray
        (queries,) distinct indices in [0, num_inputs), sorted.
    """
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
    """Train one teacher per part of (``inputs``, ``labels``) and return their votes on ``query_inputs``,
    a (teachers, queries) array of class indices.

    ``build_model(t)`` returns teacher t's fresh model (initialised from a seed of its own); it trains
    with ``config`` on the examples with ``teacher_of == t`` only. With ``checkpoint``, the votes of
    finished teachers are saved after each one and a rerun continues with the next teacher.

    With ``parallel`` (a collective call of every rank of a torchrun group; ignored in one process)
    the ranks train the teachers in rounds, one each per round; rank 0 alone reads and writes the
    ``checkpoint``, collects the votes and returns them (the other ranks return None). The votes are
    computed from true labels without noise: they leave a rank only for rank 0's memory.

    Reads the private labels (:func:`~labeldp.boundary.unseal`) and releases nothing: the votes are
    *not* private, and may leave the teachers only through PATE's noisy aggregator
    (:func:`~labeldp.boundary.release_pate_labels`), which records the spend.

    Parameters
    ----------
    build_model : callable
        ``build_model(t)`` -> teacher t's fresh ``torch.nn.Module``.
    inputs : numpy.ndarray
        The training inputs (public), one row per example.
    labels : PrivateLabels
        The true training labels, class positions in [0, num_classes) (a plain array is refused).
    teacher_of : numpy.ndarray
        (n,) each example's teacher (:func:`partition_teachers`); the number of teachers is its
        maximum plus one.
    query_inputs : numpy.ndarray
        The public inputs the teachers vote on.
    num_classes : int
        K, the number of classes.
    config : TrainConfig
        The teachers' training settings (:func:`teacher_train_config`).
    augmentation : str, optional
        The dataset's data augmentation (default ``"none"``).
    seed : int, optional
        The run's public seed; teacher t trains from the public stream ``"pate-training"`` with id t
        (default 0).
    checkpoint : str or os.PathLike or None, optional
        The ``.npz`` file of the finished teachers' votes (default None: none kept).
    progress : bool, optional
        Show a progress bar (default True).
    parallel : bool, optional
        Train across the ranks of a torchrun group (default False).

    Returns
    -------
    numpy.ndarray or None
        (teachers, queries) int16 class indices, each teacher's vote on each query; None on the ranks
        other than rank 0 in a parallel run.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If ``checkpoint`` exists but cannot be read.
    labeldp.boundary.PrivateLabelAccessError
        If ``labels`` were withheld (they can be read only through earlier releases).
    """
    labels = unseal(labels)  # the teachers read the true labels: their votes leave only through GNMax's noise
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
            labels,
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
            labels[part],
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
        collected = [None] * ranks if distributed.is_main() else None
        torch.distributed.gather_object((teacher, votes), collected, dst=0)
        if distributed.is_main():
            for teacher, votes in collected:
                if votes is not None:
                    predictions[teacher] = votes
            if path is not None:
                _save_predictions(path, predictions, min(first + ranks, teachers))
    return predictions if distributed.is_main() else None


def teacher_train_config(student: TrainConfig, config: PATEConfig) -> TrainConfig:
    """The teachers' training settings: the student's, with PATE's own epochs and batch size.

    Parameters
    ----------
    student : TrainConfig
        The student's (the run's) training settings.
    config : PATEConfig
        PATE's settings (``teacher_epochs``, ``teacher_batch_size``).

    Returns
    -------
    TrainConfig
        A copy of ``student`` with PATE's teacher epochs and batch size, and mixup turned off.
    """
    return dataclasses.replace(
        student, epochs=config.teacher_epochs, batch_size=config.teacher_batch_size, mixup_alpha=0.0
    )
