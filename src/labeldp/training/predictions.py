"""Predictions of a trained model and the metrics computed from them (a regression's on its grid of values).

Post-processing of a model and public inputs (and public test labels). With ``sharded``, a function
is a collective call of every process of a data-parallel run (the same model on each): each computes
its share of the rows, and every one returns all of them.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from labeldp import distributed
from labeldp.errors import ConfigError


@torch.no_grad()
def predict_logits(
    model: nn.Module, inputs: np.ndarray | torch.Tensor, batch_size: int = 1000, sharded: bool = False
) -> torch.Tensor:
    """(n, K) float32 logits of ``model`` on ``inputs``, on the CPU (eval mode, in batches; training mode restored)."""
    was_training = model.training
    model.eval()
    x = torch.as_tensor(inputs)
    rows = distributed.shard(len(x)) if sharded else slice(0, len(x))
    part = x[rows]
    device = next(model.parameters()).device
    batches = [model(part[i : i + batch_size].to(device)).float().cpu() for i in range(0, len(part), batch_size)]
    out = torch.cat(batches) if batches else model(x[:1].to(device)).float().cpu()[:0]
    model.train(was_training)
    return distributed.gather_rows(out, len(x)) if sharded else out


def predict_proba(
    model: nn.Module,
    inputs: np.ndarray | torch.Tensor,
    temperature: float = 1.0,
    batch_size: int = 1000,
    sharded: bool = False,
) -> np.ndarray:
    """softmax(logits / temperature) as (n, K) float64 rows summing to 1."""
    if not temperature > 0:
        raise ConfigError(f"temperature must be > 0, got {temperature}")
    logits = predict_logits(model, inputs, batch_size, sharded)
    probs = torch.softmax(logits.double() / temperature, dim=1).numpy()
    return probs / probs.sum(axis=1, keepdims=True)


def accuracy(
    model: nn.Module,
    inputs: np.ndarray | torch.Tensor,
    labels: np.ndarray,
    batch_size: int = 1000,
    sharded: bool = False,
) -> float:
    """Fraction of the public ``labels`` equal to the model's arg-max prediction."""
    predictions = predict_logits(model, inputs, batch_size, sharded).argmax(dim=1).numpy()
    return float((predictions == np.asarray(labels)).mean())


def expected_values(probabilities: np.ndarray, label_values: np.ndarray) -> np.ndarray:
    """A regression's predictions: each row's expected grid value (which minimises the expected squared error)."""
    return np.asarray(probabilities, dtype=np.float64) @ np.asarray(label_values, dtype=np.float64)


def predict_values(
    model: nn.Module,
    inputs: np.ndarray | torch.Tensor,
    label_values: np.ndarray,
    batch_size: int = 1000,
    sharded: bool = False,
) -> np.ndarray:
    """The expected label value under the model's distribution over the grid ``label_values``."""
    return expected_values(predict_proba(model, inputs, batch_size=batch_size, sharded=sharded), label_values)


def rmse(
    model: nn.Module,
    inputs: np.ndarray | torch.Tensor,
    values: np.ndarray,
    label_values: np.ndarray,
    batch_size: int = 1000,
    sharded: bool = False,
) -> float:
    """Root mean squared error of :func:`predict_values` against the public ``values``."""
    errors = predict_values(model, inputs, label_values, batch_size, sharded) - np.asarray(values, dtype=np.float64)
    return float(np.sqrt(np.mean(errors**2)))
