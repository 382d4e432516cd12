"""Per-example gradient clipping: the sum over a batch of per-example gradients, each scaled to norm at
most ``max_grad_norm``, for any ``nn.Module``, without wrapping or changing it.

``method``: ``"fast"`` hooks each layer's input and backpropagates to the layer *outputs* only, each
layer's per-example norms coming from (input, output gradient) by the rules of
:mod:`~labeldp.dpsgd.layer_rules` (per-example gradients formed, or the "ghost" Gram identity
||sum_t g_t a_t^T||^2 = sum_{t,s} (a_t . a_s)(g_t . g_s), whichever is cheaper); it takes Linear,
Conv2d (``groups=1``, zero padding), :class:`labeldp.models.WSConv2d`, Embedding, LayerNorm and
GroupNorm, each called once per forward pass. ``"vmap"`` is ``torch.func.vmap(grad(...))`` over any
per-example module; ``"auto"`` takes ``fast`` where it can. Tensors other than the trainable
parameters are constants on both paths. BatchNorm mixes examples and is refused
(:func:`replace_batchnorm`). With inputs (B, M, ...) of M augmentations per example (De et al. 2022),
an example's gradient is that of its mean loss over its views, clipped once.

The bound C holds up to float32 rounding. TF32, on by default for convolutions on recent NVIDIA GPUs,
rounds to a relative 5e-4 on sums of up to B terms of norm C, a sizeable fraction of C on large
batches, so it is turned off while the clipped sum is computed.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from labeldp.config.dpsgd import CLIPPING_METHODS
from labeldp.dpsgd import layer_rules
from labeldp.errors import ConfigError

#: per-example loss: (outputs (N, ...), targets (N, ...)) -> losses (N,)
PerExampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
METHODS = CLIPPING_METHODS  # where DPSGDConfig declares them
_CROSS_EXAMPLE = (nn.modules.batchnorm._BatchNorm, nn.SyncBatchNorm)
_NORM_EPSILON = 1e-6


def cross_entropy_per_example(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each example (the default per-example loss)."""
    return F.cross_entropy(outputs, targets, reduction="none")


@dataclass
class ClippedGradients:
    """Result of :func:`clipped_gradient_sum`.

    Only the sums, once noised, are private; the norms (like the losses, not returned) depend on the
    examples without noise and must not be logged or written.

    Attributes
    ----------
    sums : list of torch.Tensor
        For each trainable parameter (``model.parameters()`` order), the sum of the clipped per-example gradients.
    norms : torch.Tensor
        (B,) each example's gradient norm before clipping (not private).
    """

    sums: list[torch.Tensor]
    norms: torch.Tensor

    def add_(self, other: ClippedGradients) -> ClippedGradients:
        """Add ``other``'s sums in place and append its norms (a batch processed in chunks); ``self``."""
        for total, part in zip(self.sums, other.sums):
            total.add_(part)
        self.norms = torch.cat([self.norms, other.norms])
        return self


class UnsupportedModelError(ConfigError):
    """The model cannot give per-example gradients (BatchNorm), or not on the requested path.

    A :class:`~labeldp.errors.ConfigError` (the command line prints it as one line), and so a ``ValueError``.
    """


def check_per_example_model(model: nn.Module) -> None:
    """Refuse a model whose output for one example depends on the batch's others (BatchNorm): UnsupportedModelError."""
    for name, module in model.named_modules():
        if isinstance(module, _CROSS_EXAMPLE):
            raise UnsupportedModelError(
                f"module {name or type(model).__name__!r} ({type(module).__name__}) mixes the examples of a batch, "
                "so per-example gradients (and DP-SGD's guarantee) are undefined; replace it with GroupNorm, "
                "e.g. model = labeldp.dpsgd.replace_batchnorm(model)"
            )


def replace_batchnorm(model: nn.Module, max_groups: int = 32) -> nn.Module:
    """Replace every BatchNorm layer of ``model`` in place by a GroupNorm over the same channels; ``model``.

    Its groups: the most, up to ``max_groups``, that divide the channels.
    """
    for name, child in model.named_children():
        if isinstance(child, _CROSS_EXAMPLE):
            channels = child.num_features
            groups = max(g for g in range(1, min(max_groups, channels) + 1) if channels % g == 0)
            setattr(model, name, nn.GroupNorm(groups, channels, affine=child.affine))
        else:
            replace_batchnorm(child, max_groups)
    return model


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    """The parameters of ``model`` that require gradients, in ``model.parameters()`` order."""
    return [p for p in model.parameters() if p.requires_grad]


def fast_path_unsupported(model: nn.Module) -> str | None:
    """Why the fast path cannot handle ``model``: its first module with parameters no rule takes; None when it can."""
    for name, module in model.named_modules():
        if any(p.requires_grad for p in module.parameters(recurse=False)):
            reason = layer_rules.unsupported(module)
            if reason is not None:
                return f"module {name!r}: {reason}"
    return None


def clip_factors(norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """min(1, C / ||g_i||) per example (1e-6 added to each norm, so a factor never exceeds C / ||g_i||)."""
    if math.isinf(max_grad_norm):
        return torch.ones_like(norms)
    return (max_grad_norm / (norms + _NORM_EPSILON)).clamp(max=1.0)


def clipped_gradient_sum(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    max_grad_norm: float,
    loss_fn: PerExampleLoss = cross_entropy_per_example,
    *,
    method: str = "auto",
    physical_batch_size: int | None = None,
    multiple_views: bool = False,
) -> ClippedGradients:
    """Sum over the batch of per-example gradients of ``loss_fn``, each clipped to ``max_grad_norm`` (C).

    Each example's share has norm at most C (up to float32 rounding): adding or removing one moves the sum
    by at most C, the sensitivity DP-SGD's noise is calibrated to. The model must be per-example
    (BatchNorm is refused); it is not modified, nor its ``.grad``. With ``multiple_views``, ``inputs`` are
    (B, M, ...) and the unit is still the example. ``physical_batch_size`` computes in chunks of that many
    examples (same result, bounded memory). ``method``: see :mod:`labeldp.dpsgd.clipping`.

    Raises
    ------
    UnsupportedModelError
        If the model holds BatchNorm, or ``method="fast"`` cannot handle it (a layer called twice included).
    """
    if method not in METHODS:
        raise ConfigError(f"method must be one of {METHODS}, got {method!r}")
    if not max_grad_norm > 0:
        raise ConfigError(f"max_grad_norm must be > 0, got {max_grad_norm}")
    if physical_batch_size is not None and physical_batch_size < 1:
        raise ConfigError(f"physical_batch_size must be at least 1, got {physical_batch_size}")
    check_per_example_model(model)
    if not trainable_parameters(model):
        raise ConfigError("the model has no trainable parameters")
    if len(inputs) != len(targets):
        raise ConfigError(f"inputs and targets differ in length ({len(inputs)} vs {len(targets)})")
    if multiple_views and (inputs.dim() < 2 or inputs.shape[1] < 1):
        raise ConfigError("multiple_views needs inputs of shape (B, M, ...) with M >= 1")
    reason = fast_path_unsupported(model)
    if method == "fast" and reason is not None:
        raise UnsupportedModelError(f"the fast clipping path cannot handle this model: {reason}; use method='vmap'")
    compute = _vmap_clipped_sum if method == "vmap" or reason is not None else _fast_clipped_sum
    params = trainable_parameters(model)
    inputs = inputs.detach()  # only parameter gradients are wanted: inputs are constants even if they require grad
    chunk = physical_batch_size or max(len(inputs), 1)
    with _float32_without_tf32():
        if len(inputs) <= chunk:
            return compute(model, params, inputs, targets, max_grad_norm, loss_fn, multiple_views)
        total = ClippedGradients([torch.zeros_like(p) for p in params], inputs.new_zeros(0))
        for start in range(0, len(inputs), chunk):
            total.add_(
                compute(
                    model,
                    params,
                    inputs[start : start + chunk],
                    targets[start : start + chunk],
                    max_grad_norm,
                    loss_fn,
                    multiple_views,
                )
            )
        return total


@contextmanager
def _float32_without_tf32() -> Iterator[None]:
    """IEEE float32, not TF32, for convolutions, recurrent layers and matrix products on the GPU; restored on exit.

    Through the ``fp32_precision`` settings where torch has them (reading the older ``allow_tf32`` flags
    raises once a user has set the new ones), else through ``allow_tf32``.
    """
    backends = torch.backends
    settings: list[tuple[object, str, str | bool]]
    if hasattr(backends.cuda.matmul, "fp32_precision") and hasattr(backends.cudnn, "conv"):
        settings = [
            (backends.cudnn.conv, "fp32_precision", "ieee"),
            (backends.cudnn.rnn, "fp32_precision", "ieee"),
            (backends.cuda.matmul, "fp32_precision", "ieee"),
        ]
    else:
        settings = [(backends.cudnn, "allow_tf32", False), (backends.cuda.matmul, "allow_tf32", False)]
    saved = [getattr(owner, name) for owner, name, _ in settings]
    for owner, name, value in settings:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for (owner, name, _), value in zip(settings, saved):
            setattr(owner, name, value)


def _example_targets(targets: torch.Tensor, views: int) -> torch.Tensor:
    return targets.repeat_interleave(views, dim=0) if views > 1 else targets


# ---------------------------------------------------------------- the general path: vmap(grad)


def _vmap_clipped_sum(model, params, inputs, targets, max_grad_norm, loss_fn, multiple_views) -> ClippedGradients:
    if len(inputs) == 0:
        return ClippedGradients([torch.zeros_like(p) for p in params], inputs.new_zeros(0))
    names = [name for name, p in model.named_parameters() if p.requires_grad]
    fixed = {name: p.detach() for name, p in model.named_parameters() if not p.requires_grad}
    fixed.update(dict(model.named_buffers()))

    def example_loss(trainable: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor):
        views = x if multiple_views else x.unsqueeze(0)
        labels = _example_targets(y.unsqueeze(0), views.shape[0])
        return loss_fn(functional_call(model, {**trainable, **fixed}, (views,)), labels).mean()

    trainable = {name: p.detach() for name, p in zip(names, params)}
    with torch.no_grad():  # grad() still differentiates; the results carry no graph to other tensors
        per_example = vmap(grad(example_loss), in_dims=(None, 0, 0), randomness="different")(trainable, inputs, targets)
    grads = [per_example[name] for name in names]
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads))
    factors = clip_factors(norms, max_grad_norm)
    sums = [torch.einsum("b,b...->...", factors.to(g.dtype), g) for g in grads]
    return ClippedGradients(sums, norms)


# ---------------------------------------------------------------- the fast path: book-keeping


def _reaches(tensor: torch.Tensor, nodes: set[torch.autograd.graph.Node]) -> bool:
    """Whether ``tensor``'s autograd graph passes through one of ``nodes``."""
    pending, seen = [tensor.grad_fn], set()
    while pending:
        node = pending.pop()
        if node is None or node in seen:
            continue
        if node in nodes:
            return True
        seen.add(node)
        pending.extend(parent for parent, _ in node.next_functions)
    return False


def _fast_clipped_sum(model, params, inputs, targets, max_grad_norm, loss_fn, multiple_views) -> ClippedGradients:
    examples = len(inputs)
    if examples == 0:
        return ClippedGradients([torch.zeros_like(p) for p in params], inputs.new_zeros(0))
    views = inputs.shape[1] if multiple_views else 1
    flat_inputs = inputs.flatten(0, 1) if multiple_views else inputs
    layers: dict[nn.Module, layer_rules.LayerCall] = {}
    # Backward runs from the loss to the outputs of the layers whose input owes its gradient to no
    # earlier layer (the first layers, or inputs computed from tensors outside the parameters), taken
    # as gradient edges before any in-place change of the outputs: it reaches every layer's output and
    # computes no weight gradient.
    roots: list[torch.autograd.graph.GradientEdge] = []
    outputs: set[torch.autograd.graph.Node] = set()  # the graph nodes of the layers' outputs so far

    def forward_hook(module: nn.Module, args: tuple, output: torch.Tensor) -> None:
        if not any(p.requires_grad for p in module.parameters(recurse=False)):
            return
        if module in layers:
            raise UnsupportedModelError(
                f"{type(module).__name__} is called more than once per forward pass; use method='vmap'"
            )
        rule = layer_rules.rule_for(module)
        assert rule is not None, "hooked only where there is a rule"
        layer = layers[module] = rule(module, args[0].detach(), output, examples)
        if not _reaches(args[0], outputs):
            roots.append(torch.autograd.graph.get_gradient_edge(output))
        if output.grad_fn is not None:
            outputs.add(output.grad_fn)
        output.register_hook(layer.receive)

    handles = [m.register_forward_hook(forward_hook) for m in model.modules() if layer_rules.rule_for(m) is not None]
    try:
        with torch.enable_grad():
            losses = loss_fn(model(flat_inputs), _example_targets(targets, views))
            if roots:
                torch.autograd.grad(losses.sum() / views, roots, allow_unused=True)
    finally:
        for handle in handles:
            handle.remove()
    norms2 = torch.zeros(examples, dtype=params[0].dtype, device=params[0].device)
    for layer in layers.values():
        if layer.sq_norms is None:  # the loss does not depend on this layer
            layer.receive(torch.zeros(layer.output_shape, dtype=layer.output_dtype, device=norms2.device))
        assert layer.sq_norms is not None, "set by receive()"
        norms2 = norms2 + layer.sq_norms
    norms = norms2.clamp(min=0).sqrt()
    factors = clip_factors(norms, max_grad_norm).to(norms2.dtype)
    by_param: dict[torch.Tensor, torch.Tensor] = {}
    for layer in layers.values():
        by_param.update(zip(layer.params(), layer.clipped_sums(factors)))
    sums = [by_param[p] if p in by_param else torch.zeros_like(p) for p in params]
    return ClippedGradients(sums, norms)
