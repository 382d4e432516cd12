"""One training stage (training/stage.py): bad targets refused, resuming from its checkpoint, and value
targets with early stopping on a validation set."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from labeldp.models import MLP
from labeldp.training import TrainConfig, train_stage


def test_stage_rejects_bad_targets() -> None:
    model = MLP((3,), 2)
    with pytest.raises(ValueError, match="class indices"):
        train_stage(model, np.zeros((2, 3)), np.array([0, 2]), 2, TrainConfig(epochs=1), progress=False)
    with pytest.raises(ValueError, match="equal length"):
        train_stage(model, np.zeros((3, 3)), np.array([0, 1]), 2, TrainConfig(epochs=1), progress=False)
    with pytest.raises(ValueError, match="likelihoods of shape"):
        train_stage(model, np.zeros((2, 3)), np.ones((2, 5)), 2, TrainConfig(epochs=1), progress=False)
    with pytest.raises(ValueError, match="optimizer"):
        train_stage(model, np.zeros((2, 3)), np.array([0, 1]), 2, TrainConfig(optimizer="lbfgs"), progress=False)


def test_stage_resumes_from_its_checkpoint(tmp_path) -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(200, 4)).astype(np.float32), rng.integers(0, 3, 200)
    config = TrainConfig(epochs=4, batch_size=32, optimizer="adam", lr=0.01, mixup_alpha=0.4)

    torch.manual_seed(0)
    straight = MLP((4,), 3)
    train_stage(straight, x, y, 3, config, progress=False, seed=3)

    torch.manual_seed(0)
    first = MLP((4,), 3)
    short = TrainConfig(**{**config.__dict__, "epochs": 4})
    calls = []
    with pytest.raises(KeyboardInterrupt):

        def stop_after_two(record):
            calls.append(record)
            if record.epoch == 2:
                raise KeyboardInterrupt

        train_stage(
            first, x, y, 3, short, progress=False, seed=3, checkpoint=tmp_path / "c.pt", on_epoch_end=stop_after_two
        )
    resumed = MLP((4,), 3)
    history = train_stage(resumed, x, y, 3, config, progress=False, seed=3, checkpoint=tmp_path / "c.pt")
    assert [r.epoch for r in history] == [1, 2, 3, 4]
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
