"""The per-example losses a stage trains with, the preparation of its targets, and held-out scores.

The targets are released labels, their noise channels or released values: public side of the boundary.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from labeldp import distributed
from labeldp.errors import ConfigError

#: a per-example loss: ``loss_of(logits, targets)``, one value per row
PerExampleLoss = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def likelihood_loss(logits: torch.Tensor, log_likelihood: torch.Tensor) -> torch.Tensor:
    """Per-example -log sum_y softmax(logits)_y L[y], L[y] = Pr[observed label | true class y] (given as log L).

    With one-hot L it is cross-entropy; with a mechanism's channel forward-corrected cross-entropy
    (Patrini et al. 2017), whose minimiser is the *clean* class posterior.
    """
    return -torch.logsumexp(F.log_softmax(logits, dim=1) + log_likelihood, dim=1)


def posterior_loss(logits: torch.Tensor, log_evidence: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy to the fixed posterior evidence / sum(evidence) (log evidence up to a row constant)."""
    return -(torch.softmax(log_evidence, dim=1) * F.log_softmax(logits, dim=1)).sum(dim=1)


def binned_likelihood_loss(logits: torch.Tensor, evidence: torch.Tensor) -> torch.Tensor:
    """Per-example loss for releases that tell in which *bin* of the grid a label lies (RR-on-bins).

    ``evidence`` is (n, 3, K): the channel L[y] (constant inside a bin), ``within`` (each bin's prior
    probability split among its grid points, summing to 1 per bin) and each grid point's bin. The loss is
    the cross-entropy to r(y) = R(b(y)) within(y), R(b) = Q(b) L(b) / sum Q L the bin's posterior under
    the model's bin probabilities Q (held fixed): on the bins it has the forward loss's gradient (EM),
    inside a bin it pulls to the prior's split, which the release does not identify and which the forward
    loss alone drifts towards the bin's ends.
    """
    log_q = F.log_softmax(logits, dim=1)
    likelihood, within, bins = evidence[:, 0], evidence[:, 1], evidence[:, 2].long()
    with torch.no_grad():
        q = log_q.exp()
        mass = torch.zeros_like(q).scatter_add_(1, bins, q)  # Q(b) at index b
        joint = mass.gather(1, bins) * likelihood  # Q(b(y)) L(y)
        target = joint / (q * likelihood).sum(dim=1, keepdim=True) * within
    return -(target * log_q).sum(dim=1)


def squared_error_loss(logits: torch.Tensor, values: torch.Tensor, label_values: torch.Tensor) -> torch.Tensor:
    """Per-example squared error of the expected value sum_y softmax(logits)_y v_y, in units of the grid's range."""
    scale = label_values[-1] - label_values[0]
    return ((F.softmax(logits, dim=1) @ label_values - values) / scale) ** 2


def prepare_targets(
    targets: np.ndarray, num_classes: int, label_values: np.ndarray | None
) -> tuple[torch.Tensor, PerExampleLoss]:
    """The targets as a tensor, and the per-example loss that fits them.

    (n,) class indices and (n, K) likelihoods by :func:`likelihood_loss` (as log likelihoods), (n, 3, K)
    binned evidence by :func:`binned_likelihood_loss`, (n,) float values with ``label_values`` by
    :func:`squared_error_loss`. Malformed targets raise a ConfigError.
    """
    array = np.asarray(targets)
    if array.ndim == 3:
        return _binned_targets(array, num_classes), binned_likelihood_loss
    if array.ndim == 1 and array.dtype.kind == "f" and label_values is not None:
        if not np.all(np.isfinite(array)):
            raise ConfigError("value targets must be finite")
        grid = torch.as_tensor(np.asarray(label_values), dtype=torch.float32)
        return (
            torch.as_tensor(array, dtype=torch.float32),
            lambda logits, values: squared_error_loss(logits, values, grid.to(logits.device)),
        )
    return _log_likelihood_targets(array, num_classes), likelihood_loss


def held_out_loss_of(loss_of: PerExampleLoss) -> PerExampleLoss:
    """The loss scoring held-out targets: the training loss, but the channel's likelihood for binned evidence."""
    if loss_of is binned_likelihood_loss:
        return lambda logits, evidence: likelihood_loss(logits, evidence[:, 0].log())
    return loss_of


@torch.no_grad()
def held_out_loss(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    loss_of: PerExampleLoss,
    batch_size: int = 1000,
    sharded: bool = False,
) -> float:
    """Mean of ``loss_of`` over held-out examples (eval mode, in batches; ``sharded``: a collective call)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    rows = distributed.shard(len(inputs)) if sharded else slice(0, len(inputs))
    part, part_targets = inputs[rows], targets[rows]
    total = torch.zeros((), dtype=torch.float64)
    for i in range(0, len(part), batch_size):
        logits = model(part[i : i + batch_size].to(device)).float()
        total += loss_of(logits, part_targets[i : i + batch_size].to(device)).double().sum().cpu()
    model.train(was_training)
    if sharded:
        total = distributed.all_reduce_sum(total)
    return float(total) / len(inputs)


def _binned_targets(array: np.ndarray, num_classes: int) -> torch.Tensor:
    if array.shape[1:] != (3, num_classes):
        raise ConfigError(f"binned evidence must have shape (n, 3, {num_classes}), got {array.shape}")
    likelihood, within, bins = array[:, 0], array[:, 1], array[:, 2]
    if not np.all(np.isfinite(array)) or likelihood.min() < 0 or not np.all(likelihood.max(axis=1) > 0):
        raise ConfigError("binned evidence: likelihoods must be finite, non-negative, with a positive entry per row")
    if within.min() < 0 or bins.min() < 0 or bins.max() >= num_classes or np.any(bins != np.round(bins)):
        raise ConfigError("binned evidence: within-bin shares must be >= 0 and bins integers in [0, K)")
    return torch.as_tensor(array, dtype=torch.float32)


def _log_likelihood_targets(targets: np.ndarray, num_classes: int) -> torch.Tensor:
    array = np.asarray(targets)
    if array.ndim == 1:
        if array.dtype.kind not in "iu" or array.min() < 0 or array.max() >= num_classes:
            raise ConfigError(f"integer targets must be class indices in [0, {num_classes})")
        likelihood = F.one_hot(torch.as_tensor(array, dtype=torch.int64), num_classes).float()
    elif array.ndim == 2 and array.shape[1] == num_classes:
        if not np.all(np.isfinite(array)) or array.min() < 0 or not np.all(array.max(axis=1) > 0):
            raise ConfigError("likelihood targets must be finite, non-negative, with a positive entry per row")
        likelihood = torch.as_tensor(array, dtype=torch.float32)
    else:
        raise ConfigError(
            f"targets must be labels of shape (n,) or likelihoods of shape (n, {num_classes}), got {array.shape}"
        )
    return likelihood.log()
