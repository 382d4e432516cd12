"""Fitting :class:`~labeldp.models.boosted_trees.BoostedTrees` on released targets: a run's stage when its network
is ``gbdt``, in place of :func:`~labeldp.training.stage.train_stage`'s epochs.

Post-processing of released labels only: it reads the targets a release made and public inputs. Labels
released by one randomized response are learned as they are and the channel inverted (exact in expectation);
from that estimate, every row (RR-with-prior's per-example channels too) enters once per class, weighted by its
posterior under the model (expectation-maximisation); soft labels enter as such weights.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier
from threadpoolctl import threadpool_limits

from labeldp.errors import ConfigError
from labeldp.models.boosted_trees import BoostedTrees
from labeldp.models.names import FITTED_MODELS

if TYPE_CHECKING:
    from labeldp.config.run_config import RunConfig

#: the trees' settings: small, regularised trees, stopped early on a public tenth of the rows
#: (benchmarks/tabular.py's REGULARISED; docs/results.md)
TREE_SETTINGS: dict[str, Any] = dict(
    learning_rate=0.03,
    max_iter=1000,
    max_leaf_nodes=15,
    min_samples_leaf=80,
    l2_regularization=1.0,
    early_stopping=True,  # scikit-learn's "auto" stops early only past 10,000 rows: a small table's 1,000 trees a class
    validation_fraction=0.1,
)
#: rounds of posterior weighting after the first fit (one raised Adult's test AUC at epsilon 1 by 0.003:
#: docs/results.md)
EM_ROUNDS = 1
#: the smallest prior a class keeps in a posterior (a model's 0 would rule out what a release says)
PRIOR_FLOOR = 1e-6


def check_fitted_network(config: RunConfig, network: str, regression: bool) -> None:
    """Refuse a fitted ``network`` (``gbdt``: :data:`~labeldp.models.names.FITTED_MODELS`) where the run would
    train it by gradient steps (DP-SGD) or fit it to numbers (a regression): it fits classes from released
    targets."""
    if network not in FITTED_MODELS:
        return
    if config.method_spec.training_releases or config.method_spec.per_example:
        raise ConfigError(
            f"model {network!r} is fitted from released labels, not trained by gradient steps: method "
            f"{config.method!r} cannot train it; choose a network (--model mlp)"
        )
    if regression:
        raise ConfigError(f"model {network!r} fits classes; for numeric labels choose a network (--model mlp)")
    unused = config.train.changed()
    if unused:
        raise ConfigError(
            f"model {network!r} is fitted with its own settings, with no training loop: it does not use the training "
            f"options {', '.join(unused)}; leave them at the default"
        )


def rr_rows(likelihood: np.ndarray) -> tuple[tuple[float, float], np.ndarray] | None:
    """The randomized response channel (keep, other) most rows of the (n, K) ``likelihood`` share around their
    released label (their largest entry), and which rows share it; None where no row is such a channel."""
    if likelihood.ndim != 2 or likelihood.shape[1] < 2 or not len(likelihood):
        return None
    top, bottom = likelihood.max(axis=1), likelihood.min(axis=1)
    single = (likelihood == top[:, None]).sum(axis=1) == 1
    others = np.isclose(likelihood, bottom[:, None], rtol=1e-6, atol=0.0).sum(axis=1) == likelihood.shape[1] - 1
    shaped = single & others & (top > bottom)
    if not shaped.any():
        return None
    pairs, counts = np.unique(np.column_stack([top, bottom])[shaped], axis=0, return_counts=True)
    keep, other = (float(value) for value in pairs[counts.argmax()])
    rows = shaped & np.isclose(top, keep, rtol=1e-6, atol=0.0) & np.isclose(bottom, other, rtol=1e-6, atol=0.0)
    return (keep, other), rows


def rr_channel(likelihood: np.ndarray) -> tuple[float, float] | None:
    """(keep, other) where every row of the (n, K) ``likelihood`` is one randomized response's channel around
    its released label (its largest entry), else None."""
    found = rr_rows(likelihood)
    return found[0] if found is not None and found[1].all() else None


def fit_trees(
    model: BoostedTrees, inputs: np.ndarray, targets: np.ndarray, *, soft_labels: bool = False, seed: int = 0
) -> dict[str, Any]:
    """Fit ``model`` on public ``inputs`` and released ``targets``; the fit's facts (how, trees, iterations).

    ``targets``: (n,) released labels, learned as they are (as cross-entropy on them trains a network), or
    (n, K) likelihoods Pr[release of i | class]. The rows of the randomized response most of them share are
    learned as labels and the channel inverted (exact in expectation); from that model, :data:`EM_ROUNDS` of
    expectation-maximisation on every row whose release tells its classes apart, each once per class weighted
    by its posterior (without such rows, the first posterior's prior is uniform). ``soft_labels``: the
    normalised rows are the weights, once.
    ``seed`` is a public seed (the early-stopping split). Uses torch's number of threads.

    Raises
    ------
    labeldp.errors.ConfigError
        For numeric values or binned evidence, which the trees do not fit.
    """
    targets = np.asarray(targets)
    x = np.asarray(inputs, dtype=np.float32).reshape(len(inputs), -1)
    with threadpool_limits(torch.get_num_threads(), user_api="openmp"):
        if targets.ndim == 1:
            if not np.issubdtype(targets.dtype, np.integer):
                raise ConfigError("network 'gbdt' fits classes: it does not take numeric labels (use the mlp)")
            return _fit(model, x, targets, None, seed, "released labels")
        if targets.ndim != 2 or targets.shape[1] != model.num_classes:
            raise ConfigError("network 'gbdt' fits labels or per-class likelihoods, not binned evidence")
        likelihood = targets.astype(np.float64)
        if soft_labels:
            return _fit(model, x, None, _normalised(likelihood), seed, "soft labels")
        found = rr_rows(likelihood)
        if found is not None and found[0][1] == 0.0 and found[1].all():  # true labels: nothing to invert or weigh
            return _fit(model, x, likelihood.argmax(axis=1), None, seed, "released labels")
        if found is not None:
            channel, rows = found
            labels = likelihood[rows].argmax(axis=1)
            facts = _fit(model, x[rows], labels, None, seed, "released labels, channel inverted", channel)
            facts["inverted_rows"] = int(rows.sum())
        else:
            facts = _fit(model, x, None, _normalised(likelihood), seed, "posteriors under a uniform prior")
        facts["first_fit"] = facts.pop("fitted_on")
        # a release as likely under every class says nothing: its posterior would be the prior, which only holds
        # the model where it is (as the forward loss's gradient leaves such a row)
        telling = ~np.isclose(likelihood, likelihood[:, :1], rtol=1e-9, atol=0.0).all(axis=1)
        for _ in range(EM_ROUNDS if telling.any() else 0):
            prior = np.clip(_probabilities(model, x[telling]), PRIOR_FLOOR, 1.0)
            posterior = _normalised(prior * likelihood[telling])
            facts = {**facts, **_fit(model, x[telling], None, posterior, seed, "posteriors")}
        facts.update(em_rounds=EM_ROUNDS, uninformative_rows=int((~telling).sum()))
        return facts


def _normalised(rows: np.ndarray) -> np.ndarray:
    return rows / np.maximum(rows.sum(axis=1, keepdims=True), 1e-300)


def _probabilities(model: BoostedTrees, x: np.ndarray) -> np.ndarray:
    with torch.no_grad():
        return model.probabilities(torch.from_numpy(x).to(model.roots.device)).cpu().numpy()


def _fit(
    model: BoostedTrees,
    x: np.ndarray,
    labels: np.ndarray | None,
    soft: np.ndarray | None,
    seed: int,
    how: str,
    channel: tuple[float, float] | None = None,
) -> dict[str, Any]:
    """One scikit-learn fit on labels, or on (n, K) ``soft`` labels as rows repeated per class and weighted."""
    weights = None
    if soft is not None:
        n, num_classes = soft.shape
        weights = soft.T.ravel()
        keep = weights > 1e-12
        x, weights = np.tile(x, (num_classes, 1))[keep], weights[keep]
        labels = np.repeat(np.arange(num_classes), n)[keep]
    assert labels is not None
    counts = np.unique(labels, return_counts=True)[1]
    if counts.size < 2:  # one class only: nothing to split; its trees would predict it everywhere
        raise ConfigError("network 'gbdt' needs released labels of two classes or more to fit")
    # scikit-learn's stratified tenth, which stops early, needs two rows of each class and room for one of each
    stops = counts.min() >= 2 and math.ceil(TREE_SETTINGS["validation_fraction"] * len(labels)) >= counts.size
    settings = {**TREE_SETTINGS, "early_stopping": TREE_SETTINGS["early_stopping"] and stops}
    estimator = HistGradientBoostingClassifier(random_state=seed % 2**32, **settings)
    estimator.fit(x, labels, sample_weight=weights)
    model.set_trees(estimator, channel)
    return {"fitted_on": how, "iterations": int(estimator.n_iter_), "trees": int(model.roots.numel())}


__all__ = ["EM_ROUNDS", "PRIOR_FLOOR", "TREE_SETTINGS", "check_fitted_network", "fit_trees", "rr_channel", "rr_rows"]
