"""An embedding model for recommendation tables (user, item and other integer-coded columns)."""

from __future__ import annotations

import math

import torch
from torch import nn


def embedding_width(size: int, cap: int) -> int:
    """Width of a column's embedding: 1.6 size^0.56 (fast.ai's rule of thumb), in [2, cap]."""
    return max(2, min(cap, round(1.6 * size**0.56)))


class RecommenderMLP(nn.Module):
    """Embeddings of the leading categorical columns and an MLP over them and the numeric columns.

    A row is ``len(categorical)`` integer codes (column i in [0, categorical[i])), then ``num_numeric``
    side features. With two or more categorical columns the first two (user and item) share the width
    ``dim`` and their elementwise product, a matrix factorisation's term, joins the MLP's input.
    ``num_outputs`` logits (for a regression: one per point of the label grid).

    Parameters
    ----------
    categorical : tuple of int
        Number of values of each leading categorical column (at least one).
    dim : int, optional
        Width of the user and item embeddings, and the cap of the others'.
    dropout : float, optional
        Dropout probability on the embeddings and after each hidden layer.
    """

    def __init__(
        self,
        categorical: tuple[int, ...],
        num_numeric: int,
        num_outputs: int,
        dim: int = 32,
        hidden: tuple[int, ...] = (128, 64),
        dropout: float = 0.2,
    ):
        super().__init__()
        if not categorical:
            raise ValueError("model 'recommender' needs categorical input columns (e.g. user and item ids)")
        self.num_codes = len(categorical)
        widths = [dim if i < 2 else embedding_width(size, dim) for i, size in enumerate(categorical)]
        embeddings = [nn.Embedding(size, width) for size, width in zip(categorical, widths)]
        for embedding in embeddings:
            nn.init.normal_(embedding.weight, std=1.0 / math.sqrt(embedding.embedding_dim))
        self.embeddings = nn.ModuleList(embeddings)
        self.interaction = len(categorical) >= 2
        width = sum(widths) + (dim if self.interaction else 0) + num_numeric
        layers: list[nn.Module] = []
        for size in hidden:
            layers += [nn.Linear(width, size), nn.ReLU(inplace=True), nn.Dropout(dropout)]
            width = size
        layers.append(nn.Linear(width, num_outputs))
        self.head = nn.Sequential(*layers)
        self.embedding_dropout = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        codes = x[:, : self.num_codes].long()
        vectors = [embedding(codes[:, i]) for i, embedding in enumerate(self.embeddings)]
        parts = vectors + ([vectors[0] * vectors[1]] if self.interaction else [])
        features = torch.cat([self.embedding_dropout(torch.cat(parts, dim=1)), x[:, self.num_codes :]], dim=1)
        return self.head(features)
