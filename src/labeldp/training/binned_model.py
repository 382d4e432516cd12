"""The logistic model over public feature bins as a torch module, so that a run's model of ``--method
marginals`` is saved, evaluated, audited and used by ``labeldp predict`` as every other run's is.

:class:`BinnedLogistic` maps a run's encoded inputs to the bins of the *raw* features: a table's numeric
column is cut at the quantiles of its standardised value (bin 0 where its missing-value indicator says
the value was missing), a categorical column takes the bin of its one-hot category (bin 0 for a
category unseen in training), as :meth:`labeldp.data.table.TablePreprocessor.column_groups` describes
the encoding; inputs of another dataset are flattened, each value a numeric feature. One feature per
raw column, not per one-hot column, matters for privacy: every feature is one more set of counts in the
release, and the noise on each count grows with the number of features. Its logits are
b + sum_j coef[bin_j(x)], the coefficients fitted from noisy label marginals
(:func:`labeldp.training.marginals.fit_from_marginals`).

Privacy: the bins come from the public inputs alone (:func:`binned_logistic`); the coefficients are
post-processing of a release. The module holds nothing else, and its state dict all of it: a run's
``model.pt`` rebuilds it (:meth:`BinnedLogistic.from_state_dict`), with no dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from labeldp.training.marginals import quantile_edges

if TYPE_CHECKING:
    from labeldp.data.table import ColumnGroup

#: the buffers that describe the bins (with ``coef`` and ``intercept``, the whole state dict)
BIN_BUFFERS = ("value_columns", "missing_columns", "missing_above", "edges", "category_columns", "category_mask")


class BinnedLogistic(nn.Module):
    """Logits of a multinomial logistic model over the bins of public features, from encoded inputs.

    Numeric features first, then categorical ones; each feature's bin 0 holds what is missing or unseen.

    Parameters
    ----------
    value_columns : torch.Tensor
        (numeric features,) int64: the input column of each numeric feature.
    missing_columns : torch.Tensor
        (numeric features,) int64: the column of its missing-value indicator, -1 for none.
    missing_above : torch.Tensor
        (numeric features,) float32: the value is missing where the indicator is above this.
    edges : torch.Tensor
        (numeric features, E) float32: the cut points, sorted, padded with +inf (E >= 1).
    category_columns : torch.Tensor
        (categorical features, C) int64: the one-hot columns of each categorical feature, padded.
    category_mask : torch.Tensor
        (categorical features, C) bool: which of them are the feature's (C >= 1).
    num_classes : int
        The number of classes.
    """

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
        """The model a state dict was saved from (a run's ``model.pt``): its shape is in its buffers.

        Parameters
        ----------
        state : dict
            :meth:`state_dict`'s output.

        Returns
        -------
        BinnedLogistic
            The model, on the CPU, with the state loaded.
        """
        model = cls(*(state[name].cpu() for name in BIN_BUFFERS), num_classes=state["intercept"].numel())
        model.load_state_dict(state)
        return model

    def bins(self, x: torch.Tensor) -> torch.Tensor:
        """(B, features) int64: every feature's bin for each row of the encoded inputs ``x``.

        Parameters
        ----------
        x : torch.Tensor
            (B, ...) encoded inputs, flattened to (B, input columns).

        Returns
        -------
        torch.Tensor
            (B, features) int64 bins, numeric features first; bin 0 of a feature holds what is missing
            or unseen.
        """
        x = x.flatten(1)
        values = x[:, self.value_columns].to(self.edges.dtype)
        numeric = 1 + torch.searchsorted(self.edges, values.T.contiguous(), right=True).T
        indicators = x[:, self.missing_columns.clamp(min=0)]
        numeric = torch.where((self.missing_columns >= 0) & (indicators > self.missing_above), 0, numeric)
        one_hot = x[:, self.category_columns] * self.category_mask
        categorical = torch.where(one_hot.amax(2) > 0.5, one_hot.argmax(2) + 1, 0)
        return torch.cat([numeric, categorical], 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, classes) logits of the encoded inputs ``x``.

        Parameters
        ----------
        x : torch.Tensor
            (B, ...) encoded inputs, flattened to (B, input columns).

        Returns
        -------
        torch.Tensor
            (B, classes) logits: the intercept plus each feature's coefficient of the row's bin.
        """
        return self.coef[self.bins(x) + self.offsets].sum(1) + self.intercept

    def set_coefficients(self, coef: np.ndarray, intercept: np.ndarray) -> None:
        """Take the fitted ``coef`` (bins, classes) and ``intercept`` (classes,).

        Parameters
        ----------
        coef : numpy.ndarray
            (sum of the bins of every feature, classes) coefficients, feature by feature in bin order.
        intercept : numpy.ndarray
            (classes,) intercepts.
        """
        with torch.no_grad():
            self.coef.copy_(torch.as_tensor(coef, dtype=self.coef.dtype))
            self.intercept.copy_(torch.as_tensor(intercept, dtype=self.intercept.dtype))


def binned_logistic(
    inputs: np.ndarray, groups: Sequence[ColumnGroup] | None, n_bins: int, num_classes: int
) -> BinnedLogistic:
    """The bins of public inputs, as a :class:`BinnedLogistic` whose coefficients are still zero.

    Parameters
    ----------
    inputs : numpy.ndarray
        (n, ...) the public training inputs, encoded as the model will see them; never labels.
    groups : sequence of ColumnGroup or None
        A table's features (:meth:`labeldp.data.table.TablePreprocessor.column_groups`), or None: every
        input value a numeric feature.
    n_bins : int
        The most quantile bins of a numeric feature (:func:`labeldp.training.marginals.quantile_edges`),
        besides bin 0.
    num_classes : int
        The number of classes.

    Returns
    -------
    BinnedLogistic
        The model, on the CPU.
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
