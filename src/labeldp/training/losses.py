"""The per-example losses a stage trains with, the preparation of its targets, and the score of a model
on held-out targets.

The targets are released labels (or their noise channels, or a regression's released values): what
these losses read is on the public side of the privacy boundary.
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
    """Per-example -log sum_y softmax(logits)_y * L[y]: the negative log-likelihood of an observed
    (possibly noisy) label whose noise channel is L[y] = Pr[observed label | true class y].

    With one-hot L this is ordinary cross-entropy; with a mechanism's channel it is forward-corrected
    cross-entropy (Patrini et al. 2017), whose minimiser is the *clean* class posterior.

    Parameters
    ----------
    logits : torch.Tensor
        (n, K) logits.
    log_likelihood : torch.Tensor
        (n, K) log L[y] of each example's observed label.

    Returns
    -------
    torch.Tensor
        The n losses.
    """
    return -torch.logsumexp(F.log_softmax(logits, dim=1) + log_likelihood, dim=1)


def posterior_loss(logits: torch.Tensor, log_evidence: torch.Tensor) -> torch.Tensor:
    """Per-example cross-entropy of the model to the posterior of the label, evidence / sum(evidence),
    held fixed: for evidence that includes a prior (a cluster prior times a release's noise channel)
    this is the Bayesian soft label.

    Unlike :func:`likelihood_loss`, whose gradient vanishes where the model is confidently wrong
    (it weighs the evidence by the model's own belief), this pulls every example towards its
    posterior whatever the model says, so a class the model misses early is learned back.

    Parameters
    ----------
    logits : torch.Tensor
        (n, K) logits.
    log_evidence : torch.Tensor
        (n, K) log evidence of each class (up to a constant per row).

    Returns
    -------
    torch.Tensor
        The n losses.
    """
    return -(torch.softmax(log_evidence, dim=1) * F.log_softmax(logits, dim=1)).sum(dim=1)


def binned_likelihood_loss(logits: torch.Tensor, evidence: torch.Tensor) -> torch.Tensor:
    """Per-example loss for releases that tell in which *bin* of the grid a label lies (RR-on-bins).

    ``evidence`` is (n, 3, K): the noise channel L[y] = Pr[release | label y] (constant inside a bin),
    the split of each bin's probability among its grid points in the prior the bins were chosen for
    (``within``, summing to 1 over each bin), and each grid point's bin. The loss is the cross-entropy
    of the model to the soft target r(y) = R(b(y)) within(y), where R(b) = Q(b) L(b) / sum Q L is the
    posterior of bin b under the model's bin probabilities Q (held fixed): on the bins it has the
    gradient of the forward loss -log sum_y q(y) L(y) (EM), and inside a bin it pulls the model to the
    prior's split. The release does not identify that split, and the forward loss alone drifts it
    towards the bin's ends (its logit gradient is proportional to q(y) inside a bin).

    Parameters
    ----------
    logits : torch.Tensor
        (n, K) logits over the grid.
    evidence : torch.Tensor
        (n, 3, K) binned evidence, as above.

    Returns
    -------
    torch.Tensor
        The n losses.
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
    """Per-example squared error of the expected value sum_y softmax(logits)_y v_y against ``values``,
    in units of the grid's range (so that its scale does not depend on the label's units).

    Parameters
    ----------
    logits : torch.Tensor
        (n, K) logits over the grid.
    values : torch.Tensor
        The n target values.
    label_values : torch.Tensor
        The K values of the grid, increasing.

    Returns
    -------
    torch.Tensor
        The n losses.
    """
    scale = label_values[-1] - label_values[0]
    return ((F.softmax(logits, dim=1) @ label_values - values) / scale) ** 2


def prepare_targets(
    targets: np.ndarray, num_classes: int, label_values: np.ndarray | None
) -> tuple[torch.Tensor, PerExampleLoss]:
    """The targets as a tensor and the per-example loss that fits them: labels and likelihoods by
    :func:`likelihood_loss`, a regression's float values by :func:`squared_error_loss`.

    Binned evidence (a 3-d array) is fitted by :func:`binned_likelihood_loss`. It reads only the targets
    it is given, released labels or their noise channels (see the module docstring), and releases nothing.

    Parameters
    ----------
    targets : numpy.ndarray
        (n,) integer class indices; (n, K) likelihoods L[y] of each example's observed label (finite,
        non-negative, a positive entry per row); (n, 3, K) binned evidence; or, with ``label_values``,
        (n,) float values.
    num_classes : int
        K, the number of classes or grid points.
    label_values : numpy.ndarray or None
        A regression's grid of K values, or None for a classification (float targets then need it).

    Returns
    -------
    targets : torch.Tensor
        The targets as ``loss_of`` reads them: float32 values, float32 binned evidence, or (n, K) log
        likelihoods (of a one-hot for class indices).
    loss_of : callable
        The per-example loss, ``loss_of(logits, targets)``.

    Raises
    ------
    labeldp.errors.ConfigError
        If the targets have none of these shapes, or their values are out of range (class indices
        outside [0, K), likelihoods or values not finite, malformed binned evidence).
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
    """The loss that scores a model on held-out targets: the training loss, except for binned evidence,
    scored by the likelihood of the releases (:func:`likelihood_loss` of the channel alone).

    Parameters
    ----------
    loss_of : callable
        The training loss, as :func:`prepare_targets` returns it.

    Returns
    -------
    callable
        The per-example held-out loss, ``loss(logits, targets)`` on the same targets.
    """
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
    """Mean of ``loss_of`` over held-out examples (eval mode, in batches; ``sharded``: each process of
    a data-parallel run scores its share, a collective call).

    Parameters
    ----------
    model : torch.nn.Module
        The model; its training mode is restored afterwards.
    inputs : torch.Tensor
        The held-out inputs.
    targets : torch.Tensor
        Their targets, as prepared for ``loss_of``.
    loss_of : callable
        The per-example loss, ``loss_of(logits, targets)``.
    batch_size : int, optional
        Rows per forward pass.
    sharded : bool, optional
        Share the rows among the processes of a data-parallel run (a collective call).

    Returns
    -------
    float
        The mean loss.
    """
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
