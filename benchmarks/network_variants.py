"""Variants of the 28x28 ConvNet, non-private, on a public tenth of MNIST's training rows (where a network's
ceiling shows): wider groups, a residual 3x3 convolution after each group, and cutout.

Each variant trains as ``labeldp train`` trains the default network (SGD with Nesterov momentum 0.9, weight
decay 5e-4, a cosine schedule, batch 128, +-2 px shifts, ``--epochs`` at ``--lr``) on the 6,000 rows
``numpy.random.default_rng(0)`` picks, and is tested on all 10,000 test images, once per seed. Labels are
read in the clear: a comparison of networks, not a private run.

Usage: python benchmarks/network_variants.py [--data-dir ../shared/datasets/mnist] [--variants c16 r16 ...]
       [--seeds 0 1 2] [--fraction 0.1] [--threads 2]
"""

from __future__ import annotations

import argparse
import gzip
import math
import os
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from labeldp.models.convnet import ConvNet
from labeldp.training.augment import augment


class Residual(nn.Module):
    """x + GELU(BN(conv3x3(x)))."""

    def __init__(self, channels: int):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(channels, channels, 3, padding=1, bias=False), nn.BatchNorm2d(channels))
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.act(self.body(x))


def residual_convnet(widths: tuple[int, int, int], first: int) -> nn.Module:
    """The ConvNet with a :class:`Residual` block after each group."""
    net = ConvNet(1, 10, widths, first)
    layers = list(net.children())
    groups = [m for layer in layers[2:5] for m in (layer, Residual(layer[-2].num_features))]
    model = nn.Sequential(*layers[:2], *groups, *layers[5:])
    return model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]


#: variant -> (network, cutout)
VARIANTS = {
    "c16": (lambda: ConvNet(1, 10), False),
    "c16-cutout": (lambda: ConvNet(1, 10), True),
    "c24": (lambda: ConvNet(1, 10, (24, 48, 96), 12), False),
    "c32": (lambda: ConvNet(1, 10, (32, 64, 128), 16), False),
    "r16": (lambda: residual_convnet((16, 32, 64), 8), False),
    "r24": (lambda: residual_convnet((24, 48, 96), 12), False),
}


def idx(path: Path, offset: int) -> np.ndarray:
    with gzip.open(path, "rb") as f:
        return np.frombuffer(f.read(), np.uint8, offset=offset)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path(__file__).resolve().parents[2] / "shared/datasets/mnist")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    images = {
        s: idx(args.data_dir / f"{p}-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)
        for s, p in (("train", "train"), ("test", "t10k"))
    }
    labels = {s: idx(args.data_dir / f"{p}-labels-idx1-ubyte.gz", 8) for s, p in (("train", "train"), ("test", "t10k"))}
    rows = np.sort(np.random.default_rng(0).choice(60_000, size=round(args.fraction * 60_000), replace=False))
    mean, std = float(images["train"][rows].mean() / 255), float(images["train"][rows].std() / 255)

    def tensor(a: np.ndarray) -> torch.Tensor:
        return torch.tensor((a.astype(np.float32) / 255 - mean) / std)

    x, y = tensor(images["train"][rows]), torch.tensor(labels["train"][rows].astype(np.int64))
    x_test, y_test = tensor(images["test"]), torch.tensor(labels["test"].astype(np.int64))
    print(f"{len(y)} training rows, {args.epochs} epochs at lr {args.lr}, {args.threads} threads")
    for name in args.variants:
        make, cutout = VARIANTS[name]
        for seed in args.seeds:
            torch.manual_seed(seed)
            generator = torch.Generator().manual_seed(seed)
            model = make()
            opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, nesterov=True, weight_decay=5e-4)
            steps = args.epochs * math.ceil(len(y) / 128)
            schedule = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 0.5 * (1 + math.cos(math.pi * s / steps)))
            start = time.perf_counter()
            for _ in range(args.epochs):
                model.train()
                order = torch.randperm(len(y), generator=generator)
                for i in range(0, len(y), 128):
                    batch = order[i : i + 128]
                    inputs = augment(x[batch], "translate", generator, cutout=cutout)
                    opt.zero_grad()
                    nn.functional.cross_entropy(model(inputs), y[batch]).backward()
                    opt.step()
                    schedule.step()
            model.eval()
            with torch.no_grad():
                right = sum(
                    int((model(x_test[i : i + 1000]).argmax(1) == y_test[i : i + 1000]).sum())
                    for i in range(0, len(y_test), 1000)
                )
            print(
                f"{name:<11} seed {seed}  {100 * right / len(y_test):6.2f} %  {time.perf_counter() - start:5.0f} s  "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
