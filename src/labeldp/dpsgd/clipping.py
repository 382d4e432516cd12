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
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, vmap

from labeldp.models.wideresnet import WSConv2d
from labeldp.dpsgd import conv_grads

#: per-example loss: (outputs (N, ...), targets (N, ...)) -> losses (N,)
PerExampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
METHODS = ("auto", "fast", "vmap")
_CROSS_EXAMPLE = (nn.modules.batchnorm._BatchNorm, nn.SyncBatchNorm)
_FAST_LAYERS = (nn.Linear, nn.Conv2d, nn.Embedding, nn.LayerNorm, nn.GroupNorm)
_NORM_EPSILON = 1e-6
#: a convolution's two clipping paths are timed against each other only when their estimated costs
#: (multiply-adds) are within this factor; otherwise the cheaper runs untried. (With every path tried,
#: WRN-16-4's first step at batch 256 took 75 s and 12 GB, mostly ghost norms on its 32x32 maps,
#: whose Gram matrices grow as T^2.)
_TIMED_COST_RATIO = 3
#: elements of a temporary that computes in chunks (4 MB of float32: about a core's share of cache)
_CACHE_ELEMENTS = 1 << 20
#: each layer's memory for its per-example gradients, kept between calls on CPU, where touching fresh
#: pages costs about as much as computing the gradients; it goes with the module
_WORKSPACES: weakref.WeakKeyDictionary[nn.Module, torch.Tensor] = weakref.WeakKeyDictionary()


def cross_entropy_per_example(outputs: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each example (the default per-example loss)."""
    return F.cross_entropy(outputs, targets, reduction="none")


@dataclass
class ClippedGradients:
    """Result of :func:`clipped_gradient_sum`.

    ``sums`` holds, for each trainable parameter (``model.parameters()`` order, those with
    ``requires_grad``), the sum over examples of the clipped per-example gradients. ``norms`` holds
    each example's gradient norm before clipping. Only the sums, once noised, are private; the norms
    (like the losses, which are not returned) depend on the examples without noise and must not be
    logged or written.
    """

    sums: list[torch.Tensor]
    norms: torch.Tensor

    def add_(self, other: ClippedGradients) -> ClippedGradients:
        for total, part in zip(self.sums, other.sums):
            total.add_(part)
        self.norms = torch.cat([self.norms, other.norms])
        return self


class UnsupportedModelError(ValueError):
    """The model cannot give per-example gradients (BatchNorm) or not on the requested path."""


def check_per_example_model(model: nn.Module) -> None:
    """Refuse modules whose output for one example depends on other examples of the batch."""
    for name, module in model.named_modules():
        if isinstance(module, _CROSS_EXAMPLE):
            raise UnsupportedModelError(
                f"module {name or type(model).__name__!r} ({type(module).__name__}) mixes the examples of a batch, "
                "so per-example gradients (and DP-SGD's guarantee) are undefined; replace it with GroupNorm, "
                "e.g. model = labeldp.dpsgd.replace_batchnorm(model)")


def replace_batchnorm(model: nn.Module, max_groups: int = 32) -> nn.Module:
    """Replace every BatchNorm layer of ``model`` (in place) by a GroupNorm over the same channels, with
    the largest number of groups <= ``max_groups`` that divides the channel count. Returns ``model``."""
    for name, child in model.named_children():
        if isinstance(child, _CROSS_EXAMPLE):
            channels = child.num_features
            groups = max(g for g in range(1, min(max_groups, channels) + 1) if channels % g == 0)
            setattr(model, name, nn.GroupNorm(groups, channels, affine=child.affine))
        else:
            replace_batchnorm(child, max_groups)
    return model


def trainable_parameters(model: nn.Module) -> list[nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def fast_path_unsupported(model: nn.Module) -> str | None:
    """Why the fast path cannot handle ``model`` (None when it can)."""
    for name, module in model.named_modules():
        own = [p for p in module.parameters(recurse=False) if p.requires_grad]
        if not own:
            continue
        if not isinstance(module, _FAST_LAYERS):
            return f"module {name!r} ({type(module).__name__}) has parameters and no fast per-example rule"
        if isinstance(module, nn.Conv2d) and (module.groups != 1 or module.padding_mode != "zeros"
                                              or isinstance(module.padding, str)):
            return f"convolution {name!r} uses groups, a non-zero padding mode or string padding"
        if isinstance(module, nn.Embedding) and module.sparse:
            return f"embedding {name!r} is sparse"
    return None


def clip_factors(norms: torch.Tensor, max_grad_norm: float) -> torch.Tensor:
    """min(1, C / ||g_i||): the scale that brings each per-example gradient to norm at most C."""
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

    Args:
        model: any module of per-example layers (BatchNorm is refused). It is not modified; its
            ``.grad`` fields are left untouched.
        inputs: (B, ...) one input per example, or with ``multiple_views`` (B, M, ...): M augmentations
            of each example (augmentation multiplicity). B may be 0. Taken as constants, even if they
            require gradients.
        targets: (B, ...) per-example targets for ``loss_fn``.
        max_grad_norm: the clipping bound C > 0 (``math.inf`` for no clipping).
        loss_fn: per-example loss, (outputs, targets) -> (N,).
        method: ``"auto"``, ``"fast"`` or ``"vmap"`` (see the module docstring).
        physical_batch_size: examples per forward/backward pass; a larger batch is processed in
            chunks of this size (same result, bounded memory).
        multiple_views: ``inputs`` has an augmentation axis after the batch axis.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if not max_grad_norm > 0:
        raise ValueError(f"max_grad_norm must be > 0, got {max_grad_norm}")
    if physical_batch_size is not None and physical_batch_size < 1:
        raise ValueError(f"physical_batch_size must be at least 1, got {physical_batch_size}")
    check_per_example_model(model)
    if not trainable_parameters(model):
        raise ValueError("the model has no trainable parameters")
    if len(inputs) != len(targets):
        raise ValueError(f"inputs and targets differ in length ({len(inputs)} vs {len(targets)})")
    if multiple_views and (inputs.dim() < 2 or inputs.shape[1] < 1):
        raise ValueError("multiple_views needs inputs of shape (B, M, ...) with M >= 1")
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
            total.add_(compute(model, params, inputs[start:start + chunk], targets[start:start + chunk],
                               max_grad_norm, loss_fn, multiple_views))
        return total


@contextmanager
def _float32_without_tf32() -> Iterator[None]:
    """float32 convolutions, recurrent layers and matrix products in IEEE float32, not TF32, on the
    GPU: process-wide settings of torch's, restored on exit. Through the ``fp32_precision`` settings
    where torch has them (2.9 on; reading the older ``allow_tf32`` flags raises once a user has set
    the new ones), else through ``allow_tf32``."""
    backends = torch.backends
    if hasattr(backends.cuda.matmul, "fp32_precision") and hasattr(backends.cudnn, "conv"):
        settings = [(backends.cudnn.conv, "fp32_precision", "ieee"), (backends.cudnn.rnn, "fp32_precision", "ieee"),
                    (backends.cuda.matmul, "fp32_precision", "ieee")]
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
        per_example = vmap(grad(example_loss), in_dims=(None, 0, 0),
                           randomness="different")(trainable, inputs, targets)
    grads = [per_example[name] for name in names]
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads))
    factors = clip_factors(norms, max_grad_norm)
    sums = [torch.einsum("b,b...->...", factors.to(g.dtype), g) for g in grads]
    return ClippedGradients(sums, norms)


# ---------------------------------------------------------------- the fast path: book-keeping


class _Layer:
    """One call of a supported layer: its input, its output gradient, and its per-example rule.

    :meth:`receive` runs in the backward pass as soon as the layer's output gradient is known: it
    computes the layer's per-example squared gradient norms and keeps only what the clipped sum still
    needs (the per-example gradients when they were formed, else the input and output gradient), so
    the memory held past backward stays close to what plain backpropagation holds.
    """

    def __init__(self, module: nn.Module, activation: torch.Tensor, output: torch.Tensor, examples: int):
        self.module, self.examples = module, examples
        self.activation: torch.Tensor | None = activation
        self.output_shape, self.output_dtype = output.shape, output.dtype
        # a standardised conv's output serves its gradient statistics; in-place changes are detected by version
        self.output = output.detach() if isinstance(module, WSConv2d) else None
        # and its standardised kernel and scales, computed once per step (the weights do not change within it)
        self.standardization = module.standardization() if isinstance(module, WSConv2d) else None
        self.output_version = output._version
        # a GroupNorm's per-row group means and inverse standard deviations, as its forward pass computed them
        self.group_stats = _saved_group_stats(output) if isinstance(module, nn.GroupNorm) else None
        self.output_grad: torch.Tensor | None = None
        self.per_example: list[torch.Tensor] | None = None  # materialised per-example gradients
        self.bias_grads: torch.Tensor | None = None  # (B, p) per-example bias gradients
        self.sq_norms: torch.Tensor | None = None

    def params(self) -> list[nn.Parameter]:
        return [p for p in self.module.parameters(recurse=False) if p.requires_grad]

    def receive(self, output_grad: torch.Tensor) -> None:
        """Take the output gradient, compute the per-example squared norms, release what is not needed."""
        self.output_grad = output_grad
        self.sq_norms = self.norms2()
        self.output = None
        if self.per_example is not None:  # the clipped sum needs only these (embeddings keep their inputs)
            self.activation = self.output_grad = None

    # -- rules ------------------------------------------------------------------------------------
    def norms2(self) -> torch.Tensor:
        """Squared norm of each example's gradient with respect to this layer's trainable parameters."""
        module = self.module
        if isinstance(module, nn.Embedding):
            return self._embedding_norms2()
        if isinstance(module, (nn.LayerNorm, nn.GroupNorm)):
            self.per_example = self._norm_layer_grads()
            return sum(_squared_norms(g) for g in self.per_example)
        total = torch.zeros(self.examples, dtype=self.output_grad.dtype, device=self.output_grad.device)
        if module.bias is not None and module.bias.requires_grad:
            self.bias_grads = self._bias_grads()
            total = total + self.bias_grads.pow(2).sum(1)
        if not module.weight.requires_grad:
            self.per_example = []
            return total
        if isinstance(module, nn.Conv2d):
            return total + self._conv_norms2()
        a, g = self._matrices()  # (B, T, d), (B, T, p)
        T, d, p = a.shape[1], a.shape[2], g.shape[2]
        if T * (d + p) >= d * p:
            weight = torch.bmm(g.transpose(1, 2), a, out=_workspace(module, (len(a), p, d), a))  # per-example gradients
            self.per_example = [weight]
            return total + _squared_norms(weight)
        if T == 1:
            return total + a.squeeze(1).pow(2).sum(1) * g.squeeze(1).pow(2).sum(1)
        return total + (torch.bmm(a, a.transpose(1, 2)) * torch.bmm(g, g.transpose(1, 2))).sum((1, 2))

    def _conv_norms2(self) -> torch.Tensor:
        """A convolution's kernel part, by the faster of two exact paths for the layer's configuration
        (:func:`conv_grads.fastest` times each path's norms together with its part of the clipped sum):
        ``materialise`` forms the per-example kernel gradients (cost ~ T d p per example), ``ghost``
        takes the norms from the patch Gram matrix (~ T^2 (d + p)) and the clipped sum from one
        weighted kernel gradient. A path whose cost estimate exceeds the other's by more than
        :data:`_TIMED_COST_RATIO` is not tried. For a weight-standardised conv both give the norms for
        the standardised kernel G, mapped to the raw weight by :meth:`WSConv2d.weight_gradient_norms2`."""
        module, g, B = self.module, self.output_grad, self.examples
        positions = len(g) // B * g[0, 0].numel()  # V T: an example's output positions over its views
        d, p = module.weight[0].numel(), module.out_channels
        costs = {"materialise": positions * d * p, "ghost": positions ** 2 * (d + p)}  # multiply-adds
        paths = {name: path for name, path in
                 (("materialise", self._materialised_kernel_norms2), ("ghost", self._ghost_kernel_norms2))
                 if costs[name] <= _TIMED_COST_RATIO * min(costs.values())}
        if len(paths) == 1:
            scaled = next(iter(paths.values()))()
        else:
            key = ("conv_path", *conv_grads.configuration(module, B, self.activation, g))
            ones = torch.ones(B, dtype=g.dtype, device=g.device)

            def with_clipped_sum(path: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
                return lambda: (path(), self.clipped_sums(ones))[0]
            scaled = conv_grads.fastest(key, paths, {name: with_clipped_sum(path) for name, path in paths.items()})
        if not isinstance(module, WSConv2d):
            return scaled
        return module.weight_gradient_norms2(scaled, *self._standardized_stats(), self.standardization)

    def _materialised_kernel_norms2(self) -> torch.Tensor:
        """Forms the per-example kernel gradients (kept for the clipped sum); their squared norms, for a
        weight-standardised conv sum_r |G_r|^2 / s_r^2 over output channels r (s_r: the channel's scale)."""
        module, g = self.module, self.output_grad
        rows = _workspace(module, (len(g), *module.weight.shape), g)
        weight = conv_grads.per_example_kernel_grads(module, self.activation, g, self.examples, rows)
        self.per_example = [weight]  # for WSConv2d: gradients with respect to the standardised kernel
        if not isinstance(module, WSConv2d):
            return _squared_norms(weight)
        inv_scale = 1.0 / self.standardization[1].squeeze(1)
        return (torch.linalg.vector_norm(weight.flatten(2), dim=2) * inv_scale).pow(2).sum(1)

    def _ghost_kernel_norms2(self) -> torch.Tensor:
        """The squared norms of :meth:`_materialised_kernel_norms2` from Gram matrices, forming nothing of
        size (B, p, d): ||sum_t g_t patch_t^T||^2 = sum_{t,s} (patch_t . patch_s)(g_t . g_s); for a
        weight-standardised conv the output gradients are scaled by 1 / s first."""
        module, g, B = self.module, self.output_grad, self.examples
        self.per_example = None
        if isinstance(module, WSConv2d):
            g = g / self.standardization[1].view(1, -1, 1, 1)
        return conv_grads.ghost_norms2(module, self.activation, g, B)

    def _standardized_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, p) each, for the standardised kernel's per-example gradients G: sum(G_r) and G_r . y_r.

        From G itself when it was materialised and is no larger than the output gradients (in chunks
        of examples that stay in cache); else from the output level: sum(G_r) = sum_t g_tr (sum of
        patch t), and G_r . y_r = sum_t g_tr o_tr where o = conv(x, y) is the layer's output without
        its bias (recomputed if it was changed in place)."""
        module, g, B = self.module, self.output_grad, self.examples
        if self.per_example and self.per_example[0][0].numel() <= g[0].numel() * (len(g) // B):
            grads, standardized = self.per_example[0].flatten(2), self.standardization[0]
            chunk = max(1, _CACHE_ELEMENTS // grads[0].numel())
            dots = [(grads[start:start + chunk] * standardized).sum(2) for start in range(0, B, chunk)]
            return grads.sum(2), torch.cat(dots)
        output = self.output
        if output._version != self.output_version:  # modified in place later in the forward pass
            output = module._conv_forward(self.activation, self.standardization[0].view_as(module.weight), None)
        elif module.bias is not None:
            output = output - module.bias.detach().view(1, -1, 1, 1)
        flat = g.flatten(2)  # (N, p, T)
        sums = (flat * conv_grads.patch_sums(module, self.activation).unsqueeze(1)).sum(2)  # einsum: 2x slower on CPU
        dots = torch.einsum("npt,npt->np", flat, output.flatten(2))
        return sums.view(B, -1, sums.shape[1]).sum(1), dots.view(B, -1, dots.shape[1]).sum(1)

    def clipped_sums(self, factors: torch.Tensor) -> list[torch.Tensor]:
        """Sum over examples of factor_i x (example i's gradient), for each trainable parameter."""
        module = self.module
        if isinstance(module, nn.Embedding):
            return self._embedding_sums(factors)
        if isinstance(module, (nn.LayerNorm, nn.GroupNorm)):
            return [torch.einsum("b,b...->...", factors, g) for g in self.per_example]
        sums = []
        if module.weight.requires_grad:
            if self.per_example:
                weight = torch.einsum("b,b...->...", factors, self.per_example[0])
            elif isinstance(module, nn.Conv2d):
                weight = conv_grads.batch_kernel_grad(module, self.activation, self._scaled_output_grad(factors))
            else:
                a, g = self._matrices()
                weight = (g * factors[:, None, None]).flatten(0, 1).t().mm(a.flatten(0, 1))
            if isinstance(module, WSConv2d):  # its chain rule is linear: apply it once, to the sum
                weight = module.weight_gradient(weight.reshape(1, *module.weight.shape), self.standardization)[0]
            sums.append(weight.reshape(module.weight.shape))
        if self.bias_grads is not None:
            sums.append(torch.einsum("b,bp->p", factors, self.bias_grads))
        return sums

    # -- helpers ----------------------------------------------------------------------------------
    def _scaled_output_grad(self, factors: torch.Tensor) -> torch.Tensor:
        g = self.output_grad
        per_row = factors.repeat_interleave(g.shape[0] // self.examples)
        return g * per_row.view(-1, *([1] * (g.dim() - 1)))

    def _bias_grads(self) -> torch.Tensor:
        """(B, p): each example's bias gradient, the output gradient summed over its positions."""
        g = self.output_grad
        per_row = g.flatten(2).sum(2) if isinstance(self.module, nn.Conv2d) else g.reshape(g.shape[0], -1, g.shape[-1]).sum(1)
        return per_row.view(self.examples, -1, per_row.shape[-1]).sum(1)

    def _matrices(self) -> tuple[torch.Tensor, torch.Tensor]:
        """A linear layer's input and output gradient as (B, T, d) and (B, T, p)."""
        a, g, B = self.activation, self.output_grad, self.examples
        return a.reshape(B, -1, a.shape[-1]), g.reshape(B, -1, g.shape[-1])

    def _norm_layer_grads(self) -> list[torch.Tensor]:
        module, a, g, B = self.module, self.activation, self.output_grad, self.examples
        if isinstance(module, nn.GroupNorm):
            return self._group_norm_grads()
        normalized = F.layer_norm(a, module.normalized_shape, eps=module.eps)
        channel_dims = tuple(range(a.dim() - len(module.normalized_shape), a.dim()))

        def per_example(values: torch.Tensor) -> torch.Tensor:
            reduce = [d for d in range(1, values.dim()) if d not in channel_dims]
            summed = values.sum(reduce) if reduce else values
            return summed.view(B, -1, *summed.shape[1:]).sum(1)

        grads = []
        if module.weight is not None and module.weight.requires_grad:
            grads.append(per_example(normalized * g))
        if module.bias is not None and module.bias.requires_grad:
            grads.append(per_example(g))
        return grads

    def _group_norm_grads(self) -> list[torch.Tensor]:
        """Per-example GroupNorm gradients from one call of GroupNorm's own backward kernel, the one
        autograd runs: the N rows side by side are one row of N C channels in N G groups -- the same
        groups, hence the same statistics -- whose per-channel weight and bias gradients are the
        per-row ones. The statistics are those of the forward pass (recomputed by the same kernel
        if autograd did not keep them)."""
        module, x, B = self.module, self.activation, self.examples
        rows, channels = x.shape[:2]
        positions = x[0, 0].numel()
        mean, inv_std = self.group_stats or torch.ops.aten.native_group_norm(
            x, None, None, rows, channels, positions, module.num_groups, module.eps)[1:]
        wanted = [p is not None and p.requires_grad for p in (module.weight, module.bias)]
        _, weight, bias = torch.ops.aten.native_group_norm_backward(
            self.output_grad.reshape(1, rows * channels, positions), x.reshape(1, rows * channels, positions),
            mean.reshape(1, -1), inv_std.reshape(1, -1), x.new_ones(1).expand(rows * channels),  # (unused) weight
            1, rows * channels, positions, rows * module.num_groups, [False, *wanted])
        grads = [grad for grad, want in zip((weight, bias), wanted) if want]
        return [grad.view(B, -1, channels).sum(1) for grad in grads]

    def _embedding_rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        module, B = self.module, self.examples
        index = self.activation.reshape(B, -1)
        g = self.output_grad.reshape(B, index.shape[1], -1)
        if module.padding_idx is not None:
            g = g * (index != module.padding_idx).unsqueeze(-1).to(g.dtype)
        return index, g

    def _embedding_norms2(self) -> torch.Tensor:
        index, g = self._embedding_rows()
        same = (index.unsqueeze(2) == index.unsqueeze(1)).to(g.dtype)  # (B, T, T)
        return (same * torch.bmm(g, g.transpose(1, 2))).sum((1, 2))

    def _embedding_sums(self, factors: torch.Tensor) -> list[torch.Tensor]:
        index, g = self._embedding_rows()
        weight = torch.zeros_like(self.module.weight)
        weight.index_add_(0, index.flatten(), (g * factors[:, None, None]).flatten(0, 1))
        return [weight]


def _saved_group_stats(output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The (rows, groups) means and inverse standard deviations that autograd saved for a GroupNorm
    output's backward pass, or None when it saved none under the names of torch's NativeGroupNorm."""
    node = output.grad_fn
    if type(node).__name__ != "NativeGroupNormBackward0":
        return None
    stats = getattr(node, "_saved_result1", None), getattr(node, "_saved_result2", None)
    return tuple(t.detach() for t in stats) if all(isinstance(t, torch.Tensor) for t in stats) else None


def _workspace(module: nn.Module, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` for ``module``'s per-example gradients: on CPU a view of
    the module's workspace (grown with 10 % headroom, as Poisson batch sizes vary), elsewhere new
    memory (CUDA's caching allocator already reuses it). Valid until the module's next call."""
    if like.device.type != "cpu":
        return like.new_empty(shape)
    size = math.prod(shape)
    buffer = _WORKSPACES.get(module)
    if buffer is None or buffer.numel() < size or buffer.dtype != like.dtype:
        buffer = _WORKSPACES[module] = like.new_empty(size + size // 10)
    return buffer[:size].view(shape)


def _squared_norms(per_example: torch.Tensor) -> torch.Tensor:
    """(B,): the squared norm of each example's slice of ``per_example`` (B, ...)."""
    return torch.linalg.vector_norm(per_example.flatten(1), dim=1).pow(2)


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
    layers: dict[nn.Module, _Layer] = {}
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
            raise UnsupportedModelError(f"{type(module).__name__} is called more than once per forward pass; "
                                        "use method='vmap'")
        layer = layers[module] = _Layer(module, args[0].detach(), output, examples)
        if not _reaches(args[0], outputs):
            roots.append(torch.autograd.graph.get_gradient_edge(output))
        outputs.add(output.grad_fn)
        output.register_hook(layer.receive)

    handles = [m.register_forward_hook(forward_hook) for m in model.modules() if isinstance(m, _FAST_LAYERS)]
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
