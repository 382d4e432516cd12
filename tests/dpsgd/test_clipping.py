"""Per-example clipping (dpsgd/clipping.py): the clipped sum of per-example gradients equals a loop over
examples for every supported model, with views averaged before clipping, frozen layers, and inputs
or tensors that require gradients; TF32 is off inside and the user's settings are restored;
BatchNorm and what the fast path cannot do are refused (with a fix, or a fallback)."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from labeldp.dpsgd import UnsupportedModelError, clipped_gradient_sum, cross_entropy_per_example, replace_batchnorm
from tests.dpsgd.reference import cases, loop_reference
from tests.helpers import DEVICES

pytestmark = pytest.mark.usefixtures("float64")  # tests/dpsgd/conftest.py


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("method", ["fast", "vmap"])
@pytest.mark.parametrize("max_grad_norm", [0.05, math.inf])
@pytest.mark.parametrize("case", list(cases()))
def test_clipped_sum_matches_per_example_loop(case, max_grad_norm, method, device):
    model, x, y = cases()[case]
    model, x, y = model.to(device), x.to(device), y.to(device)
    expected, expected_norms = loop_reference(model, x, y, max_grad_norm)
    got = clipped_gradient_sum(model, x, y, max_grad_norm, method=method, physical_batch_size=4)
    assert len(got.sums) == len(expected)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm().clamp(min=1e-30)) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)
    assert all(p.grad is None for p in model.parameters())  # the model's own gradients are untouched


@pytest.mark.parametrize("method", ["fast", "vmap"])
@pytest.mark.parametrize("case", ["ws-groupnorm-conv", "ws-ghost-inplace", "wideresnet"])
def test_augmentation_multiplicity_averages_views_before_clipping(case, method):
    model, x, y = cases()[case]
    x = torch.randn(len(x), 3, *x.shape[1:])  # 3 views of each example
    expected, expected_norms = loop_reference(model, x, y, 0.05, views=True)
    got = clipped_gradient_sum(model, x, y, 0.05, method=method, multiple_views=True)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


def test_partly_frozen_layers_match_the_loop():
    model, x, y = cases()["ws-groupnorm-conv"]
    model.ws.weight.requires_grad_(False)  # a conv with only its bias trainable
    model.gn.bias.requires_grad_(False)  # a GroupNorm with only its weight trainable
    expected, expected_norms = loop_reference(model, x, y, 0.05)
    got = clipped_gradient_sum(model, x, y, 0.05, method="fast")
    assert len(got.sums) == len(expected)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


@pytest.mark.parametrize("method", ["fast", "vmap"])
def test_inputs_that_require_gradients_are_taken_as_constants(method):
    model, x, y = cases()["cnn-inplace-relu"]
    expected, expected_norms = loop_reference(model, x, y, 0.05)
    got = clipped_gradient_sum(model, x.clone().requires_grad_(), y, 0.05, method=method)
    assert not any(total.requires_grad for total in got.sums)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)


class ExternalScale(nn.Module):
    """Linear layers fed with tensors that require gradients but are no parameters: ``where`` says
    where ``scale`` enters -- before the first layer, into a branch of its own, or between layers."""

    def __init__(self, where: str):
        super().__init__()
        self.where = where
        self.scale = torch.linspace(0.5, 2.0, 4).requires_grad_()  # a plain tensor, not a parameter
        self.first, self.second = nn.Linear(4, 4), nn.Linear(4, 3)

    def forward(self, x):
        if self.where == "input":
            return self.second(torch.tanh(self.first(x * self.scale)))
        if self.where == "branch":  # the second layer's input owes its gradient to ``scale`` alone
            return self.second(x * self.scale) + self.first(x)[:, :3]
        return self.second(torch.tanh(self.first(x)) * self.scale)


@pytest.mark.parametrize("method", ["fast", "vmap"])
@pytest.mark.parametrize("where", ["input", "branch", "between"])
def test_tensors_that_require_gradients_outside_the_parameters_are_constants(where, method):
    torch.manual_seed(0)
    model, x, y = ExternalScale(where), torch.randn(6, 4), torch.randint(0, 3, (6,))
    expected, expected_norms = loop_reference(model, x, y, 0.5)
    got = clipped_gradient_sum(model, x, y, 0.5, method=method)
    assert not any(total.requires_grad for total in got.sums)
    for ours, reference in zip(got.sums, expected):
        assert float((ours - reference).norm() / reference.norm()) < 1e-5
    torch.testing.assert_close(got.norms, expected_norms, rtol=1e-5, atol=1e-12)
    assert model.scale.grad is None


def _tf32_settings() -> tuple:
    backends = torch.backends
    return (backends.cudnn.conv.fp32_precision, backends.cudnn.rnn.fp32_precision, backends.cuda.matmul.fp32_precision)


@pytest.mark.skipif(not hasattr(torch.backends.cuda.matmul, "fp32_precision"), reason="torch < 2.9: no fp32_precision")
@pytest.mark.parametrize("user_setting", ["legacy", "new"])
@pytest.mark.parametrize("method", ["fast", "vmap"])
def test_clipped_sum_runs_without_tf32_and_restores_the_settings(method, user_setting):
    """TF32 off inside, whichever of torch's two APIs the user turned it on with; theirs restored."""
    seen = []

    def recording_loss(outputs, targets):
        seen.append(_tf32_settings())
        return cross_entropy_per_example(outputs, targets)

    backends, before = torch.backends, _tf32_settings()
    try:
        if user_setting == "legacy":
            backends.cudnn.allow_tf32 = backends.cuda.matmul.allow_tf32 = True
        else:
            backends.cudnn.conv.fp32_precision = backends.cuda.matmul.fp32_precision = "tf32"
        users = _tf32_settings()
        model, x, y = cases()["tanh-cnn"]
        clipped_gradient_sum(model, x, y, 1.0, recording_loss, method=method, physical_batch_size=2)
        assert seen and all(flags == ("ieee", "ieee", "ieee") for flags in seen)
        assert _tf32_settings() == users
        if user_setting == "legacy":
            assert backends.cudnn.allow_tf32 and backends.cuda.matmul.allow_tf32
    finally:
        backends.cudnn.conv.fp32_precision, backends.cudnn.rnn.fp32_precision, backends.cuda.matmul.fp32_precision = (
            before
        )


@pytest.mark.parametrize("method", ["auto", "fast", "vmap"])
def test_batchnorm_is_refused_with_a_fix(method):
    model = nn.Sequential(nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.Flatten(), nn.Linear(4 * 26 * 26, 2))
    x, y = torch.randn(2, 1, 28, 28), torch.tensor([0, 1])
    with pytest.raises(UnsupportedModelError, match="GroupNorm"):
        clipped_gradient_sum(model, x, y, 1.0, method=method)
    fixed = replace_batchnorm(model)
    assert isinstance(fixed[1], nn.GroupNorm) and fixed[1].num_channels == 4
    clipped_gradient_sum(fixed, x, y, 1.0, method=method)


def test_fast_path_refuses_what_it_cannot_do_and_auto_falls_back():
    model = nn.Sequential(nn.Conv2d(2, 4, 3, groups=2), nn.Flatten(), nn.Linear(4 * 4 * 4, 3))
    x, y = torch.randn(3, 2, 6, 6), torch.tensor([0, 1, 2])
    with pytest.raises(UnsupportedModelError, match="groups"):
        clipped_gradient_sum(model, x, y, 1.0, method="fast")
    expected, _ = loop_reference(model, x, y, 0.1)
    for ours, reference in zip(clipped_gradient_sum(model, x, y, 0.1, method="auto").sums, expected):
        torch.testing.assert_close(ours, reference)
    shared = nn.Linear(4, 4)
    reused = nn.Sequential(shared, nn.Tanh(), shared)
    with pytest.raises(UnsupportedModelError, match="more than once"):
        clipped_gradient_sum(reused, torch.randn(2, 4), torch.tensor([0, 1]), 1.0, method="fast")


def test_unsupported_models_are_a_labeldp_error_and_still_a_value_error() -> None:
    from labeldp.dpsgd.clipping import UnsupportedModelError
    from labeldp.errors import ConfigError, LabelDPError

    assert issubclass(UnsupportedModelError, LabelDPError) and issubclass(UnsupportedModelError, ConfigError)
    assert issubclass(UnsupportedModelError, ValueError)
