"""Models of hashed sparse features: logistic regression and a factorization machine.

A row is a (F,) int64 bag of bucket indices (:mod:`labeldp.data.hashing`). One weight per bucket lives
in an :class:`torch.nn.EmbeddingBag` with sparse gradients, so a step touches only its batch's buckets
(train with :class:`torch.optim.Adagrad`, :class:`torch.optim.SparseAdam` or :class:`torch.optim.SGD`).
Each returns one logit per row, the log-odds of the positive class.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class HashedLogistic(nn.Module):
    """Logistic regression over hashed buckets: z = b + sum_f w[i_f], w initialised at zero."""

    def __init__(self, num_buckets: int):
        super().__init__()
        self.linear = nn.EmbeddingBag(num_buckets, 1, mode="sum", sparse=True)
        nn.init.zeros_(self.linear.weight)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, buckets: torch.Tensor, per_sample_weights: torch.Tensor | None = None) -> torch.Tensor:
        """(batch,) logits of (batch, F) buckets, each bucket's weight scaled by ``per_sample_weights``."""
        return self.linear(buckets, per_sample_weights=per_sample_weights).squeeze(1) + self.bias

    def linear_weights(self, buckets: torch.Tensor) -> torch.Tensor:
        """(batch, F) the weights of the buckets, with sparse gradients, for a penalty or a loss that reads them."""
        return F.embedding(buckets, self.linear.weight, sparse=True).squeeze(-1)

    def factor_weights(self, buckets: torch.Tensor) -> torch.Tensor | None:
        """None: no factors."""
        return None


class HashedFM(HashedLogistic):
    """A factorization machine (Rendle 2010): the logistic model plus <v[i_f], v[i_g]> for every pair of slots.

    Factors of dimension ``dim``, initialised N(0, ``init_std``^2). The pairwise term is computed in O(F d)
    as (|sum_f v[i_f]|^2 - sum_f |v[i_f]|^2) / 2.
    """

    def __init__(self, num_buckets: int, dim: int = 8, init_std: float = 0.01):
        super().__init__(num_buckets)
        self.factors = nn.Embedding(num_buckets, dim, sparse=True)
        nn.init.normal_(self.factors.weight, std=init_std)

    def forward(self, buckets: torch.Tensor, per_sample_weights: torch.Tensor | None = None) -> torch.Tensor:
        """(batch,) logits; ``per_sample_weights`` scales the linear weights only, not the pairwise term."""
        factors = self.factors(buckets)  # (batch, F, d)
        pairwise = 0.5 * (factors.sum(dim=1).pow(2) - factors.pow(2).sum(dim=1)).sum(dim=1)
        return super().forward(buckets, per_sample_weights) + pairwise

    def factor_weights(self, buckets: torch.Tensor) -> torch.Tensor:
        """(batch, F, d) the factors of the buckets, with sparse gradients."""
        return self.factors(buckets)


__all__ = ["HashedFM", "HashedLogistic"]
