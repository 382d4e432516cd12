"""Per-example gradient clipping: the sum over a batch of per-example gradients, each scaled to norm
at most ``max_grad_norm``, for any ``nn.Module`` -- without wrapping or changing the model.

Two ways to compute it, chosen by ``method``:

- ``"fast"`` (book-keeping): one forward pass with temporary hooks that keep each layer's input, one
  backward pass that computes gradients with respect to layer *outputs* only (no weight gradients).
  As each layer's output gradient arrives, the layer's per-example gradient norms are computed from
  (input, output gradient), either by materialising its per-example gradients (cost ~ T d p per
  example, T positions, d inputs, p outputs) or by the "ghost" Gram-matrix identity
  ||sum_t g_t a_t^T||^2 = sum_{t,s} (a_t . a_s)(g_t . g_s) (cost ~ T^2 (d + p)), whichever is cheaper
  (for convolutions: faster when timed, with :mod:`~labeldp.dpsgd.conv_grads`). On CPU the
  per-example gradients go to memory each layer keeps between calls. After backward, the clipped sum
  is the materialised gradients weighted by the clipping factors, or one weighted weight-gradient
  product for the ghost layers. Supports Linear, Conv2d (``groups=1``, zero padding), weight-standardised
  convolutions (:class:`labeldp.models.WSConv2d`), Embedding, LayerNorm and GroupNorm, each called once
  per forward pass; parameter-free modules may be anything per-example. Tensors that require
  gradients but are not trainable parameters (the inputs, or others the forward pass uses) are taken
  as constants, on both paths.
- ``"vmap"`` (general): ``torch.func.vmap(torch.func.grad(...))`` over ``functional_call``: any module
  built from per-example operations.
- ``"auto"``: ``fast`` when every trainable parameter belongs to a supported layer, else ``vmap``.

Layers that mix examples within a batch (BatchNorm) make per-example gradients meaningless and are
refused with an error that says how to fix the model (:func:`replace_batchnorm`).

Augmentation multiplicity (De et al. 2022): ``inputs`` of shape (B, M, ...) hold M augmentations of
each of B examples; an example's gradient is the gradient of its mean loss over its M views, clipped
once -- the privacy unit stays the example.

Arithmetic: the bound C on each example's share of the sum holds up to float32 rounding (as in
every DP-SGD implementation). NVIDIA GPUs from Ampere on run float32 convolutions in TF32 (a 10-bit
mantissa) by default; its rounding, a relative 5e-4 on sums of up to B terms of norm C, could reach a
sizeable fraction of C on large batches. The clipped sum is therefore computed with TF32 off for
cuDNN and cuBLAS, and the previous settings are restored afterwards.
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
    """Cross-entropy of each example (the default per-example loss).

    Parameters
    ----------
    outputs : torch.Tensor
        Logits of shape (N, K).
    targets : torch.Tensor
        Class indices of shape (N,) (or class probabilities of shape (N, K)).

    Returns
    -------
    torch.Tensor
        Losses of shape (N,).
    """
    return F.cross_entropy(outputs, targets, reduction="none")


@dataclass
class ClippedGradients:
    """Result of :func:`clipped_gradient_sum`.

    ``sums`` holds, for each trainable parameter (``model.parameters()`` order, those with
    ``requires_grad``), the sum over examples of the clipped per-example gradients. ``norms`` holds
    each example's gradient norm before clipping. Only the sums, once noised, are private; the norms
    (like the losses, which are not returned) depend on the examples without noise and must not be
    logged or written.

    Parameters
    ----------
    sums, norms
        The attributes of the same names.

    Attributes
    ----------
    sums : list of torch.Tensor
        One tensor per trainable parameter, with its shape.
    norms : torch.Tensor
        Shape (B,): each example's gradient norm before clipping (not private).
    """

    sums: list[torch.Tensor]
    norms: torch.Tensor

    def add_(self, other: ClippedGradients) -> ClippedGradients:
        """Add ``other``'s sums to these in place and append its norms (for a batch processed in chunks).

        Parameters
        ----------
        other : ClippedGradients
            The result of another chunk, for the same parameters.

        Returns
        -------
        ClippedGradients
            ``self``.
        """
        for total, part in zip(self.sums, other.sums):
            total.add_(part)
        self.norms = torch.cat([self.norms, other.norms])
        return self


class UnsupportedModelError(ConfigError):
    """The model cannot give per-example gradients (BatchNorm) or not on the requested path.

    A :class:`~labeldp.errors.ConfigError` (so the command line prints it as one line), and so also a
    ``ValueError``, as it used to be.

    Parameters
    ----------
    *args : object
        The exception's arguments, as for ``ValueError``: labeldp gives one, the message, which names the
        module and says what to use instead.
    """


def check_per_example_model(model: nn.Module) -> None:
    """Refuse modules whose output for one example depends on other examples of the batch.

    Parameters
    ----------
    model : torch.nn.Module
        The model, searched through all its submodules.

    Returns
    -------
    None

    Raises
    ------
    UnsupportedModelError
        (a ``ValueError``) If the model holds a BatchNorm layer; the message says how to replace it.
    """
    for name, module in model.named_modules():
        if isinstance(module, _CROSS_EXAMPLE):
            raise UnsupportedModelError(
                f"module {name or type(model).__name__!r} ({type(module).__name__}) mixes the examples of a batch, "
                "so per-example gradients (and DP-SGD's guarantee) are undefined; replace it with GroupNorm, "
                "e.g. model = labeldp.dpsgd.replace_batchnorm(model)"
            )


def replace_batchnorm(model: nn.Module, max_groups: int = 32) -> nn.Module:
    """Replace every BatchNorm layer of ``model`` (in place) by a GroupNorm over the same channels.

    The GroupNorm has the largest number of groups <= ``max_groups`` that divides the channel count.

    Parameters
    ----------
    model : torch.nn.Module
        The model, changed in place.
    max_groups : int, optional
        The most groups a GroupNorm gets (default 32).

    Returns
    -------
    torch.nn.Module
        ``model``.
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
    """The parameters of ``model`` that require gradients, in ``model.parameters()`` order.

    Parameters
    ----------
    model : torch.nn.Module
        The model.

    Returns
    -------
    list of torch.nn.Parameter
        The trainable parameters.
    """
    return [p for p in model.parameters() if p.requires_grad]


def fast_path_unsupported(model: nn.Module) -> str | None:
    """Why the fast path cannot handle ``model`` (None when it can).

    Parameters
    ----------
    model : torch.nn.Module
        The model.

    Returns
    -------
    str or None
        The first module with trainable parameters that no layer rule supports, and why; None if
        every one is supported.
    """
    for name, module in model.named_modules():
        if any(p.requires_grad for p in module.parameters(recurse=False)):
            reason = layer_rules.unsupported(module)
            if reason is not None:
                return f"module {name!r}: {reason}"
    return None


def clip_factors(norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """min(1, C / ||g_i||): the scale that brings each per-example gradient to norm at most C.

    A small constant (1e-6) is added to each norm, so a factor never exceeds C / ||g_i||.

    Parameters
    ----------
    norms : torch.Tensor
        Per-example gradient norms, shape (B,).
    max_grad_norm : float
        The clipping bound C (``math.inf``: no clipping, every factor 1).

    Returns
    -------
    torch.Tensor
        Factors in (0, 1], shape (B,).
    """
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
    """Sum over the batch of per-example gradients of ``loss_fn``, each clipped to ``max_grad_norm``.

    Each example's contribution to the sum has norm at most C (up to float32 rounding; see the module
    docstring): adding or removing one example moves the sum by at most C, the sensitivity that
    DP-SGD's Gaussian noise is calibrated to. With ``multiple_views`` the unit is still the example,
    its views clipped together. The guarantee needs a model whose output for one example does not
    depend on the others (BatchNorm is refused).

    Parameters
    ----------
    model : torch.nn.Module
        Any module of per-example layers (BatchNorm is refused). It is not modified; its
        ``.grad`` fields are left untouched.
    inputs : torch.Tensor
        (B, ...) one input per example, or with ``multiple_views`` (B, M, ...): M augmentations
        of each example (augmentation multiplicity). B may be 0. Taken as constants, even if they
        require gradients.
    targets : torch.Tensor
        (B, ...) per-example targets for ``loss_fn``.
    max_grad_norm : float
        The clipping bound C > 0 (``math.inf`` for no clipping).
    loss_fn : callable, optional
        Per-example loss, (outputs, targets) -> (N,) (default :func:`cross_entropy_per_example`).
    method : str, optional
        ``"auto"`` (default), ``"fast"`` or ``"vmap"`` (see the module docstring).
    physical_batch_size : int or None, optional
        Examples per forward/backward pass; a larger batch is processed in
        chunks of this size (same result, bounded memory).
    multiple_views : bool, optional
        ``inputs`` has an augmentation axis after the batch axis (default False).

    Returns
    -------
    ClippedGradients
        The clipped sums, one per trainable parameter, and the per-example norms before clipping.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``method``, ``max_grad_norm`` or ``physical_batch_size`` is invalid, the model has no
        trainable parameters, ``inputs`` and ``targets`` differ in length, or ``multiple_views`` is
        set without an augmentation axis.
    UnsupportedModelError
        If the model holds a BatchNorm layer, or ``method="fast"`` is asked for a model it cannot handle
        (including a layer called more than once per forward pass).
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
    """float32 convolutions, recurrent layers and matrix products in IEEE float32, not TF32, on the
    GPU: process-wide settings of torch's, restored on exit. Through the ``fp32_precision`` settings
    where torch has them (2.9 on; reading the older ``allow_tf32`` flags raises once a user has set
    the new ones), else through ``allow_tf32``."""
    backends = torch.backends
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
    """Whether ``tensor``'s autograd graph passes through one of ``nodes``: then a backward pass to
    those nodes' outputs goes through ``tensor`` too."""
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
        layer = layers[module] = layer_rules.rule_for(module)(module, args[0].detach(), output, examples)
        if not _reaches(args[0], outputs):
            roots.append(torch.autograd.graph.get_gradient_edge(output))
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
        norms2 = norms2 + layer.sq_norms
    norms = norms2.clamp(min=0).sqrt()
    factors = clip_factors(norms, max_grad_norm).to(norms2.dtype)
    by_param = {}
    for layer in layers.values():
        by_param.update(zip(layer.params(), layer.clipped_sums(factors)))
    sums = [by_param[p] if p in by_param else torch.zeros_like(p) for p in params]
    return ClippedGradients(sums, norms)
