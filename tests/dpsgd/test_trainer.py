"""The DP-SGD trainer (dpsgd/trainer.py): it learns, resumes after a crash exactly where it stopped,
keeps an EMA that follows its warm-up formula, and averages augmented views."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn
from torch.optim.swa_utils import AveragedModel

from labeldp.boundary import PrivateLabels
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.dpsgd.trainer import _ema_with_warmup, train_dpsgd
from labeldp.randomness import NoiseSource
from labeldp.training import TrainConfig
from tests.helpers import DEVICES

pytestmark = pytest.mark.usefixtures("float64")  # tests/dpsgd/conftest.py


@pytest.mark.parametrize("device", DEVICES)
def test_trainer_learns_resumes_and_keeps_an_ema(tmp_path, device):
    torch.set_default_dtype(torch.float32)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, 10)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    labels = PrivateLabels.from_indices(y, 2)  # DP-SGD reads private labels; the test set's are public
    config = TrainConfig(epochs=4, batch_size=40, lr=0.5, weight_decay=0.0, augment=False)
    dp = DPSGDConfig(max_grad_norm=1.0, ema_decay=0.9, physical_batch_size=16)

    def fresh():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(10, 16), nn.Tanh(), nn.Linear(16, 2)).to(device)

    noise = NoiseSource(insecure_seed=1)  # reproducible noise, so that the resumed run can be compared
    full_model = fresh()
    evaluated, history = train_dpsgd(
        full_model, x, labels, config, dp, 0.5, test=(x, y), seed=1, noise=noise, progress=False
    )
    assert history[-1].test_accuracy > 0.85
    assert any(not torch.equal(a, b) for a, b in zip(evaluated.parameters(), full_model.parameters()))

    # interrupted after two epochs, then resumed: identical to the uninterrupted run
    class Crash(Exception):
        pass

    def crash_after_two(record):
        if record.epoch == 2:
            raise Crash

    path = tmp_path / "checkpoint.pt"
    with pytest.raises(Crash):
        train_dpsgd(
            fresh(),
            x,
            labels,
            config,
            dp,
            0.5,
            seed=1,
            noise=noise,
            checkpoint=path,
            progress=False,
            on_epoch_end=crash_after_two,
        )
    saved = torch.load(path, weights_only=False)
    assert all(row["train_loss"] is None for row in saved["history"])  # no loss on true labels is written
    assert set(saved) == {"model", "optimizer", "scheduler", "ema", "history"}  # no noise or sampling state
    resumed, _ = train_dpsgd(fresh(), x, labels, config, dp, 0.5, seed=1, noise=noise, checkpoint=path, progress=False)
    for a, b in zip(resumed.parameters(), evaluated.parameters()):
        torch.testing.assert_close(a, b)


def test_trainer_averages_augmented_views():
    torch.set_default_dtype(torch.float32)
    x = np.random.default_rng(0).normal(size=(32, 1, 8, 8)).astype(np.float32)
    y = PrivateLabels.from_indices(np.arange(32) % 2, 2)
    config = TrainConfig(epochs=1, batch_size=8, lr=0.1, weight_decay=0.0)

    def trained(augmult: int) -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.Flatten(), nn.Linear(256, 2))
        evaluated, _ = train_dpsgd(
            model,
            x,
            y,
            config,
            DPSGDConfig(augmult=augmult, ema_decay=0.0),
            0.5,
            augmentation="translate",
            seed=3,
            noise=NoiseSource(insecure_seed=3),
            progress=False,
        )
        return [p.detach().clone() for p in evaluated.parameters()]

    two_views = trained(2)
    assert all(torch.equal(a, b) for a, b in zip(two_views, trained(2)))  # seeded: reproducible
    assert any(not torch.equal(a, b) for a, b in zip(two_views, trained(1)))  # other views, another step


@pytest.mark.parametrize("device", DEVICES)
def test_ema_follows_its_warm_up_formula(device):
    """The t-th update (t = 0, 1, ...) is ema <- rate ema + (1 - rate) w with rate = min(decay, (1+t)/(10+t))."""
    model = nn.Linear(3, 2).to(device)
    ema = AveragedModel(model, multi_avg_fn=_ema_with_warmup(0.5), use_buffers=True)
    expected = [p.detach().clone() for p in model.parameters()]  # the first update copies
    for t in range(5):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        ema.update_parameters(model)
        if t > 0:
            rate = min(0.5, (1 + t) / (10 + t))
            expected = [rate * e + (1 - rate) * p.detach() for e, p in zip(expected, model.parameters())]
        else:
            expected = [p.detach().clone() for p in model.parameters()]
    for got, want in zip(ema.module.parameters(), expected):
        torch.testing.assert_close(got, want)
