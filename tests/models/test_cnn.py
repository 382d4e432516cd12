"""The CNNs for small square images (models/cnn.py): the batch-norm CNN's shapes and size, and DP-SGD's
refusal of batch norm."""

from __future__ import annotations

import pytest
import torch

from labeldp.dpsgd import check_per_example_model, replace_batchnorm
from labeldp.errors import ConfigError
from labeldp.models import BatchNormCNN, SmallCNN, build_model


@pytest.mark.parametrize("shape", [(1, 28, 28), (3, 32, 32), (1, 8, 8)])
def test_batchnorm_cnn_maps_square_images_to_logits(shape) -> None:
    model = build_model("cnn-bn", shape, 7, seed=0)
    assert isinstance(model, BatchNormCNN)
    assert model(torch.randn(4, *shape)).shape == (4, 7)
    model.eval()
    assert model(torch.randn(1, *shape)).shape == (1, 7)


def test_batchnorm_cnn_has_the_small_cnns_layout_and_the_stated_size() -> None:
    model, small = build_model("cnn-bn", (1, 28, 28), 10), build_model("cnn", (1, 28, 28), 10)
    assert sum(p.numel() for p in model.parameters()) == 417_530
    assert sum(p.numel() for p in small.parameters()) == 417_482
    assert [type(m) for m in model if not isinstance(m, torch.nn.BatchNorm2d)] == [type(m) for m in small]
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in model) == 2


def test_batchnorm_cnn_needs_square_images_with_a_side_divisible_by_4() -> None:
    with pytest.raises(ConfigError, match="model 'cnn-bn' needs square images"):
        build_model("cnn-bn", (1, 30, 30), 10)


def test_dpsgd_refuses_the_batchnorm_cnn_until_its_batch_norm_is_replaced() -> None:
    model = BatchNormCNN()
    with pytest.raises(ValueError, match="mixes the examples of a batch"):
        check_per_example_model(model)
    check_per_example_model(replace_batchnorm(model))
    check_per_example_model(SmallCNN())
