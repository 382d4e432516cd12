"""One data-parallel step of a hashed model under ``torchrun``: the ranks' sparse gradients summed.

Each rank back-propagates its own batch's *summed* loss; :func:`share_gradients` then sets each
gradient to the sum over ranks divided by all their rows, the same on every rank entry for entry (all
add the same parts in the same order), so the models stay identical. Sparse entries are sent as (index,
values) in float64, never made dense: a step sends about ``batch_rows x num_slots`` entries a parameter.
"""

from __future__ import annotations

import torch
from torch import nn

from labeldp import distributed


def sparse_parameters(model: nn.Module) -> set[int]:
    """The ids of ``model``'s parameters whose gradients are sparse (embeddings built with ``sparse=True``)."""
    return {
        id(module.weight)
        for module in model.modules()
        if isinstance(module, (nn.Embedding, nn.EmbeddingBag)) and module.sparse
    }


def share_gradients(model: nn.Module, rows: int, loss: float) -> tuple[int, float]:
    """Replace every gradient by the sum over ranks, divided by the rows of all ranks; all ranks' rows and summed loss.

    Every rank calls it at every step, even with an empty batch (its gradients None): batches differ in
    size, and the epoch ends when no rank has a row left (the rows returned are then 0). Two collectives:
    rows, losses, entry counts and dense gradients, then the sparse entries.
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
    """``parameter``'s sparse gradient as ``size`` zero-padded rows (index, values...) in float64, flattened.

    An index below 2^53 is exact in float64, as a float32 value is.
    """
    width = parameter[0].numel()
    rows = torch.zeros((size, 1 + width), dtype=torch.float64)
    if parameter.grad is not None and parameter.grad._nnz():
        count = parameter.grad._nnz()
        rows[:count, 0] = parameter.grad._indices()[0].double()
        rows[:count, 1:] = parameter.grad._values().reshape(count, width).double()
    return rows.reshape(-1)


__all__ = ["share_gradients", "sparse_parameters"]
