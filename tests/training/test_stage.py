"""Models, augmentations, the likelihood loss and one training stage."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.func import grad as grad_of
from torch.func import vmap

from labeldp.mechanisms import randomized_response, randomized_response_likelihood
from labeldp.models import MLP, ResNet18, SmallCNN, WSConv2d, build_model, default_model_name
from labeldp.models.pooling import MaxPool2d
from labeldp.training import TrainConfig, accuracy, predict_proba, train_stage
from labeldp.training.augment import augment, mixup, random_crop
from labeldp.training.losses import likelihood_loss


@pytest.mark.parametrize(
    "shape, name, model_type",
    [
        ((1, 28, 28), "cnn", SmallCNN),
        ((3, 32, 32), "resnet18", ResNet18),
        ((20,), "mlp", MLP),
        ((1, 8, 8), "mlp", MLP),
    ],
)
def test_default_models_produce_logits(shape, name, model_type) -> None:
    assert default_model_name(shape) == name
    model = build_model(None, shape, 7)
    assert isinstance(model, model_type)
    assert model(torch.zeros(2, *shape)).shape == (2, 7)


def test_model_errors() -> None:
    with pytest.raises(ValueError, match="square images"):
        build_model("cnn", (1, 30, 30), 10)
    with pytest.raises(ValueError, match="unknown model"):
        build_model("vit", (1, 28, 28), 10)


def test_weight_standardisation_is_per_output_channel() -> None:
    torch.manual_seed(0)
    conv = WSConv2d(6, 5, 3, eps=1e-5)
    with torch.no_grad():
        conv.weight.mul_(torch.arange(1.0, 6.0).view(5, 1, 1, 1)).add_(3.0)  # channels of different scales
    weight = conv.weight.detach().double().flatten(1)
    expected = (weight - weight.mean(1, keepdim=True)) / torch.sqrt(weight.var(1, keepdim=True, unbiased=False) + 1e-5)
    torch.testing.assert_close(conv.standardized_weight().detach().double().flatten(1), expected, rtol=1e-5, atol=1e-5)
    standardized, scale = conv.standardization()
    torch.testing.assert_close(standardized.double(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(scale.double().squeeze(1), torch.sqrt(weight.var(1, unbiased=False) + 1e-5))
    x = torch.randn(2, 6, 7, 7)
    torch.testing.assert_close(
        conv(x), F.conv2d(x, expected.float().view_as(conv.weight), conv.bias), rtol=1e-4, atol=1e-5
    )


@pytest.mark.parametrize(
    "settings",
    [
        dict(kernel_size=2),
        dict(kernel_size=2, stride=1),
        dict(kernel_size=3, stride=2, padding=1),
        dict(kernel_size=(2, 3), stride=(1, 2), dilation=2, ceil_mode=True),
    ],
)
@pytest.mark.parametrize("shape", [(4, 3, 9, 11), (3, 9, 11)])
def test_max_pool_matches_torch_bit_for_bit(settings, shape) -> None:
    torch.manual_seed(0)
    x = torch.round(torch.randn(shape) * 2)  # values on a coarse grid: many windows with tied maxima
    x[..., 0, :3] = float("nan")
    x = x.requires_grad_()
    ours, theirs = MaxPool2d(**settings, return_indices=True), torch.nn.MaxPool2d(**settings, return_indices=True)
    (values, indices), (expected_values, expected_indices) = ours(x), theirs(x)
    assert torch.equal(values.isnan(), expected_values.isnan()) and values.isnan().any()
    assert torch.equal(values.nan_to_num(), expected_values.nan_to_num()) and torch.equal(indices, expected_indices)
    grad_output = torch.randn_like(values)
    (grad,), (expected_grad,) = (
        torch.autograd.grad(values, x, grad_output),
        torch.autograd.grad(expected_values, x, grad_output),
    )
    assert torch.equal(grad, expected_grad) and grad.is_contiguous()
    # per-example gradients through torch.func, as the general DP-SGD clipping path takes them
    batch = torch.randn(5, *shape)

    def squares(pool):
        return lambda t: pool(t)[0].pow(2).sum()

    assert torch.equal(vmap(grad_of(squares(ours)))(batch), vmap(grad_of(squares(theirs)))(batch))


def test_random_crop_is_a_translation() -> None:
    images = torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).reshape(2, 1, 6, 6) + 1
    out = random_crop(images, 2, torch.Generator().manual_seed(0))
    assert out.shape == images.shape
    for i in range(2):
        found = False
        for dy in range(-2, 3):
            for dx in range(-2, 3):
                padded = F.pad(images[i, 0], (2, 2, 2, 2))
                shifted = padded[2 + dy : 8 + dy, 2 + dx : 8 + dx]
                found |= torch.equal(shifted, out[i, 0])
        assert found
    flipped = augment(images, "crop-flip", torch.Generator().manual_seed(1))
    assert flipped.shape == images.shape
    assert torch.equal(augment(images, "none", torch.Generator()), images)


def test_mixup_mixes_with_a_permutation() -> None:
    x = torch.eye(4)
    mixed, perm = mixup(x, 0.75, torch.Generator().manual_seed(0))
    assert torch.allclose(mixed, 0.75 * x + 0.25 * x[perm])
    assert sorted(perm.tolist()) == [0, 1, 2, 3]


def test_likelihood_loss_with_one_hot_is_cross_entropy() -> None:
    logits = torch.randn(5, 4)
    labels = torch.tensor([0, 3, 1, 1, 2])
    one_hot_log = F.one_hot(labels, 4).float().log()
    assert torch.allclose(likelihood_loss(logits, one_hot_log), F.cross_entropy(logits, labels, reduction="none"))


def test_forward_loss_recovers_clean_posteriors_from_rr_labels() -> None:
    """With heavy RR noise, plain CE learns flat noisy-label probabilities; the forward loss learns
    the clean ones (max probability near 1 on separable data)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 4, size=(5, 10))
    y = rng.integers(0, 5, 3000)
    x = (centers[y] + rng.normal(size=(3000, 10))).astype(np.float32)
    noisy = randomized_response(y, 5, 0.7, rng=1)
    config = TrainConfig(epochs=15, batch_size=100, lr=0.05, weight_decay=0.0, augment=False)
    results = {}
    for loss, targets in (("ce", noisy), ("forward", randomized_response_likelihood(noisy, 5, 0.7))):
        torch.manual_seed(0)
        model = MLP((10,), 5, hidden=(64,))
        train_stage(model, x, targets, 5, config, progress=False)
        results[loss] = (predict_proba(model, x).max(axis=1).mean(), accuracy(model, x, y))
    assert results["ce"][0] < 0.6 < 0.9 < results["forward"][0]
    assert results["forward"][1] > 0.95


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
