"""What the per-example gradient tests compare with: the clipped sum from one backward pass per
example (the definition), and small models that exercise every layer rule (embeddings, LayerNorm,
GroupNorm, weight-standardised and in-place convolutions, a WideResNet)."""

from __future__ import annotations

import torch
from torch import nn

from labeldp.dpsgd import cross_entropy_per_example
from labeldp.models import SmallCNN, TanhCNN, WideResNet, WSConv2d


def loop_reference(model, x, y, max_grad_norm, views=False):
    """Clipped sum and norms from one backward pass per example (the definition)."""
    params = [p for p in model.parameters() if p.requires_grad]
    sums, norms = [torch.zeros_like(p) for p in params], []
    for i in range(len(x)):
        xi = x[i] if views else x[i : i + 1]
        yi = y[i : i + 1].repeat(len(xi))
        grads = torch.autograd.grad(cross_entropy_per_example(model(xi), yi).mean(), params)
        norm = torch.sqrt(sum(g.pow(2).sum() for g in grads))
        norms.append(norm)
        for total, g in zip(sums, grads):
            total.add_(g * min(1.0, max_grad_norm / (float(norm) + 1e-6)))
    return sums, torch.stack(norms)


class EmbeddingText(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8, padding_idx=0)
        self.norm = nn.LayerNorm(8)
        self.out = nn.Linear(8, 5)

    def forward(self, tokens):
        return self.out(torch.relu(self.norm(self.embed(tokens)))).mean(1)


class ConvGroupNorm(nn.Module):
    """WS conv, GroupNorm, a strided conv, a dilated conv with many channels (ghost norms), Linear."""

    def __init__(self):
        super().__init__()
        self.ws = WSConv2d(3, 8, 3, padding=1)
        self.gn = nn.GroupNorm(4, 8)
        self.strided = nn.Conv2d(8, 48, 3, stride=2)
        self.wide = nn.Conv2d(48, 64, 3, padding=2, dilation=2, bias=False)
        self.head = nn.Linear(64, 5)

    def forward(self, x):
        h = torch.relu(self.gn(self.ws(x)))
        h = torch.relu(self.wide(torch.relu(self.strided(h))))
        return self.head(h.mean((2, 3)))


class StandardizedInPlace(nn.Module):
    """Weight-standardised convs on a small map (ghost norms) whose outputs are changed in place."""

    def __init__(self):
        super().__init__()
        self.first = WSConv2d(3, 40, 3, padding=1)
        self.second = WSConv2d(40, 48, 3, padding=1, bias=False)
        self.head = nn.Linear(48, 4)

    def forward(self, x):
        h = torch.relu_(self.first(x))
        return self.head(torch.relu_(self.second(h)).mean((2, 3)))


def cases():
    torch.manual_seed(0)
    return {
        "mlp": (
            nn.Sequential(nn.Flatten(), nn.Linear(12, 7), nn.Tanh(), nn.Linear(7, 3)),
            torch.randn(6, 3, 4),
            torch.randint(0, 3, (6,)),
        ),
        "sequence-linear": (
            nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 3), nn.Flatten(), nn.Linear(15, 3)),
            torch.randn(6, 5, 4),
            torch.randint(0, 3, (6,)),
        ),
        "cnn-inplace-relu": (
            SmallCNN(channels=(4, 6), hidden=16),
            torch.randn(5, 1, 28, 28),
            torch.randint(0, 10, (5,)),
        ),
        "tanh-cnn": (TanhCNN(), torch.randn(5, 1, 28, 28), torch.randint(0, 10, (5,))),
        "embedding-layernorm": (EmbeddingText(), torch.randint(0, 20, (6, 7)), torch.randint(0, 5, (6,))),
        "ws-groupnorm-conv": (ConvGroupNorm(), torch.randn(5, 3, 9, 9), torch.randint(0, 5, (5,))),
        "ws-ghost-inplace": (StandardizedInPlace(), torch.randn(4, 3, 3, 3), torch.randint(0, 4, (4,))),
        "wideresnet": (WideResNet(depth=10, width=1, groups=4), torch.randn(3, 3, 8, 8), torch.randint(0, 10, (3,))),
    }
