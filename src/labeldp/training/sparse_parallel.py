"""One step of a hashed model's data-parallel training under ``torchrun``: the ranks' sparse gradients
summed, so that every rank takes the step one process would take on the union of their batches.

Each rank back-propagates the *summed* loss of its own batch (rows of its own row groups). Then
:func:`share_gradients` exchanges, in one small all-gather, each rank's number of rows, its summed
loss and each sparse gradient's number of entries; the sparse gradients' (index, value) entries are
all-gathered (padded to the longest), the dense ones (the bias) all-reduced, and each gradient is set
to the sum over ranks divided by the rows of all ranks: the mean gradient over the union of the
batches, the same on every rank, entry for entry (every rank adds the same parts in the same order),
so the optimisers' steps, and the models, stay identical across ranks. The sparse entries are never
made dense: a step sends about ``batch_rows x num_slots`` entries a parameter, whatever the number of
buckets.
"""

from __future__ import annotations

import torch
from torch import nn

from labeldp import distributed


def sparse_parameters(model: nn.Module) -> set[int]:
    """The ids of ``model``'s parameters whose gradients are sparse (embeddings built with ``sparse=True``).

    Parameters
    ----------
    model : torch.nn.Module
        The model.

    Returns
    -------
    set of int
        ``id(parameter)`` of each.
    """
    return {
        id(module.weight)
        for module in model.modules()
        if isinstance(module, (nn.Embedding, nn.EmbeddingBag)) and module.sparse
    }


def share_gradients(model: nn.Module, rows: int, loss: float) -> tuple[int, float]:
    """Replace every gradient by the sum over ranks, divided by the rows of all ranks.

    Every rank must call it at every step, one whose batch is empty too (its gradients None): the
    ranks' batches differ in size, and an epoch ends when no rank has a row left.

    Parameters
    ----------
    model : torch.nn.Module
        The model, its gradients those of this rank's summed loss.
    rows : int
        This rank's rows in the step (0: none).
    loss : float
        This rank's summed loss.

    Returns
    -------
    rows : int
        The rows of every rank (0: the epoch is over, no gradient was set).
    loss : float
        The summed loss of every rank.
    """
    parameters = list(model.parameters())
    sparse = sparse_parameters(model)
    entries = [p.grad._nnz() if p.grad is not None else 0 for p in parameters if id(p) in sparse]
    header = torch.tensor([rows, *entries], dtype=torch.int64)
    table = torch.stack(distributed.gather_tensors(header))  # (ranks, 1 + sparse parameters)
    total = int(table[:, 0].sum())
    if total == 0:
        return 0, 0.0
    dense = [p for p in parameters if id(p) not in sparse]
    flat = torch.cat([torch.tensor([loss], dtype=torch.float64)] + [_dense_grad(p).double().reshape(-1) for p in dense])
    flat = distributed.all_reduce_sum(flat)
    offset = 1
    for p in dense:
        p.grad = (flat[offset : offset + p.numel()].reshape(p.shape) / total).to(p.dtype)
        offset += p.numel()
    for column, p in enumerate((p for p in parameters if id(p) in sparse), start=1):
        p.grad = _summed_sparse(p, table[:, column], total)
    return total, float(flat[0])


def _dense_grad(parameter: torch.Tensor) -> torch.Tensor:
    return parameter.grad if parameter.grad is not None else torch.zeros_like(parameter)


def _summed_sparse(parameter: torch.Tensor, counts: torch.Tensor, total: int) -> torch.Tensor:
    """Every rank's entries of ``parameter``'s sparse gradient, in rank order, over ``total`` rows."""
    longest = int(counts.max())
    shape = parameter.shape[1:]
    indices = torch.zeros(longest, dtype=torch.int64)
    values = torch.zeros((longest, *shape), dtype=parameter.dtype)
    if parameter.grad is not None and parameter.grad._nnz():
        mine = parameter.grad._nnz()
        indices[:mine] = parameter.grad._indices()[0]
        values[:mine] = parameter.grad._values()
    found_indices = distributed.gather_tensors(indices)
    found_values = distributed.gather_tensors(values)
    keep = [slice(0, int(count)) for count in counts]
    joined = torch.cat([part[k] for part, k in zip(found_indices, keep)]).unsqueeze(0)
    summed = torch.cat([part[k] for part, k in zip(found_values, keep)]) / total
    return torch.sparse_coo_tensor(joined, summed, parameter.shape, check_invariants=False)


__all__ = ["share_gradients", "sparse_parameters"]
