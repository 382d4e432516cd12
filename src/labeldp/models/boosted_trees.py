"""Gradient-boosted trees as a torch module, so a run's fitted trees are saved, evaluated and used by
``labeldp predict`` as every other run's network is.

:class:`BoostedTrees` holds a fitted scikit-learn ``HistGradientBoostingClassifier``'s trees in its tensors
(each node's feature, threshold, children, missing-value direction and leaf value) and evaluates every tree
at once. Its shape is what the fit made: an empty one loads any saved state, so a run's ``model.pt``
rebuilds it by name without a dataset. The fit is :mod:`labeldp.training.fit_trees`'.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

#: the tensors that hold the trees, each resized to the saved one's shape on loading
TREE_TENSORS = (
    "feature",
    "threshold",
    "left",
    "right",
    "missing_left",
    "is_leaf",
    "leaf_value",
    "roots",
    "baseline",
    "class_index",
    "channel",
    "depth",
)


class BoostedTrees(nn.Module):
    """Log-probabilities of ``num_classes`` classes from the trees of a fitted histogram gradient boosting,
    optionally through the inverse of a randomized-response channel.

    Untrained it predicts every class alike; :meth:`set_trees` takes a fitted classifier's trees. The leaf
    values are a parameter that takes no gradient (the trees are fitted, not trained by SGD); the rest are
    buffers.
    """

    feature: torch.Tensor
    threshold: torch.Tensor
    left: torch.Tensor
    right: torch.Tensor
    missing_left: torch.Tensor
    is_leaf: torch.Tensor
    roots: torch.Tensor
    baseline: torch.Tensor
    class_index: torch.Tensor
    channel: torch.Tensor
    depth: torch.Tensor

    def __init__(self, num_classes: int):
        super().__init__()
        self.num_classes = num_classes
        empty = torch.zeros(0, dtype=torch.int64)
        for name in ("feature", "left", "right", "roots"):
            self.register_buffer(name, empty.clone())
        self.register_buffer("threshold", torch.zeros(0, dtype=torch.float64))
        self.register_buffer("missing_left", torch.zeros(0, dtype=torch.bool))
        self.register_buffer("is_leaf", torch.zeros(0, dtype=torch.bool))
        self.leaf_value = nn.Parameter(torch.zeros(0, dtype=torch.float64), requires_grad=False)
        # no trees: raw scores 0 over every class (uniform predictions)
        self.register_buffer("baseline", torch.zeros(num_classes, dtype=torch.float64))
        self.register_buffer("class_index", torch.arange(num_classes))
        self.register_buffer("channel", torch.zeros(0, dtype=torch.float64))  # (keep, other), or empty: none
        self.register_buffer("depth", torch.zeros((), dtype=torch.int64))

    @property
    def fitted(self) -> bool:
        """Whether it holds trees."""
        return self.roots.numel() > 0

    def set_trees(self, estimator, channel: tuple[float, float] | None = None) -> None:
        """Take the trees of a fitted ``HistGradientBoostingClassifier`` whose classes are positions among the
        ``num_classes`` (integers), and the randomized response ``channel`` (keep, other) its predictions are
        corrected for (None: none)."""
        if getattr(estimator, "is_categorical_", None) is not None and np.any(estimator.is_categorical_):
            raise ValueError("BoostedTrees takes numeric splits only: fit without categorical_features")
        nodes, roots, offset = [], [], 0
        for iteration in estimator._predictors:  # (iterations, trees per iteration): sklearn's own order
            for predictor in iteration:
                tree = predictor.nodes
                roots.append(offset)
                nodes.append((tree, offset))
                offset += len(tree)
        every = np.concatenate([tree for tree, _ in nodes])
        shift = np.concatenate([np.full(len(tree), start, dtype=np.int64) for tree, start in nodes])
        is_leaf = every["is_leaf"].astype(bool)
        values = {
            "feature": torch.from_numpy(every["feature_idx"].astype(np.int64)),
            "threshold": torch.from_numpy(every["num_threshold"].astype(np.float64)),
            # a leaf points to itself, so every tree can take the same number of steps
            "left": torch.from_numpy(np.where(is_leaf, np.arange(offset), every["left"].astype(np.int64) + shift)),
            "right": torch.from_numpy(np.where(is_leaf, np.arange(offset), every["right"].astype(np.int64) + shift)),
            "missing_left": torch.from_numpy(every["missing_go_to_left"].astype(bool)),
            "is_leaf": torch.from_numpy(is_leaf),
            "leaf_value": torch.from_numpy(np.where(is_leaf, every["value"], 0.0).astype(np.float64)),
            "roots": torch.tensor(roots, dtype=torch.int64),
            "baseline": torch.from_numpy(np.asarray(estimator._baseline_prediction, dtype=np.float64).ravel()),
            "class_index": torch.from_numpy(np.asarray(estimator.classes_).astype(np.int64)),
            "channel": torch.tensor([] if channel is None else list(channel), dtype=torch.float64),
            "depth": torch.tensor(int(every["depth"].max()), dtype=torch.int64),
        }
        self._assign(values)

    def _assign(self, values: dict[str, torch.Tensor]) -> None:
        device = self.roots.device
        for name, value in values.items():
            value = value.to(device)
            if name == "leaf_value":
                self.leaf_value = nn.Parameter(value, requires_grad=False)
            else:
                setattr(self, name, value)

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # the trees' shape is the saved one's: take each tensor's shape before loading its values
        self._assign(
            {
                name: torch.empty_like(state_dict[prefix + name], dtype=getattr(self, name).dtype)
                for name in TREE_TENSORS
                if prefix + name in state_dict
            }
        )
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def raw(self, x: torch.Tensor) -> torch.Tensor:
        """(B, trees per iteration) float64 raw scores, the baseline plus each iteration's leaves in order: the
        sums scikit-learn's ``_raw_predict`` makes, bit for bit."""
        x = x.flatten(1).to(torch.float64)
        node = self.roots.expand(len(x), -1)
        for _ in range(int(self.depth)):  # a leaf's children are itself: the deepest leaf is reached in depth steps
            value = x.gather(1, self.feature[node])
            go_left = torch.where(torch.isnan(value), self.missing_left[node], value <= self.threshold[node])
            node = torch.where(go_left, self.left[node], self.right[node])
        leaves = self.leaf_value[node]
        per_iteration = self.baseline.numel()
        raw = self.baseline.expand(len(x), -1).clone()
        for start in range(0, leaves.shape[1], per_iteration):  # in sklearn's order, for the same float sums
            raw += leaves[:, start : start + per_iteration]
        return raw

    def probabilities(self, x: torch.Tensor) -> torch.Tensor:
        """(B, num_classes) float64: the classifier's ``predict_proba`` placed at its classes, through the
        inverse of ``channel`` where there is one (Pr[released k | x] = keep p_k + other (1 - p_k), solved
        for p_k, clipped at 0 and normalised)."""
        raw = self.raw(x)
        if not self.fitted:
            return torch.softmax(raw, dim=1)
        if raw.shape[1] == 1:  # binary: the log-odds of the second class
            positive = torch.sigmoid(raw[:, 0])
            fitted = torch.stack([1 - positive, positive], dim=1)
        else:
            fitted = torch.softmax(raw, dim=1)
        probabilities = torch.zeros(len(x), self.num_classes, dtype=torch.float64, device=raw.device)
        probabilities[:, self.class_index] = fitted
        if self.channel.numel():
            keep, other = self.channel[0], self.channel[1]
            probabilities = ((probabilities - other) / (keep - other)).clamp(min=0.0)
            probabilities = probabilities / probabilities.sum(dim=1, keepdim=True).clamp(min=1e-12)
        return probabilities

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # log-probabilities as logits; a class of probability 0 at a finite floor (e^-50), so no loss is infinite
        return torch.log(self.probabilities(x).clamp(min=np.exp(-50.0)))


__all__ = ["TREE_TENSORS", "BoostedTrees"]
