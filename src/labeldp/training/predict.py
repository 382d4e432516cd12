"""Predictions of a trained model and the metrics computed from them: logits, class probabilities,
accuracy, and for a regression on a grid of label values the expected values and their RMSE.

All of them are post-processing of a model and public inputs (and, for the metrics, public test
labels); each can be shared among the processes of a data-parallel run (``sharded``).
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
    """Logits of ``model`` on ``inputs`` (eval mode, in batches). With ``sharded``, a collective call
    of every process of a data-parallel run (:mod:`labeldp.distributed`; the same model on each):
    each computes its share of the rows, and every one returns all of them.

    Parameters
    ----------
    model : torch.nn.Module
        The model; its training mode is restored afterwards.
    inputs : numpy.ndarray or torch.Tensor
        The inputs, one row per example.
    batch_size : int, optional
        Rows per forward pass.
    sharded : bool, optional
        Share the rows among the processes of a data-parallel run (a collective call).

    Returns
    -------
    torch.Tensor
        The (n, K) float32 logits, on the CPU.
    """
    was_training = model.training
    model.eval()
    x = torch.as_tensor(inputs)
    rows = distributed.shard(len(x)) if sharded else slice(0, len(x))
    part = x[rows]
    device = next(model.parameters()).device
    out = [model(part[i : i + batch_size].to(device)).float().cpu() for i in range(0, len(part), batch_size)]
    out = torch.cat(out) if out else model(x[:1].to(device)).float().cpu()[:0]
    model.train(was_training)
    return distributed.gather_rows(out, len(x)) if sharded else out


def predict_proba(
    model: nn.Module,
    inputs: np.ndarray | torch.Tensor,
    temperature: float = 1.0,
    batch_size: int = 1000,
    sharded: bool = False,
) -> np.ndarray:
    """softmax(logits / temperature) as a float64 numpy array whose rows sum to 1.

    Parameters
    ----------
    model : torch.nn.Module
        The model.
    inputs : numpy.ndarray or torch.Tensor
        The inputs, one row per example.
    temperature : float, optional
        The softmax temperature, > 0.
    batch_size : int, optional
        Rows per forward pass.
    sharded : bool, optional
        Share the rows among the processes of a data-parallel run (a collective call).

    Returns
    -------
    numpy.ndarray
        The (n, K) class probabilities.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``temperature`` is not positive.
    """
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
    """Fraction of ``labels`` equal to the model's arg-max prediction.

    Parameters
    ----------
    model : torch.nn.Module
        The model.
    inputs : numpy.ndarray or torch.Tensor
        The inputs, one row per example.
    labels : numpy.ndarray
        Public class indices, one per row.
    batch_size : int, optional
        Rows per forward pass.
    sharded : bool, optional
        Share the rows among the processes of a data-parallel run (a collective call).

    Returns
    -------
    float
        The accuracy, in [0, 1].
    """
    predictions = predict_logits(model, inputs, batch_size, sharded).argmax(dim=1).numpy()
    return float((predictions == np.asarray(labels)).mean())


def expected_values(probabilities: np.ndarray, label_values: np.ndarray) -> np.ndarray:
    """A regression's predictions: the expected label value under each row's distribution over the grid
    (the prediction that minimises the expected squared error).

    Parameters
    ----------
    probabilities : numpy.ndarray
        (n, K) probabilities over the grid.
    label_values : numpy.ndarray
        The K values of the grid.

    Returns
    -------
    numpy.ndarray
        The n expected values, float64.
    """
    return np.asarray(probabilities, dtype=np.float64) @ np.asarray(label_values, dtype=np.float64)


def predict_values(
    model: nn.Module,
    inputs: np.ndarray | torch.Tensor,
    label_values: np.ndarray,
    batch_size: int = 1000,
    sharded: bool = False,
) -> np.ndarray:
    """The expected label value under the model's distribution over the grid ``label_values``.

    Parameters
    ----------
    model : torch.nn.Module
        The model, whose K outputs are the grid's points.
    inputs : numpy.ndarray or torch.Tensor
        The inputs, one row per example.
    label_values : numpy.ndarray
        The K values of the grid.
    batch_size : int, optional
        Rows per forward pass.
    sharded : bool, optional
        Share the rows among the processes of a data-parallel run (a collective call).

    Returns
    -------
    numpy.ndarray
        The n predicted values, float64.
    """
    return expected_values(predict_proba(model, inputs, batch_size=batch_size, sharded=sharded), label_values)


def rmse(
    model: nn.Module,
    inputs: np.ndarray | torch.Tensor,
    values: np.ndarray,
    label_values: np.ndarray,
    batch_size: int = 1000,
    sharded: bool = False,
) -> float:
    """Root mean squared error of :func:`predict_values` against ``values``.

    Parameters
    ----------
    model : torch.nn.Module
        The model, whose K outputs are the grid's points.
    inputs : numpy.ndarray or torch.Tensor
        The inputs, one row per example.
    values : numpy.ndarray
        Public label values, one per row.
    label_values : numpy.ndarray
        The K values of the grid.
    batch_size : int, optional
        Rows per forward pass.
    sharded : bool, optional
        Share the rows among the processes of a data-parallel run (a collective call).

    Returns
    -------
    float
        The RMSE, in the labels' units.
    """
    errors = predict_values(model, inputs, label_values, batch_size, sharded) - np.asarray(values, dtype=np.float64)
    return float(np.sqrt(np.mean(errors**2)))
