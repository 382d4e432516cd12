"""One step of a hashed model's data-parallel training under ``torchrun``: the ranks' sparse gradients
summed, so that every rank takes the step one process would take on the union of their batches.

Each rank back-propagates the *summed* loss of its own batch (rows of its own row groups). Then
:func:`share_gradients` exchanges, in one small all-gather, each rank's number of rows, its summed
loss, each sparse gradient's number of entries and the dense gradients (the bias); in a second, the
sparse gradients' (index, values) entries, padded to the longest, in float64 (which holds an index and
a float32 value exactly). Each gradient is set to the sum over ranks divided by the rows of all ranks:
the mean gradient over the union of the batches, the same on every rank, entry for entry (every rank
adds the same parts in the same order), so the optimisers' steps, and the models, stay identical across
ranks. The sparse entries are never made dense: a step sends about ``batch_rows x num_slots`` entries a
parameter, whatever the number of buckets.
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
    ranks' batches differ in size, and an epoch ends when no rank has a row left. Two collectives a
    step: the ranks' rows, losses, entry counts and dense gradients, then their sparse entries.

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
    ids = sparse_parameters(model)
    sparse = [p for p in model.parameters() if id(p) in ids]
    dense = [p for p in model.parameters() if id(p) not in ids]
    counts = [p.grad._nnz() if p.grad is not None else 0 for p in sparse]
    gradients = [(p.grad if p.grad is not None else torch.zeros_like(p)).double().reshape(-1) for p in dense]
    header = torch.cat([torch.tensor([rows, loss, *counts], dtype=torch.float64), *gradients])
    table = torch.stack(distributed.gather_tensors(header))  # (ranks, 2 + sparse + dense elements)
    total = int(table[:, 0].sum())
    if total == 0:
        return 0, 0.0
    summed = table.sum(dim=0)  # the same order on every rank: the same sums
    offset = 2 + len(sparse)
    for p in dense:
        p.grad = (summed[offset : offset + p.numel()].reshape(p.shape) / total).to(p.dtype)
        offset += p.numel()
    entries = table[:, 2 : 2 + len(sparse)].long()  # (ranks, sparse parameters)
    longest = entries.max(dim=0).values.tolist()
    packed = torch.cat([_packed(p, size) for p, size in zip(sparse, longest)] or [torch.zeros(0, dtype=torch.float64)])
    parts = distributed.gather_tensors(packed)
    start = 0
    for column, (p, size) in enumerate(zip(sparse, longest)):
        width = p[0].numel()
        pieces = [part[start : start + size * (1 + width)].reshape(size, 1 + width) for part in parts]
        found = torch.cat([piece[: int(count)] for piece, count in zip(pieces, entries[:, column])])
        indices = found[:, 0].long().unsqueeze(0)
        values = (found[:, 1:] / total).to(p.dtype).reshape(-1, *p.shape[1:])
        p.grad = torch.sparse_coo_tensor(indices, values, p.shape, check_invariants=False)
        start += size * (1 + width)
    return total, float(summed[1])


def _packed(parameter: torch.Tensor, size: int) -> torch.Tensor:
    """``parameter``'s sparse gradient as ``size`` rows (index, values...), float64, zero-padded and flattened
    (an index below 2^53 is exact in float64, as a float32 value is)."""
    width = parameter[0].numel()
    rows = torch.zeros((size, 1 + width), dtype=torch.float64)
    if parameter.grad is not None and parameter.grad._nnz():
        count = parameter.grad._nnz()
        rows[:count, 0] = parameter.grad._indices()[0].double()
        rows[:count, 1:] = parameter.grad._values().reshape(count, width).double()
    return rows.reshape(-1)


__all__ = ["share_gradients", "sparse_parameters"]
