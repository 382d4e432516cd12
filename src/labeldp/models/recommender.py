"""An embedding model for recommendation tables: integer-coded columns (user, item, ...) embedded, the
user-item product as a factorisation term, side features, and an MLP to the outputs."""

from __future__ import annotations

import math

import torch
from torch import nn


def embedding_width(size: int, cap: int) -> int:
    """Width of the embedding of a column with ``size`` values.

    1.6 size^0.56 (the rule of thumb of fast.ai's tabular models), at least 2, at most ``cap``.

    Parameters
    ----------
    size : int
        Number of distinct values of the column.
    cap : int
        The largest width allowed.

    Returns
    -------
    int
        The width.
    """
    return max(2, min(cap, round(1.6 * size**0.56)))


class RecommenderMLP(nn.Module):
    """Embeddings of the leading categorical columns and an MLP over them and the numeric columns.

    The input is a float row: ``len(categorical)`` integer codes (column i in [0, categorical[i])),
    then the numeric side features. With two or more categorical columns the first two (user and
    item) share the width ``dim`` and their elementwise product joins the MLP's input, the term of a
    matrix factorisation. ``num_outputs`` logits (for a regression: one per point of the label grid).

    Parameters
    ----------
    categorical : tuple of int
        Number of values of each leading categorical column (at least one column).
    num_numeric : int
        Number of numeric columns after them.
    num_outputs : int
        Number of logits.
    dim : int, optional
        Width of the user and item embeddings, and the cap of the others' (default 32).
    hidden : tuple of int, optional
        Widths of the MLP's hidden layers (default (128, 64)).
    dropout : float, optional
        Dropout probability on the embeddings and after each hidden layer (default 0.2).

    Attributes
    ----------
    num_codes : int
        Number of categorical columns.
    embeddings : torch.nn.ModuleList
        One ``torch.nn.Embedding`` per categorical column.
    interaction : bool
        Whether the user-item product joins the MLP's input.
    head : torch.nn.Sequential
        The MLP.
    embedding_dropout : torch.nn.Dropout
        Dropout on the concatenated embeddings.

    Raises
    ------
    ValueError
        If ``categorical`` is empty.
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
        self.embeddings = nn.ModuleList(nn.Embedding(size, width) for size, width in zip(categorical, widths))
        for embedding in self.embeddings:
            nn.init.normal_(embedding.weight, std=1.0 / math.sqrt(embedding.embedding_dim))
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
        """Logits of a batch of rows.

        Parameters
        ----------
        x : torch.Tensor
            Float tensor (B, len(categorical) + num_numeric): the integer codes first, then the numeric
            features.

        Returns
        -------
        torch.Tensor
            Logits of shape (B, num_outputs).
        """
        codes = x[:, : self.num_codes].long()
        vectors = [embedding(codes[:, i]) for i, embedding in enumerate(self.embeddings)]
        parts = vectors + ([vectors[0] * vectors[1]] if self.interaction else [])
        features = torch.cat([self.embedding_dropout(torch.cat(parts, dim=1)), x[:, self.num_codes :]], dim=1)
        return self.head(features)
