"""The batch-norm ConvNet (models/convnet.py): shapes and size, channels-last storage, the images it
refuses, the rule that makes it the default for 28x28 images, and DP-SGD's refusal of its batch norm."""

from __future__ import annotations

import pytest
import torch

from labeldp.dpsgd import check_per_example_model
from labeldp.errors import ConfigError
from labeldp.models import ConvNet, build_model, default_model_name


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (1, 17, 30)])
def test_convnet_maps_images_to_logits(shape) -> None:
    model = build_model("convnet", shape, 7, seed=0)
    assert isinstance(model, ConvNet)
    logits = model(torch.randn(4, *shape))
    assert logits.shape == (4, 7)
    logits.sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.eval()
    assert model(torch.randn(1, *shape)).shape == (1, 7)


def test_convnet_has_the_stated_size_and_stores_its_convolutions_channels_last() -> None:
    model = build_model("convnet", (1, 28, 28), 10)
    assert sum(p.numel() for p in model.parameters()) == 73_704
    convolutions = [m for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    assert len(convolutions) == 7
    assert all(c.weight.is_contiguous(memory_format=torch.channels_last) for c in convolutions)
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()) == 6


def test_convnet_gives_the_same_logits_whatever_the_inputs_memory_order() -> None:
    model = build_model("convnet", (1, 28, 28), 10, seed=0).eval()
    x = torch.randn(3, 1, 28, 28)
    torch.testing.assert_close(model(x), model(x.contiguous(memory_format=torch.channels_last)))


def test_a_state_dict_moves_between_convnets() -> None:
    source, target = build_model("convnet", (1, 28, 28), 10, seed=0), build_model("convnet", (1, 28, 28), 10, seed=1)
    target.load_state_dict(source.state_dict())
    x = torch.randn(2, 1, 28, 28)
    torch.testing.assert_close(source.eval()(x), target.eval()(x))


def test_convnet_is_the_default_for_28x28_images() -> None:
    assert default_model_name((1, 28, 28)) == "convnet"
    assert isinstance(build_model(None, (1, 28, 28), 10), ConvNet)


def test_convnet_trains_on_a_batch_of_one_and_refuses_images_smaller_than_17_pixels_a_side() -> None:
    model = build_model("convnet", (1, 17, 17), 10).train()
    model(torch.randn(1, 1, 17, 17)).sum().backward()
    with pytest.raises(ValueError, match="Expected more than 1 value per channel"):  # why 17
        ConvNet()(torch.randn(1, 1, 16, 16))
    with pytest.raises(ConfigError, match="model 'convnet' needs images"):
        build_model("convnet", (1, 16, 28), 10)
    with pytest.raises(ConfigError, match="model 'convnet' needs images"):
        build_model("convnet", (64,), 10)


def test_dpsgd_refuses_the_convnet() -> None:
    with pytest.raises(ValueError, match="mixes the examples of a batch"):
        check_per_example_model(ConvNet())
