"""Per-example gradient rules of the fast clipping path: one small class per layer type, registered with
:func:`rule`, in the manner of Opacus's ``grad_sample`` modules.

A :class:`LayerCall` is one call of a layer with trainable parameters: it keeps the layer's input,
receives its output gradient in the backward pass, computes the per-example squared norms at once and
keeps only what the clipped sum still needs, so memory past backward stays close to plain
backpropagation's. The rules are exact: the tests compare each with a per-example loop.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from labeldp.dpsgd import conv_grads
from labeldp.models.wideresnet import WSConv2d

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

_RULES: dict[type[nn.Module], type[LayerCall]] = {}


def rule(*module_types: type[nn.Module]) -> Callable[[type[LayerCall]], type[LayerCall]]:
    """Register the decorated :class:`LayerCall` subclass as the rule of ``module_types``."""

    def register(cls: type[LayerCall]) -> type[LayerCall]:
        for module_type in module_types:
            _RULES[module_type] = cls
        return cls

    return register


def rule_for(module: nn.Module) -> type[LayerCall] | None:
    """The rule of ``module``'s most specific registered type (a subclass's own rule first), or None."""
    return next((_RULES[cls] for cls in type(module).__mro__ if cls in _RULES), None)


def supported_layers() -> tuple[type[nn.Module], ...]:
    """The module types that have a fast per-example rule, in registration order."""
    return tuple(_RULES)


def unsupported(module: nn.Module) -> str | None:
    """Why the fast path cannot take ``module``, a module with trainable parameters; None when it can."""
    cls = rule_for(module)
    if cls is None:
        return f"{type(module).__name__} has parameters and no fast per-example rule"
    return cls.unsupported(module)


class LayerCall:
    """One call of a layer: its input (``activation``), its output gradient, and its per-example rule.

    Subclasses implement :meth:`norms2` and, unless they keep ``per_example`` gradients in the order of
    :meth:`params`, :meth:`clipped_sums`. ``activation`` and ``output_grad`` are released once per-example
    gradients are formed; rows are N = examples x views.
    """

    def __init__(self, module: nn.Module, activation: torch.Tensor, output: torch.Tensor, examples: int):
        self.module, self.examples = module, examples
        self.activation: torch.Tensor | None = activation
        self.output_shape, self.output_dtype = output.shape, output.dtype
        self.output_grad: torch.Tensor | None = None
        self.per_example: list[torch.Tensor] | None = None  # materialised per-example gradients
        self.sq_norms: torch.Tensor | None = None

    @classmethod
    def unsupported(cls, module: nn.Module) -> str | None:
        """Why this rule cannot take ``module`` (None when it can)."""
        return None

    def params(self) -> list[nn.Parameter]:
        """The layer's own trainable parameters, in ``module.parameters()`` order."""
        return [p for p in self.module.parameters(recurse=False) if p.requires_grad]

    def receive(self, output_grad: torch.Tensor) -> None:
        """Take the output gradient (a backward hook), compute the per-example squared norms, release the rest."""
        self.output_grad = output_grad
        self.sq_norms = self.norms2()
        if self.per_example is not None:  # the clipped sum needs only these
            self.activation = self.output_grad = None

    def held(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The activation and output gradient, held from :meth:`receive` until per-example gradients are formed."""
        assert self.activation is not None and self.output_grad is not None, "released with the per-example gradients"
        return self.activation, self.output_grad

    def norms2(self) -> torch.Tensor:
        """(examples,) squared norm of each example's gradient with respect to this layer's trainable parameters."""
        raise NotImplementedError

    def clipped_sums(self, factors: torch.Tensor) -> list[torch.Tensor]:
        """Sum over examples of factor_i x example i's gradient, one per parameter of :meth:`params`."""
        assert self.per_example is not None, "a rule without clipped_sums forms the per-example gradients"
        return [torch.einsum("b,b...->...", factors, g) for g in self.per_example]


@rule(nn.Linear)
class LinearCall(LayerCall):
    """The rule of ``torch.nn.Linear``: y = x W^T + b over T positions per example.

    Per-example weight gradients g^T a are formed when they cost less than the ghost Gram matrices
    (T (d + p) >= d p); else the norms come from the ghost identity and the clipped sum from one product.
    """

    module: nn.Linear | nn.Conv2d

    def __init__(self, module: nn.Module, activation: torch.Tensor, output: torch.Tensor, examples: int):
        super().__init__(module, activation, output, examples)
        self.bias_grads: torch.Tensor | None = None  # (B, p) per-example bias gradients

    def norms2(self) -> torch.Tensor:
        module, (_, g) = self.module, self.held()
        total = torch.zeros(self.examples, dtype=g.dtype, device=g.device)
        if module.bias is not None and module.bias.requires_grad:
            self.bias_grads = self._bias_grads()
            total = total + self.bias_grads.pow(2).sum(1)
        if not module.weight.requires_grad:
            self.per_example = []
            return total
        return total + self._weight_norms2()

    def clipped_sums(self, factors: torch.Tensor) -> list[torch.Tensor]:
        """The clipped sums of the weight (if trainable), then the bias (if trainable)."""
        module, sums = self.module, []
        if module.weight.requires_grad:
            sums.append(self._weight_sum(factors).reshape(module.weight.shape))
        if self.bias_grads is not None:
            sums.append(torch.einsum("b,bp->p", factors, self.bias_grads))
        return sums

    def _weight_norms2(self) -> torch.Tensor:
        a, g = self._matrices()  # (B, T, d), (B, T, p)
        T, d, p = a.shape[1], a.shape[2], g.shape[2]
        if T * (d + p) >= d * p:
            weight = torch.bmm(g.transpose(1, 2), a, out=_workspace(self.module, (len(a), p, d), a))
            self.per_example = [weight]
            return _squared_norms(weight)
        if T == 1:
            return a.squeeze(1).pow(2).sum(1) * g.squeeze(1).pow(2).sum(1)
        return (torch.bmm(a, a.transpose(1, 2)) * torch.bmm(g, g.transpose(1, 2))).sum((1, 2))

    def _weight_sum(self, factors: torch.Tensor) -> torch.Tensor:
        if self.per_example:
            return torch.einsum("b,b...->...", factors, self.per_example[0])
        a, g = self._matrices()
        return (g * factors[:, None, None]).flatten(0, 1).t().mm(a.flatten(0, 1))

    def _bias_grads(self) -> torch.Tensor:
        """(B, p): each example's bias gradient, the output gradient summed over its positions."""
        _, g = self.held()
        per_row = g.reshape(g.shape[0], -1, g.shape[-1]).sum(1)
        return per_row.view(self.examples, -1, per_row.shape[-1]).sum(1)

    def _matrices(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The input and output gradient as (B, T, d) and (B, T, p)."""
        (a, g), B = self.held(), self.examples
        return a.reshape(B, -1, a.shape[-1]), g.reshape(B, -1, g.shape[-1])


@rule(nn.Conv2d)
class ConvCall(LinearCall):
    """The rule of ``torch.nn.Conv2d``, by the faster of two exact paths for the layer's configuration.

    ``materialise`` forms the per-example kernel gradients (~ T d p per example); ``ghost`` takes the
    norms from the patch Gram matrix (~ T^2 (d + p)) and the clipped sum from one weighted kernel
    gradient. Each path is timed with its part of the clipped sum (:func:`conv_grads.fastest`), unless
    its cost estimate exceeds the other's by more than :data:`_TIMED_COST_RATIO`.
    """

    module: nn.Conv2d

    @classmethod
    def unsupported(cls, module: nn.Module) -> str | None:
        """Groups, a padding mode other than zeros, or string padding."""
        if module.groups != 1 or module.padding_mode != "zeros" or isinstance(module.padding, str):
            return "a convolution uses groups, a non-zero padding mode or string padding"
        return None

    def _weight_norms2(self) -> torch.Tensor:
        module, (a, g), B = self.module, self.held(), self.examples
        positions = len(g) // B * g[0, 0].numel()  # V T: an example's output positions over its views
        d, p = module.weight[0].numel(), module.out_channels
        costs = {"materialise": positions * d * p, "ghost": positions**2 * (d + p)}  # multiply-adds
        paths = {
            name: path
            for name, path in (("materialise", self._materialised_kernel_norms2), ("ghost", self._ghost_kernel_norms2))
            if costs[name] <= _TIMED_COST_RATIO * min(costs.values())
        }
        if len(paths) == 1:
            return next(iter(paths.values()))()
        key = ("conv_path", *conv_grads.configuration(module, B, a, g))
        ones = torch.ones(B, dtype=g.dtype, device=g.device)

        def with_clipped_sum(path: Callable[[], torch.Tensor]) -> Callable[[], torch.Tensor]:
            return lambda: (path(), self.clipped_sums(ones))[0]

        return conv_grads.fastest(key, paths, {name: with_clipped_sum(path) for name, path in paths.items()})

    def _materialised_kernel_norms2(self) -> torch.Tensor:
        """Form the per-example kernel gradients (kept for the clipped sum); their squared norms."""
        return _squared_norms(self._materialise())

    def _materialise(self) -> torch.Tensor:
        module, (a, g) = self.module, self.held()
        rows = _workspace(module, (len(g), *module.weight.shape), g)
        self.per_example = [conv_grads.per_example_kernel_grads(module, a, g, self.examples, rows)]
        return self.per_example[0]

    def _ghost_kernel_norms2(self) -> torch.Tensor:
        """The same squared norms from Gram matrices, forming nothing of size (B, p, d)."""
        self.per_example = None
        return conv_grads.ghost_norms2(self.module, *self.held(), self.examples)

    def _weight_sum(self, factors: torch.Tensor) -> torch.Tensor:
        if self.per_example:
            return torch.einsum("b,b...->...", factors, self.per_example[0])
        return conv_grads.batch_kernel_grad(self.module, self.held()[0], self._scaled_output_grad(factors))

    def _bias_grads(self) -> torch.Tensor:
        per_row = self.held()[1].flatten(2).sum(2)
        return per_row.view(self.examples, -1, per_row.shape[-1]).sum(1)

    def _scaled_output_grad(self, factors: torch.Tensor) -> torch.Tensor:
        _, g = self.held()
        per_row = factors.repeat_interleave(g.shape[0] // self.examples)
        return g * per_row.view(-1, *([1] * (g.dim() - 1)))


@rule(WSConv2d)
class WeightStandardizedConvCall(ConvCall):
    """The rule of :class:`labeldp.models.WSConv2d`.

    Both kernel paths give gradients G with respect to the standardised kernel, mapped to the raw weight
    by :meth:`WSConv2d.weight_gradient_norms2` (norms) and :meth:`WSConv2d.weight_gradient` (the sum: the
    chain rule is linear, so it is applied once, to the sum). The detached output is kept for the
    gradient statistics, its version recorded to detect later in-place changes.
    """

    module: WSConv2d

    def __init__(self, module: nn.Module, activation: torch.Tensor, output: torch.Tensor, examples: int):
        super().__init__(module, activation, output, examples)
        # the output serves the gradient statistics; in-place changes are detected by version
        self.output: torch.Tensor | None = output.detach()
        self.output_version = output._version
        # the standardised kernel and scales, computed once per step (the weights do not change within it)
        self.standardization = self.module.standardization()

    def receive(self, output_grad: torch.Tensor) -> None:
        """As :meth:`LayerCall.receive`, then release the kept output."""
        super().receive(output_grad)
        self.output = None

    def _weight_norms2(self) -> torch.Tensor:
        scaled = super()._weight_norms2()
        return self.module.weight_gradient_norms2(scaled, *self._standardized_stats(), self.standardization)

    def _materialised_kernel_norms2(self) -> torch.Tensor:
        """sum_r |G_r|^2 / s_r^2 over output channels r (s_r: the channel's scale)."""
        inv_scale = 1.0 / self.standardization[1].squeeze(1)
        return (torch.linalg.vector_norm(self._materialise().flatten(2), dim=2) * inv_scale).pow(2).sum(1)

    def _ghost_kernel_norms2(self) -> torch.Tensor:
        """The ghost norms with the output gradients scaled by 1 / s."""
        self.per_example = None
        a, g = self.held()
        return conv_grads.ghost_norms2(self.module, a, g / self.standardization[1].view(1, -1, 1, 1), self.examples)

    def _weight_sum(self, factors: torch.Tensor) -> torch.Tensor:
        weight = super()._weight_sum(factors)
        return self.module.weight_gradient(weight.reshape(1, *self.module.weight.shape), self.standardization)[0]

    def _standardized_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, p) each, for the standardised kernel's per-example gradients G: sum(G_r) and G_r . y_r.

        From G itself when it was formed and is no larger than the output gradients (in chunks that stay in
        cache); else at the output: sum(G_r) = sum_t g_tr (sum of patch t), G_r . y_r = sum_t g_tr o_tr with
        o = conv(x, y) the output without bias (recomputed if it was changed in place).
        """
        module, (a, g), B = self.module, self.held(), self.examples
        if self.per_example and self.per_example[0][0].numel() <= g[0].numel() * (len(g) // B):
            grads, standardized = self.per_example[0].flatten(2), self.standardization[0]
            chunk = max(1, _CACHE_ELEMENTS // grads[0].numel())
            dot_chunks = [(grads[start : start + chunk] * standardized).sum(2) for start in range(0, B, chunk)]
            return grads.sum(2), torch.cat(dot_chunks)
        output = self.output
        assert output is not None, "kept until receive() returns"
        if output._version != self.output_version:  # modified in place later in the forward pass
            output = module._conv_forward(a, self.standardization[0].view_as(module.weight), None)
        elif module.bias is not None:
            output = output - module.bias.detach().view(1, -1, 1, 1)
        flat = g.flatten(2)  # (N, p, T)
        sums = (flat * conv_grads.patch_sums(module, a).unsqueeze(1)).sum(2)  # einsum: 2x slower on CPU
        dots = torch.einsum("npt,npt->np", flat, output.flatten(2))
        return sums.view(B, -1, sums.shape[1]).sum(1), dots.view(B, -1, dots.shape[1]).sum(1)


@rule(nn.LayerNorm)
class LayerNormCall(LayerCall):
    """The rule of ``torch.nn.LayerNorm``: per example, the weight's (normalised input x output gradient) and bias's."""

    module: nn.LayerNorm

    def norms2(self) -> torch.Tensor:
        module, (a, g), B = self.module, self.held(), self.examples
        normalized = F.layer_norm(a, module.normalized_shape, eps=module.eps)
        channel_dims = tuple(range(a.dim() - len(module.normalized_shape), a.dim()))

        def per_example(values: torch.Tensor) -> torch.Tensor:
            reduce = [d for d in range(1, values.dim()) if d not in channel_dims]
            summed = values.sum(reduce) if reduce else values
            return summed.view(B, -1, *summed.shape[1:]).sum(1)

        self.per_example = []
        if module.weight is not None and module.weight.requires_grad:
            self.per_example.append(per_example(normalized * g))
        if module.bias is not None and module.bias.requires_grad:
            self.per_example.append(per_example(g))
        return _total_squared_norms(self.per_example)


@rule(nn.GroupNorm)
class GroupNormCall(LayerCall):
    """The rule of ``torch.nn.GroupNorm``, from one call of GroupNorm's own backward kernel.

    The N rows side by side are one row of N C channels in N G groups (the same groups, so the same
    statistics), whose per-channel gradients are the per-row ones. The statistics are the forward pass's
    (``group_stats``, recomputed by the same kernel if autograd kept none).
    """

    module: nn.GroupNorm

    def __init__(self, module: nn.Module, activation: torch.Tensor, output: torch.Tensor, examples: int):
        super().__init__(module, activation, output, examples)
        self.group_stats = _saved_group_stats(output)

    def norms2(self) -> torch.Tensor:
        module, (x, g), B = self.module, self.held(), self.examples
        rows, channels = x.shape[:2]
        positions = x[0, 0].numel()
        mean, inv_std = (
            self.group_stats
            or torch.ops.aten.native_group_norm(
                x, None, None, rows, channels, positions, module.num_groups, module.eps
            )[1:]
        )
        wanted = [p is not None and p.requires_grad for p in (module.weight, module.bias)]
        _, weight, bias = torch.ops.aten.native_group_norm_backward(
            g.reshape(1, rows * channels, positions),
            x.reshape(1, rows * channels, positions),
            mean.reshape(1, -1),
            inv_std.reshape(1, -1),
            x.new_ones(1).expand(rows * channels),  # (unused) weight
            1,
            rows * channels,
            positions,
            rows * module.num_groups,
            [False, *wanted],
        )
        grads = [grad for grad, want in zip((weight, bias), wanted) if want]
        self.per_example = [grad.view(B, -1, channels).sum(1) for grad in grads]
        return _total_squared_norms(self.per_example)


@rule(nn.Embedding)
class EmbeddingCall(LayerCall):
    """The rule of ``torch.nn.Embedding``: output gradients added at the rows looked up (``padding_idx`` adds nothing).

    The norm counts the products of gradients that share a row; the clipped sum is one ``index_add_``.
    """

    module: nn.Embedding

    @classmethod
    def unsupported(cls, module: nn.Module) -> str | None:
        """A sparse embedding."""
        return "an embedding is sparse" if module.sparse else None

    def norms2(self) -> torch.Tensor:
        index, g = self._rows()
        same = (index.unsqueeze(2) == index.unsqueeze(1)).to(g.dtype)  # (B, T, T)
        return (same * torch.bmm(g, g.transpose(1, 2))).sum((1, 2))

    def clipped_sums(self, factors: torch.Tensor) -> list[torch.Tensor]:
        index, g = self._rows()
        weight = torch.zeros_like(self.module.weight)
        weight.index_add_(0, index.flatten(), (g * factors[:, None, None]).flatten(0, 1))
        return [weight]

    def _rows(self) -> tuple[torch.Tensor, torch.Tensor]:
        module, (activation, output_grad), B = self.module, self.held(), self.examples
        index = activation.reshape(B, -1)
        g = output_grad.reshape(B, index.shape[1], -1)
        if module.padding_idx is not None:
            g = g * (index != module.padding_idx).unsqueeze(-1).to(g.dtype)
        return index, g


def _saved_group_stats(output: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The (rows, groups) means and inverse standard deviations autograd saved for a GroupNorm output, or None."""
    node = output.grad_fn
    if type(node).__name__ != "NativeGroupNormBackward0":
        return None
    mean, inv_std = getattr(node, "_saved_result1", None), getattr(node, "_saved_result2", None)
    if isinstance(mean, torch.Tensor) and isinstance(inv_std, torch.Tensor):
        return mean.detach(), inv_std.detach()
    return None


def _workspace(module: nn.Module, shape: tuple[int, ...], like: torch.Tensor) -> torch.Tensor:
    """An uninitialised tensor of ``shape`` for ``module``'s per-example gradients, valid until its next call.

    On CPU a view of the module's workspace (grown with 10 % headroom, as Poisson batch sizes vary), since
    touching fresh pages costs about as much as the computation; elsewhere new memory (CUDA's caching
    allocator reuses it).
    """
    if like.device.type != "cpu":
        return like.new_empty(shape)
    size = math.prod(shape)
    buffer = _WORKSPACES.get(module)
    if buffer is None or buffer.numel() < size or buffer.dtype != like.dtype:
        buffer = _WORKSPACES[module] = like.new_empty(size + size // 10)
    return buffer[:size].view(shape)


def _squared_norms(per_example: torch.Tensor) -> torch.Tensor:
    """(B,): the squared norm of each example's slice of ``per_example``."""
    return torch.linalg.vector_norm(per_example.flatten(1), dim=1).pow(2)


def _total_squared_norms(per_example: list[torch.Tensor]) -> torch.Tensor:
    """(B,): the squared norm of each example's gradients ``per_example`` (one or more, a layer's parameters')."""
    total = _squared_norms(per_example[0])
    for grads in per_example[1:]:
        total = total + _squared_norms(grads)
    return total
