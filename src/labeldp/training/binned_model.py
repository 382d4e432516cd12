"""The logistic model over public feature bins as a torch module, so a ``marginals`` run's model is
saved, evaluated, audited and used by ``labeldp predict`` as every other run's is.

:class:`BinnedLogistic` maps a run's encoded inputs to the bins of the *raw* features
(:meth:`labeldp.data.table.TablePreprocessor.column_groups`). One feature per raw column, not per
one-hot column, matters for privacy: each feature is one more set of counts in the release, and the
noise on every count grows with their number. The bins come from public inputs alone, the
coefficients are post-processing of a release, and the state dict holds everything: a run's
``model.pt`` rebuilds it without a dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from labeldp.training.from_marginals import quantile_edges

if TYPE_CHECKING:
    from labeldp.data.table import ColumnGroup

#: the buffers that describe the bins (with ``coef`` and ``intercept``, the whole state dict)
BIN_BUFFERS = ("value_columns", "missing_columns", "missing_above", "edges", "category_columns", "category_mask")


class BinnedLogistic(nn.Module):
    """Logits b + sum_j coef[bin_j(x)] of a multinomial logistic model over public feature bins, from encoded inputs.

    Numeric features first, then categorical ones; each feature's bin 0 holds what is missing or unseen
    (a numeric value whose missing-value indicator is above ``missing_above``, an unseen category).
    Build it with :func:`binned_logistic`.

    Parameters
    ----------
    missing_columns : torch.Tensor
        (numeric features,) int64: the column of each one's missing-value indicator, -1 for none.
    edges : torch.Tensor
        (numeric features, E) float32 cut points, sorted, padded with +inf (E >= 1).
    category_columns, category_mask : torch.Tensor
        (categorical features, C): each one's one-hot columns, padded, and which of them are its (C >= 1).
    """

    # the buffers (registered in __init__)
    value_columns: torch.Tensor
    missing_columns: torch.Tensor
    missing_above: torch.Tensor
    edges: torch.Tensor
    category_columns: torch.Tensor
    category_mask: torch.Tensor
    offsets: torch.Tensor

    def __init__(
        self,
        value_columns: torch.Tensor,
        missing_columns: torch.Tensor,
        missing_above: torch.Tensor,
        edges: torch.Tensor,
        category_columns: torch.Tensor,
        category_mask: torch.Tensor,
        num_classes: int,
    ):
        super().__init__()
        for name, value in zip(
            BIN_BUFFERS, (value_columns, missing_columns, missing_above, edges, category_columns, category_mask)
        ):
            self.register_buffer(name, value)
        sizes = torch.cat([torch.isfinite(edges).sum(1) + 2, category_mask.sum(1) + 1]).long()
        self.register_buffer("offsets", torch.cumsum(sizes, 0) - sizes, persistent=False)
        self.bins_per_feature = sizes.numpy()
        self.coef = nn.Parameter(torch.zeros(int(sizes.sum()), num_classes))
        self.intercept = nn.Parameter(torch.zeros(num_classes))

    @classmethod
    def from_state_dict(cls, state: dict[str, torch.Tensor]) -> BinnedLogistic:
        """The model a state dict was saved from (a run's ``model.pt``), on the CPU: its shape is in its buffers."""
        model = cls(**{name: state[name].cpu() for name in BIN_BUFFERS}, num_classes=state["intercept"].numel())
        model.load_state_dict(state)
        return model

    def bins(self, x: torch.Tensor) -> torch.Tensor:
        """(B, features) int64: every feature's bin for each row of the encoded inputs ``x`` (flattened)."""
        x = x.flatten(1)
        values = x[:, self.value_columns].to(self.edges.dtype)
        numeric = 1 + torch.searchsorted(self.edges, values.T.contiguous(), right=True).T
        indicators = x[:, self.missing_columns.clamp(min=0)]
        numeric = torch.where((self.missing_columns >= 0) & (indicators > self.missing_above), 0, numeric)
        one_hot = x[:, self.category_columns] * self.category_mask
        categorical = torch.where(one_hot.amax(2) > 0.5, one_hot.argmax(2) + 1, 0)
        return torch.cat([numeric, categorical], 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.coef[self.bins(x) + self.offsets].sum(1) + self.intercept

    def set_coefficients(self, coef: np.ndarray, intercept: np.ndarray) -> None:
        """Take the fitted ``coef`` (bins, classes), feature by feature in bin order, and ``intercept`` (classes,)."""
        with torch.no_grad():
            self.coef.copy_(torch.as_tensor(coef, dtype=self.coef.dtype))
            self.intercept.copy_(torch.as_tensor(intercept, dtype=self.intercept.dtype))


def binned_logistic(
    inputs: np.ndarray, groups: Sequence[ColumnGroup] | None, n_bins: int, num_classes: int
) -> BinnedLogistic:
    """The bins of the public ``inputs`` (never labels), as a :class:`BinnedLogistic` with zero coefficients.

    ``groups`` are a table's features (:meth:`labeldp.data.table.TablePreprocessor.column_groups`), or
    None: every input value a numeric feature; ``n_bins`` the most quantile bins of a numeric one, besides bin 0.
    """
    x = np.asarray(inputs, dtype=np.float32).reshape(len(inputs), -1)
    if groups is None:
        numeric, categorical = [(j, -1, 0.0) for j in range(x.shape[1])], []
    else:
        numeric = [(g.columns[0], (g.columns + (-1,))[1], g.missing_above or 0.0) for g in groups if g.numeric]
        categorical = [g.columns for g in groups if not g.numeric]
    cuts = []
    for value, missing, above in numeric:
        values = np.where(x[:, missing] > above, np.nan, x[:, value]) if missing >= 0 else x[:, value]
        cuts.append(np.unique(quantile_edges(values, n_bins).astype(np.float32)))
    edges = np.full((len(numeric), max([1, *map(len, cuts)])), np.inf, dtype=np.float32)
    for row, cut in enumerate(cuts):
        edges[row, : len(cut)] = cut
    width = max([1, *map(len, categorical)])
    columns = np.zeros((len(categorical), width), dtype=np.int64)
    mask = np.zeros((len(categorical), width), dtype=bool)
    for row, group in enumerate(categorical):
        columns[row, : len(group)], mask[row, : len(group)] = group, True
    return BinnedLogistic(
        torch.tensor([v for v, _, _ in numeric], dtype=torch.int64),
        torch.tensor([m for _, m, _ in numeric], dtype=torch.int64),
        torch.tensor([a for _, _, a in numeric], dtype=torch.float32),
        torch.from_numpy(edges),
        torch.from_numpy(columns),
        torch.from_numpy(mask),
        num_classes,
    )


__all__ = ["BIN_BUFFERS", "BinnedLogistic", "binned_logistic"]
