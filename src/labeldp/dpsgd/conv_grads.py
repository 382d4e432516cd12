"""Per-example quantities of a 2-D convolution, for clipping: kernel gradients, patch Gram matrices and
the "ghost" norms they give, patch sums, and the batch's kernel gradient.

``x`` is a layer's input (N, C, H, W), ``g`` its output's gradient (N, p, oh, ow). The N rows may hold
``examples`` examples of N / examples views each (augmentation multiplicity); per-example results
sum over an example's views. T = oh x ow positions, d = C x kh x kw. All results are exact.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from labeldp.errors import ConfigError

#: the fastest candidate of :func:`fastest` for each computation and layer configuration
_FASTEST: dict[tuple, str] = {}
#: the strategies that stack rows, and how many rows each passes to one backend call
ROWS_PER_CALL = {"loop": 1, "row-groups-8": 8, "row-groups-32": 32}
STRATEGIES = (*ROWS_PER_CALL, "patches", "grouped")


def patches(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """(N, T, d) input patches of ``conv`` (im2col), each patch's entries in (kh, kw, C) order.

    Copied from a strided view of the channels-last input (contiguous runs of C values): several times
    faster than ``F.unfold`` on small layers.
    """
    padded = _padded(conv, x).contiguous(memory_format=torch.channels_last)
    oh, ow = _output_size(conv, x)
    (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
    n, channels = padded.shape[:2]
    row, channel, height, width = padded.stride()
    windows = padded.as_strided(
        (n, oh, ow, kh, kw, channels), (row, height * sh, width * sw, height * dh, width * dw, channel)
    )
    return windows.reshape(n, oh * ow, kh * kw * channels)


def per_example_kernel_grads(
    conv: nn.Conv2d, x: torch.Tensor, g: torch.Tensor, examples: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """(examples, *conv.weight.shape): each example's kernel gradient, summed over its views.

    Five exact strategies, whose speed depends on the shapes and the machine (:func:`fastest` picks):
    ``loop`` (the backend's fused convolution backward per row), ``row-groups-8`` and ``row-groups-32``
    (8 or 32 rows stacked along the channels as a grouped convolution's groups), ``patches`` (im2col and a
    batched product) and ``grouped`` (a grouped convolution with the output gradients as kernels). All run
    on the calling thread: Python threads over rows ran slower, as idle OpenMP workers spin
    after a parallel op. ``out`` (N, *conv.weight.shape), optional, receives the per-row gradients.
    """
    key = ("kernel_grads", *configuration(conv, examples, x, g), torch.get_num_threads())
    return fastest(key, {name: partial(kernel_grads, name, conv, x, g, examples, out) for name in STRATEGIES})


def fastest(
    key: tuple, candidates: dict[str, Callable[[], torch.Tensor]], trials: dict[str, Callable[[], object]] | None = None
) -> torch.Tensor:
    """The result of the fastest of ``candidates`` (interchangeable exact computations), remembered by ``key``.

    The first call for a key runs each candidate once untimed (first allocations, autotuning), then times
    them twice in turn (waiting for the GPU) and keeps the quickest. ``trials``, by the same names, is
    what is timed instead (a candidate with the later work choosing it implies).
    """
    name = _FASTEST.get(key)
    if name is None:
        run = trials or candidates
        for candidate in candidates:
            run[candidate]()
        timings = dict.fromkeys(candidates, math.inf)
        for _ in range(2):
            for candidate in candidates:
                _wait_for_gpu()
                start = time.perf_counter()
                run[candidate]()
                _wait_for_gpu()
                timings[candidate] = min(timings[candidate], time.perf_counter() - start)
        name = _FASTEST[key] = min(timings, key=timings.__getitem__)
    return candidates[name]()


def _wait_for_gpu() -> None:
    """Block until the GPU has run what was queued (without it a timing sees only the kernels' launch)."""
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def configuration(conv: nn.Conv2d, examples: int, *tensors: torch.Tensor) -> tuple:
    """What decides the fastest candidate for a call of ``conv``: a hashable key for :func:`fastest`.

    The per-row shapes, the views per example, and the example count rounded up to a power of two
    (Poisson batches change size every step; timing each size would cost more than it saves).
    """
    shapes = tuple(tuple(tensor.shape[1:]) for tensor in tensors)
    views = len(tensors[0]) // max(examples, 1)
    return (
        *shapes,
        views,
        1 << (examples - 1).bit_length(),
        conv.kernel_size,
        conv.stride,
        conv.padding,
        conv.dilation,
        tensors[0].dtype,
        tensors[0].device.type,
    )


def kernel_grads(
    strategy: str, conv: nn.Conv2d, x: torch.Tensor, g: torch.Tensor, examples: int, out: torch.Tensor | None = None
) -> torch.Tensor:
    """:func:`per_example_kernel_grads` by a given strategy, one of :data:`STRATEGIES`."""
    n, out_channels = g.shape[:2]
    grads = g.new_empty(n, *conv.weight.shape) if out is None else out
    if strategy in ROWS_PER_CALL:
        size = ROWS_PER_CALL[strategy]
        for start in range(0, n, size):
            grads[start : start + size] = _stacked_kernel_grads(conv, x[start : start + size], g[start : start + size])
    elif strategy == "patches":
        kh, kw = conv.kernel_size
        channels_last = torch.bmm(g.flatten(2), patches(conv, x)).view(n, out_channels, kh, kw, -1)
        grads.copy_(channels_last.permute(0, 1, 4, 2, 3))
    elif strategy == "grouped":
        kh, kw = conv.kernel_size
        full = F.conv2d(
            x.transpose(0, 1),
            g.reshape(n * out_channels, 1, *g.shape[2:]),
            padding=conv.padding,
            stride=conv.dilation,
            dilation=conv.stride,
            groups=n,
        )[..., :kh, :kw]  # (C, N*p, kh, kw)
        grads.copy_(full.reshape(x.shape[1], n, out_channels, kh, kw).permute(1, 2, 0, 3, 4))
    else:
        raise ConfigError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    return grads.view(examples, n // examples, *conv.weight.shape).sum(1) if n != examples else grads


def _stacked_kernel_grads(conv: nn.Conv2d, x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """(m, *conv.weight.shape): m rows' kernel gradients in one call, stacked as a grouped convolution's groups."""
    m, shape = len(x), conv.weight.shape
    return torch.ops.aten.convolution_backward(
        g.reshape(1, m * shape[0], *g.shape[2:]),
        x.reshape(1, m * shape[1], *x.shape[2:]),
        conv.weight.new_empty(m * shape[0], *shape[1:]),  # only its shape is read: no input gradient is asked for
        None,
        conv.stride,
        conv.padding,
        conv.dilation,
        False,
        [0, 0],
        m,
        [False, True, False],
    )[1].view(m, *shape)


def batch_kernel_grad(conv: nn.Conv2d, x: torch.Tensor, grad_output: torch.Tensor) -> torch.Tensor:
    """The whole batch's kernel gradient for ``grad_output`` (one fused kernel)."""
    return torch.ops.aten.convolution_backward(
        grad_output,
        x,
        conv.weight.detach(),
        None,
        conv.stride,
        conv.padding,
        conv.dilation,
        False,
        [0, 0],
        conv.groups,
        [False, True, False],
    )[1]


def patch_gram(conv: nn.Conv2d, x: torch.Tensor, examples: int, method: str = "auto") -> torch.Tensor:
    """(examples, V T, V T): the Gram matrix of each example's input patches over its V views' positions.

    ``"patches"`` forms the patches (~ T^2 d). ``"pixels"`` does not: it places the pixels' Gram matrix
    P[u, v] = x_u . x_v (~ U^2 C) among the zero padding and sums it along the kernel offsets o, since
    patch_t . patch_s = sum_o P[t + o, s + o]. ``"auto"`` times both, trying ``"pixels"`` only when the
    padded pixel Gram matrix has at most 4 times the entries of the patch one: on strided layers it has
    many more (a 3x3/2 convolution of a 32x32 map: 18 times) and takes seconds and gigabytes.
    """
    if method == "auto":
        oh, ow = _output_size(conv, x)
        used_h, used_w = _used_size(conv, oh, ow)
        if used_h * used_w > 2 * oh * ow:  # the pixel Gram matrix: over 4 times the entries
            return patch_gram(conv, x, examples, "patches")
        key = ("patch_gram", *configuration(conv, examples, x))
        return fastest(key, {name: partial(patch_gram, conv, x, examples, name) for name in ("patches", "pixels")})
    views = len(x) // examples
    if method == "patches":
        rows = patches(conv, x).reshape(examples, -1, conv.weight[0].numel())
        return torch.bmm(rows, rows.transpose(1, 2))
    if method != "pixels":
        raise ConfigError(f"method must be 'auto', 'patches' or 'pixels', got {method!r}")
    channels, (ph, pw) = x.shape[1], _padding(conv)
    (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
    oh, ow = _output_size(conv, x)
    # the rows and columns of the padded input that some patch touches, and the input pixels among them
    used_h, used_w = _used_size(conv, oh, ow)
    height, width = min(x.shape[2], used_h - ph), min(x.shape[3], used_w - pw)
    flat = x[:, :, :height, :width].reshape(examples, views, channels, height * width)
    flat = flat.transpose(1, 2).reshape(examples, channels, views * height * width)
    pixel_gram = x.new_zeros(examples, views, used_h, used_w, views, used_h, used_w)
    inner_rows, inner_cols = slice(ph, ph + height), slice(pw, pw + width)  # the input's pixels, padded coordinates
    pixel_gram[:, :, inner_rows, inner_cols, :, inner_rows, inner_cols] = torch.bmm(flat.transpose(1, 2), flat).view(
        examples, views, height, width, views, height, width
    )
    gram = None
    for i in range(0, kh * dh, dh):
        for j in range(0, kw * dw, dw):
            row_offsets, col_offsets = slice(i, i + (oh - 1) * sh + 1, sh), slice(j, j + (ow - 1) * sw + 1, sw)
            shifted = pixel_gram[:, :, row_offsets, col_offsets, :, row_offsets, col_offsets]
            gram = shifted.clone() if gram is None else gram.add_(shifted)
    assert gram is not None, "a kernel has at least one offset"
    return gram.reshape(examples, views * oh * ow, views * oh * ow)


def ghost_norms2(conv: nn.Conv2d, x: torch.Tensor, g: torch.Tensor, examples: int) -> torch.Tensor:
    """(examples,): each example's squared kernel gradient norm, from Gram matrices.

    ||sum_t g_t patch_t^T||^2 = sum_{t,s} (patch_t . patch_s)(g_t . g_s) over its views' positions.
    """
    flat = g.flatten(2).view(examples, -1, g.shape[1], g.shape[2] * g.shape[3])  # (examples, V, p, T)
    flat = flat.transpose(1, 2).reshape(examples, g.shape[1], -1)  # (examples, p, V T)
    return (patch_gram(conv, x, examples) * torch.bmm(flat.transpose(1, 2), flat)).sum((1, 2))


def patch_sums(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    """(N, T): the sum of each input patch's entries (a convolution of the channel sum with ones)."""
    ones = x.new_ones(1, 1, *conv.kernel_size)
    summed = F.conv2d(x.sum(1, keepdim=True), ones, stride=conv.stride, padding=conv.padding, dilation=conv.dilation)
    return summed.flatten(1)


def _padding(conv: nn.Conv2d) -> tuple[int, int]:
    """(ph, pw): the zero padding of ``conv`` (string padding has no per-example rule: ``unsupported`` says so)."""
    assert not isinstance(conv.padding, str), "string padding is refused before the per-example rules"
    ph, pw = conv.padding
    return ph, pw


def _padded(conv: nn.Conv2d, x: torch.Tensor) -> torch.Tensor:
    ph, pw = _padding(conv)
    return F.pad(x, (pw, pw, ph, ph)) if ph or pw else x


def _used_size(conv: nn.Conv2d, oh: int, ow: int) -> tuple[int, int]:
    """The rows and columns of the padded input that some patch of an (oh, ow) output touches."""
    (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
    return (oh - 1) * sh + (kh - 1) * dh + 1, (ow - 1) * sw + (kw - 1) * dw + 1


def _output_size(conv: nn.Conv2d, x: torch.Tensor) -> tuple[int, int]:
    """(oh, ow): the output size of ``conv`` for input ``x``."""
    (h, w), (ph, pw) = x.shape[2:], _padding(conv)
    (kh, kw), (sh, sw), (dh, dw) = conv.kernel_size, conv.stride, conv.dilation
    return (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1, (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
