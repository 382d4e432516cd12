"""Building a model (models/build.py, and models/names.py, which has little logic and shares this
module): the default model of each input shape produces logits, and bad names and shapes are refused."""

from __future__ import annotations

import pytest
import torch

from labeldp.models import MLP, ConvNet, ResNet18, SmallCNN, WideResNet, build_model, default_model_name


@pytest.mark.parametrize(
    "shape, name, model_type",
    [
        ((1, 28, 28), "convnet", ConvNet),
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


@pytest.mark.parametrize(
    "shape, name, model_type",
    [((1, 28, 28), "cnn", SmallCNN), ((3, 32, 32), "wrn16-4", WideResNet), ((20,), "mlp", MLP)],
)
def test_the_default_for_per_example_gradients_mixes_no_examples(shape, name, model_type) -> None:
    from labeldp.dpsgd import check_per_example_model

    assert default_model_name(shape, per_example=True) == name
    model = build_model(name, shape, 7)
    assert isinstance(model, model_type)
    check_per_example_model(model)


def test_model_errors() -> None:
    with pytest.raises(ValueError, match="square images"):
        build_model("cnn", (1, 30, 30), 10)
    with pytest.raises(ValueError, match="unknown model"):
        build_model("vit", (1, 28, 28), 10)


def test_the_model_s_help_says_the_rule_the_default_follows(capsys) -> None:
    """``labeldp train --help`` words the rule :func:`default_model_name` follows, generated from it."""
    from labeldp.cli import main

    with pytest.raises(SystemExit):
        main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "default: recommender for tables with categorical columns; convnet for 28x28 images (cnn under DP-SGD); "
        "resnet18 for 32x32 images (wrn16-4 under DP-SGD); mlp for other inputs"
    ) in text
    assert default_model_name((20,), (5, 7)) == default_model_name((20,), (5, 7), per_example=True) == "recommender"
