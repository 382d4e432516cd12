"""Models of hashed sparse features: logistic regression and a factorization machine.

A row is a fixed-length bag of F bucket indices (:mod:`labeldp.data.hashing`), a (batch, F) int64
tensor; both models keep one weight per bucket in an :class:`torch.nn.EmbeddingBag` with sparse
gradients, so a step touches only the buckets of its batch (train them with
:class:`torch.optim.Adagrad`, :class:`torch.optim.SparseAdam` or :class:`torch.optim.SGD`). Each
returns one logit per row, the log-odds of the positive class.

- :class:`HashedLogistic`: z = b + sum_f w[i_f].
- :class:`HashedFM` (Rendle 2010): z = b + sum_f w[i_f] + sum_{f < g} <v[i_f], v[i_g]>, the pairwise
  term computed in O(F d) as (|sum_f v[i_f]|^2 - sum_f |v[i_f]|^2) / 2.

:meth:`linear_weights` and :meth:`factor_weights` give the weights of a batch's buckets (sparse
gradients too), for a penalty or a loss that reads them (the fit from noisy counts).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class HashedLogistic(nn.Module):
    """Logistic regression over hashed buckets: z = b + sum_f w[i_f], w initialised at zero.

    Parameters
    ----------
    num_buckets : int
        The size of the index space.
    """

    def __init__(self, num_buckets: int):
        super().__init__()
        self.linear = nn.EmbeddingBag(num_buckets, 1, mode="sum", sparse=True)
        nn.init.zeros_(self.linear.weight)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, buckets: torch.Tensor, per_sample_weights: torch.Tensor | None = None) -> torch.Tensor:
        """(batch,) logits of (batch, F) buckets (each bucket's weight scaled by ``per_sample_weights``).

        Parameters
        ----------
        buckets : torch.Tensor
            (batch, F) int64 bucket indices in [0, num_buckets).
        per_sample_weights : torch.Tensor or None, optional
            (batch, F) floating-point factors of each bucket's weight (default None: 1).

        Returns
        -------
        torch.Tensor
            (batch,) logits, the log-odds of the positive class.
        """
        return self.linear(buckets, per_sample_weights=per_sample_weights).squeeze(1) + self.bias

    def linear_weights(self, buckets: torch.Tensor) -> torch.Tensor:
        """(batch, F) the weights of the buckets (sparse gradients).

        Parameters
        ----------
        buckets : torch.Tensor
            (batch, F) int64 bucket indices in [0, num_buckets).

        Returns
        -------
        torch.Tensor
            (batch, F) each bucket's linear weight w[i_f].
        """
        return F.embedding(buckets, self.linear.weight, sparse=True).squeeze(-1)

    def factor_weights(self, buckets: torch.Tensor) -> torch.Tensor | None:
        """None: no factors.

        Parameters
        ----------
        buckets : torch.Tensor
            (batch, F) int64 bucket indices (unused).

        Returns
        -------
        None
            The logistic model has no factors.
        """
        return None


class HashedFM(HashedLogistic):
    """A factorization machine over hashed buckets: the logistic model plus <v[i_f], v[i_g]> for every
    pair of a row's slots; factors initialised N(0, ``init_std``^2).

    Parameters
    ----------
    num_buckets : int
        The size of the index space.
    dim : int, optional
        d, the factors' dimension (default 8).
    init_std : float, optional
        The factors' initial standard deviation (default 0.01).
    """

    def __init__(self, num_buckets: int, dim: int = 8, init_std: float = 0.01):
        super().__init__(num_buckets)
        self.factors = nn.Embedding(num_buckets, dim, sparse=True)
        nn.init.normal_(self.factors.weight, std=init_std)

    def forward(self, buckets: torch.Tensor, per_sample_weights: torch.Tensor | None = None) -> torch.Tensor:
        """(batch,) logits of (batch, F) buckets.

        Parameters
        ----------
        buckets : torch.Tensor
            (batch, F) int64 bucket indices in [0, num_buckets).
        per_sample_weights : torch.Tensor or None, optional
            (batch, F) floating-point factors of each bucket's linear weight (default None: 1); the
            pairwise term is not scaled.

        Returns
        -------
        torch.Tensor
            (batch,) logits, the log-odds of the positive class: the logistic model's plus the pairwise term.
        """
        factors = self.factors(buckets)  # (batch, F, d)
        pairwise = 0.5 * (factors.sum(dim=1).pow(2) - factors.pow(2).sum(dim=1)).sum(dim=1)
        return super().forward(buckets, per_sample_weights) + pairwise

    def factor_weights(self, buckets: torch.Tensor) -> torch.Tensor:
        """(batch, F, d) the factors of the buckets (sparse gradients).

        Parameters
        ----------
        buckets : torch.Tensor
            (batch, F) int64 bucket indices in [0, num_buckets).

        Returns
        -------
        torch.Tensor
            (batch, F, d) each bucket's factors v[i_f].
        """
        return self.factors(buckets)


__all__ = ["HashedFM", "HashedLogistic"]
