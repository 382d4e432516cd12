"""Median step time of DP-SGD: non-private SGD, labeldp's clipping paths, and Opacus's modes.

Every variant runs the same model from the same initial weights on the same batch (batch 256) in one
process, the variants' steps are timed round-robin, and the table prints each one's ratio to the
non-private step measured in the same run. A
step is forward, backward, clipping, noise and the optimiser update. Opacus is needed only here:

    .venv/bin/pip install opacus     # or: make bench-dpsgd

Like the ``labeldp`` command, it first makes glibc reuse freed memory (:mod:`labeldp.runtime`), for
every variant alike; ``--default-allocator`` measures with glibc's defaults instead. ``--device cuda``
times the steps on a GPU (each timing waits for the GPU to finish the step).

Models: the MNIST DP-SGD CNN (``tanh-cnn``, Tramer & Boneh 2021), labeldp's label-DP MNIST CNN
(``cnn``) and a CIFAR-shaped WRN-16-4 with GroupNorm and weight standardisation (``wrn16-4``).

``--layers`` times, instead, what exact per-example clipping must add to each convolution with
torch's kernels on this machine. For every distinct convolution of the model it takes the median of
the batched kernel gradient (what the non-private step computes), of each per-example strategy of
:func:`labeldp.dpsgd.conv_grads.per_example_kernel_grads`, and of the Gram matrices of
ghost norms (whose clipped sum is then one batched kernel gradient, as in the non-private step).
The smaller of "fastest per-example strategy minus batched" and "Gram matrices" is a lower bound
on the layer's extra time (it leaves out the norms and the clipped sum). Their sum over the model's
convolutions (a configuration counted as often as it occurs), plus the time to draw the noise (one
normal deviate per parameter), is a lower bound on the private step's extra time with these
kernels, printed as a share of the non-private step.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time
import warnings
from collections.abc import Callable
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from labeldp import runtime
from labeldp.dpsgd import clipped_gradient_sum, conv_grads, gaussian_noise, privatize_gradients
from labeldp.models import build_model
from labeldp.training import resolve_device

SHAPES = {"tanh-cnn": (1, 28, 28), "cnn": (1, 28, 28), "wrn16-4": (3, 32, 32)}
OPACUS_MODES = ("hooks", "functorch", "ew", "ghost")
NOISE, CLIP, LR = 1.0, 1.0, 0.1


def interleaved_medians(
    steps: dict[str, Callable[[], None]], repeats: int, warmup: int, device: torch.device
) -> dict[str, float]:
    """Median seconds per step of each variant, timed round-robin (one step of each variant per round)
    so that a machine whose speed drifts during the run slows every variant alike."""

    def finish() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for step in steps.values():
        for _ in range(warmup):
            step()
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            finish()
            start = time.perf_counter()
            step()
            finish()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def non_private(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()

    return step


def labeldp(model: nn.Module, x: torch.Tensor, y: torch.Tensor, method: str) -> Callable[[], None]:
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)

    def step() -> None:
        clipped = clipped_gradient_sum(model, x, y, CLIP, method=method)
        privatize_gradients(model, clipped, NOISE, CLIP, len(x))  # the default noise, as a run draws it
        optimizer.step()

    return step


def opacus(model: nn.Module, x: torch.Tensor, y: torch.Tensor, mode: str) -> Callable[[], None]:
    from opacus import PrivacyEngine  # only this benchmark needs Opacus

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=len(x))
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    engine = PrivacyEngine(accountant="prv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = engine.make_private(
            module=model,
            optimizer=optimizer,
            data_loader=loader,
            noise_multiplier=NOISE,
            max_grad_norm=CLIP,
            grad_sample_mode=mode,
            criterion=nn.CrossEntropyLoss(),
        )
    private_model, private_optimizer = made[0], made[1]
    criterion = made[2] if mode == "ghost" else nn.CrossEntropyLoss()

    def step() -> None:
        private_optimizer.zero_grad(set_to_none=True)
        criterion(private_model(x), y).backward()
        private_optimizer.step()

    return step


def run(
    model_name: str,
    batch_size: int,
    repeats: int,
    warmup: int,
    with_opacus: bool,
    with_vmap: bool,
    device: torch.device,
) -> list[tuple[str, float]]:
    torch.manual_seed(0)
    reference = build_model(model_name, SHAPES[model_name], 10).to(device)
    x = torch.randn(batch_size, *SHAPES[model_name]).to(device)
    y = torch.randint(0, 10, (batch_size,)).to(device)
    variants: list[tuple[str, Callable[[nn.Module], Callable[[], None]]]] = [
        ("non-private SGD", lambda m: non_private(m, x, y)),
        ("labeldp fast", lambda m: labeldp(m, x, y, "fast")),
    ]
    if with_vmap:
        variants.append(("labeldp vmap", lambda m: labeldp(m, x, y, "vmap")))
    if with_opacus:
        variants += [(f"opacus {mode}", lambda m, mode=mode: opacus(m, x, y, mode)) for mode in OPACUS_MODES]
    steps = {}
    for name, make in variants:
        try:
            steps[name] = make(copy.deepcopy(reference))
            steps[name]()  # the first warm-up step: a mode that cannot handle the model is reported, not fatal
        except Exception as error:
            steps.pop(name, None)
            print(f"  {name}: failed ({type(error).__name__}: {str(error).splitlines()[0][:100]})")
    medians = interleaved_medians(steps, repeats, max(warmup - 1, 0), device)
    for name, seconds in medians.items():
        print(f"  {name}: {seconds * 1000:.1f} ms", flush=True)
    return list(medians.items())


def conv_inputs(model: nn.Module, x: torch.Tensor) -> list[tuple[int, nn.Conv2d, torch.Tensor, torch.Tensor]]:
    """(calls, conv, input, output gradient) for each distinct convolution configuration of ``model``
    on ``x``: how many of the model's convolutions have it, the inputs of a forward pass, and random
    output gradients (the timings do not depend on the values)."""
    calls: dict[tuple, list] = {}

    def record(conv: nn.Module, args: tuple, output: torch.Tensor) -> None:
        grad = torch.randn_like(output)
        key = conv_grads.configuration(conv, len(x), args[0], grad)
        calls.setdefault(key, [0, conv, args[0].detach(), grad])[0] += 1

    hooks = [m.register_forward_hook(record) for m in model.modules() if isinstance(m, nn.Conv2d)]
    with torch.no_grad():
        model(x)
    for hook in hooks:
        hook.remove()
    return [tuple(call) for call in calls.values()]


def extra_time_floor(model_name: str, batch_size: int, repeats: int, warmup: int, device: torch.device) -> None:
    """Print, per distinct convolution, the batched kernel gradient against the per-example
    strategies and the ghost-norm Gram matrices (each extra counted once per call of the
    configuration), the time to draw the noise, and the lower bound they sum to."""
    torch.manual_seed(0)
    model = build_model(model_name, SHAPES[model_name], 10).to(device)
    x = torch.randn(batch_size, *SHAPES[model_name]).to(device)
    y = torch.randint(0, 10, (batch_size,)).to(device)
    base = interleaved_medians({"step": non_private(model, x, y)}, repeats, warmup, device)["step"]
    print(f"  non-private step: {base * 1000:.1f} ms")
    print(
        f"  {'convolution (x calls)':<38} {'batched':>8} {'per-example (fastest)':>28} {'ghost Grams':>12} "
        f"{'extra >=':>9}"
    )
    total = 0.0
    for calls, conv, inputs, grad in conv_inputs(model, x):
        out = grad.new_empty(len(inputs), *conv.weight.shape)
        variants = {
            "batched": lambda: conv_grads.batch_kernel_grad(conv, inputs, grad),
            "ghost": lambda: conv_grads.ghost_norms2(conv, inputs, grad, len(inputs)),
        }
        variants |= {
            name: partial(conv_grads.kernel_grads, name, conv, inputs, grad, len(inputs), out)
            for name in conv_grads.STRATEGIES
        }
        times = interleaved_medians(variants, repeats, warmup, device)
        fastest = min(conv_grads.STRATEGIES, key=times.get)
        extra = max(0.0, min(times[fastest] - times["batched"], times["ghost"]))
        total += calls * extra
        (kh, kw), (sh, sw), (h, w) = conv.kernel_size, conv.stride, inputs.shape[2:]
        stride = sh if sh == sw else f"({sh},{sw})"
        name = f"{conv.in_channels}->{conv.out_channels} {kh}x{kw}/{stride} on {h}x{w} (x{calls})"
        print(
            f"  {name:<38} {times['batched'] * 1000:>5.1f} ms {times[fastest] * 1000:>8.1f} ms ({fastest:<13}) "
            f"{times['ghost'] * 1000:>9.1f} ms {extra * 1000:>6.1f} ms",
            flush=True,
        )
    parameters = sum(p.numel() for p in model.parameters())
    like = torch.zeros(parameters, device=device)
    noise = interleaved_medians({"noise": lambda: gaussian_noise(like, 1.0)}, repeats, warmup, device)["noise"]
    print(f"  noise, {parameters:,} normal deviates: {noise * 1000:.1f} ms")
    total += noise
    print(
        f"  extra time of a private step, at least: {total * 1000:.1f} ms, {total / base:.2f}x the non-private "
        f"step (a step of at most 1.1x allows 0.10x)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["tanh-cnn", "cnn", "wrn16-4"], choices=sorted(SHAPES))
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=None, help="timed steps per variant (default 20, 3 for wrn16-4)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed steps per variant (default %(default)s)")
    parser.add_argument("--no-opacus", action="store_true", help="skip Opacus (e.g. when it is not installed)")
    parser.add_argument(
        "--no-vmap",
        action="store_true",
        help="skip labeldp's vmap path (on wrn16-4 it needs tens of GB and slows the steps timed after it)",
    )
    parser.add_argument(
        "--layers",
        action="store_true",
        help="time what exact per-example clipping adds to each convolution (see above) instead",
    )
    parser.add_argument("--device", default="cpu", help="torch device: cpu, cuda, cuda:1 or auto (default %(default)s)")
    parser.add_argument(
        "--default-allocator",
        action="store_true",
        help="keep glibc's default allocator settings (freed large blocks go back to the system)",
    )
    args = parser.parse_args()
    device = resolve_device(args.device)
    reused = not args.default_allocator and runtime.reuse_freed_memory()
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{torch.get_num_threads()} CPU threads"
    print(
        f"torch {torch.__version__}, {where}, batch {args.batch_size}, "
        f"allocator: {'reuses freed memory' if reused else 'default'}"
    )
    tables = {}
    for model_name in args.models:
        print(f"{model_name}:", flush=True)
        repeats = args.repeats or (3 if model_name == "wrn16-4" else 20)
        if args.layers:
            extra_time_floor(model_name, args.batch_size, repeats, args.warmup, device)
            continue
        tables[model_name] = run(
            model_name, args.batch_size, repeats, args.warmup, not args.no_opacus, not args.no_vmap, device
        )
    if not tables:
        return
    print()
    print(f"{'model':<10} {'variant':<18} {'median step':>12} {'vs non-private':>15}")
    for model_name, rows in tables.items():
        base = dict(rows)["non-private SGD"]
        for name, seconds in rows:
            print(f"{model_name:<10} {name:<18} {seconds * 1000:>9.1f} ms {seconds / base:>14.2f}x")


if __name__ == "__main__":
    main()
