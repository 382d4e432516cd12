"""PATE's teachers (teachers.py): the partition is disjoint and balanced, the queries are fixed, and
teachers resume after a crash without depending on the global generator."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.boundary import PrivateLabels
from labeldp.teachers import partition_teachers, select_queries, train_teachers
from labeldp.training import TrainConfig


def test_partition_is_disjoint_and_balanced_and_queries_are_fixed():
    teacher_of = partition_teachers(1003, 10, seed=3)
    sizes = np.bincount(teacher_of, minlength=10)
    assert sizes.sum() == 1003 and sizes.max() - sizes.min() <= 1
    assert np.array_equal(select_queries(1003, 50, 3), select_queries(1003, 50, 3))
    assert np.unique(select_queries(1003, 50, 3)).size == 50


def _small_teacher_problem():
    gen = np.random.default_rng(0)
    x = gen.normal(size=(120, 6)).astype(np.float32)
    y = PrivateLabels.from_indices((x[:, 0] > 0).astype(np.int64), 2)  # the teachers read private labels
    return x, y, partition_teachers(120, 4, seed=0)


def test_teachers_resume_after_a_crash(tmp_path):
    import torch

    from labeldp.models import build_model

    x, y, teacher_of = _small_teacher_problem()
    config = TrainConfig(epochs=3, batch_size=16)

    def build(t):
        return build_model("mlp", (6,), 2, seed=t)  # each teacher's initialisation from a seed of its own

    full = train_teachers(build, x, y, teacher_of, x[:20], 2, config, seed=1, progress=False)
    checkpoint = tmp_path / "teachers.npz"
    calls = []

    def crash_after_two(t):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(t)
        return build(t)

    with pytest.raises(KeyboardInterrupt):
        train_teachers(
            crash_after_two, x, y, teacher_of, x[:20], 2, config, seed=1, checkpoint=checkpoint, progress=False
        )
    calls.clear()
    torch.randn(5)  # move the global generator: the teachers must not depend on its state
    resumed = train_teachers(
        lambda t: calls.append(t) or build(t),
        x,
        y,
        teacher_of,
        x[:20],
        2,
        config,
        seed=1,
        checkpoint=checkpoint,
        progress=False,
    )
    assert calls == [2, 3]
    assert np.array_equal(resumed, full)
