"""Label DP for numeric labels, a regression on a public grid of G values: ``rr-on-bins``,
``rr-on-bins-mst`` and ``laplace-regression`` (``non-private`` and ``lp-1st`` run through
:mod:`labeldp.methods.stages`).

``rr-on-bins`` (Ghazi et al., ICLR 2023) releases each label by RR over the bins that are optimal
under a noisy histogram prior (:func:`labeldp.mechanisms.optimal_bins`); ``rr-on-bins-mst`` takes
later stages' priors from the model, per example; ``laplace-regression`` adds discrete Laplace noise
on the grid's lattice. A model predicts a distribution over the grid, its prediction the expected
value; ``forward`` fits it through each release's noise channel, ``mse`` to the released values.

Privacy: each label released once, by an epsilon-DP mechanism (after the histogram, paid with
``prior_epsilon`` out of epsilon) whose prior does not depend on it; the ledger composes what was
recorded per example.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release, release_laplace_value, release_rr_on_bins
from labeldp.config.method_registry import BUILTIN_HELP, Method, register_method
from labeldp.config.run_config import RunConfig
from labeldp.data import LabeledDataset
from labeldp.data.splits import split_stages
from labeldp.errors import ConfigError
from labeldp.methods.protocol import MethodContext
from labeldp.methods.stages import FIRST_RELEASES, TRAINING, check_combined_priors, noisy_histogram_prior
from labeldp.priors import release_evidence
from labeldp.training.predictions import predict_proba


def _targets(context: MethodContext, released: Release) -> np.ndarray:
    """The forward loss's evidence, or the released values for ``mse``."""
    return released.arrays["values"] if context.config.options.loss == "mse" else released.arrays["evidence"]


def within_bins(priors: np.ndarray, bin_of: np.ndarray, floor: float = 1e-6) -> np.ndarray:
    """Each grid point's (n, G) share of its bin's probability under the prior; a bin without mass is split evenly."""
    weights = np.maximum(priors, floor)
    totals = np.zeros_like(weights)
    for b in range(priors.shape[1]):
        inside = bin_of == b
        totals[:, b] = np.where(inside, weights, 0.0).sum(axis=1)
    return weights / np.take_along_axis(totals, bin_of.astype(np.int64), axis=1)


def binned_evidence(likelihood: np.ndarray, priors: np.ndarray, bin_of: np.ndarray) -> np.ndarray:
    """The (n, 3, G) targets of :func:`labeldp.training.losses.binned_likelihood_loss`: channel, in-bin split, bins."""
    return np.stack([likelihood, within_bins(priors, bin_of), bin_of], axis=1).astype(np.float32)


def release_bins_stage(
    context: MethodContext,
    stage: int,
    members: np.ndarray,
    model: nn.Module,
    histogram: tuple[np.ndarray, np.ndarray] | None,
    epsilon: float,
) -> Release:
    """Stage ``stage``'s RR-on-bins release ``stage<stage>`` of its ``members``' labels at ``epsilon``.

    Stage 1's prior is the noisy ``histogram`` (``(rows, groups)`` of
    :func:`~labeldp.methods.stages.noisy_histogram_prior`; None: uniform), later stages' ``model``'s
    prediction (times the histogram's with ``combine_priors``). epsilon-label-DP for each member
    (:func:`~labeldp.boundary.release.release_rr_on_bins`, noise from the stream ``label-release`` of
    ``stage``, through :meth:`~labeldp.methods.protocol.MethodContext.spend`). Its evidence is binned
    (:func:`binned_evidence`): a map of one bin teaches its prior, which carries a cluster histogram's
    knowledge into the model.
    """
    config, data = context.config, context.data
    grid, tag = data.label_values, f"stage{stage}"
    assert grid is not None, "the plan refuses a dataset without numeric labels"

    def draw(ledger: PrivacyLedger) -> Release:
        true, rng = data.y_train[members], config.noise.generator("label-release", stage)
        rows = groups = None
        if histogram is not None:
            rows, groups = histogram[0], histogram[1][members]
        if stage == 1:
            if rows is None:
                rows, groups = np.full((1, grid.size), 1.0 / grid.size), np.zeros(members.size, dtype=np.int64)
            release = release_rr_on_bins(ledger, true, members, grid, rows, epsilon, rng, tag, groups)
            priors = rows[groups]
        else:
            priors = predict_proba(model, data.x_train[members], config.options.temperature)
            if config.options.combine_priors and rows is not None:
                priors = release_evidence(rows[groups], priors)
            release = release_rr_on_bins(ledger, true, members, grid, priors, epsilon, rng, tag)
        assert release.likelihood is not None  # the channel over the grid of each released bin
        evidence = binned_evidence(release.likelihood, priors, release.arrays["bin_of"])
        return release.with_arrays(indices=members, evidence=evidence)

    return context.spend(tag, draw)


def start_from_prior(model: nn.Module, prior: np.ndarray, floor: float = 1e-3) -> None:
    """Set the bias of ``model``'s last linear layer to log ``prior`` (floored), so it starts by predicting the prior.

    RR-on-bins tells which bin a label lies in, not where in it, so the split inside a bin starts from
    the prior's rather than a uniform one. Nothing changes if the last linear layer has no bias or not
    one output per grid point.
    """
    linear = [module for module in model.modules() if isinstance(module, nn.Linear)]
    if not linear or linear[-1].bias is None or linear[-1].out_features != prior.size:
        return
    logits = np.log(np.maximum(prior, floor))
    with torch.no_grad():
        linear[-1].bias.copy_(torch.as_tensor(logits - logits.mean(), dtype=linear[-1].bias.dtype))


def run_rr_on_bins(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """One stage (``rr-on-bins``) or several (``rr-on-bins-mst``) of RR-on-bins releases and training.

    Unless ``prior`` is ``uniform``, the histogram ``prior`` first, paid by every training example, or by
    stage 1's alone when there are several stages without ``combine_priors``; then ``stage<t>`` per stage
    (:func:`release_bins_stage`), at ``epsilon`` less ``prior_epsilon`` for the examples that paid for the
    histogram and ``epsilon`` for the others.
    """
    config, data = context.config, context.data
    assert config.stages is not None, "a resolved configuration has its stages"
    assert config.epsilon is not None, "a resolved configuration of a private method has its epsilon"
    members_by_stage = split_stages(len(data.y_train), config.stages, config.seed, data.train_units)
    histogram = None
    paying = None  # the examples that pay for the histogram: all of them, or stage 1's alone
    if config.prior != "uniform":
        multi = len(members_by_stage) > 1 and not config.options.combine_priors
        paying = members_by_stage[0] if multi else np.arange(len(data.y_train))
        histogram = noisy_histogram_prior(context, paying)
    model = context.new_model(1)
    if histogram is not None:
        assert paying is not None  # set with the histogram
        start_from_prior(
            model, np.bincount(histogram[1][paying], minlength=len(histogram[0])) @ histogram[0] / paying.size
        )
    summaries: list[dict[str, Any]] = []
    earlier: list[Release] = []
    for stage, members in enumerate(members_by_stage, start=1):
        prior_model = model
        if stage > 1 and not config.options.warm_start:
            model = context.new_model(stage)
        paid = config.prior_epsilon if paying is not None and np.isin(members, paying).all() else None
        epsilon = config.epsilon - (paid if paid is not None else 0.0)
        released = release_bins_stage(context, stage, members, prior_model, histogram, epsilon)
        indices, targets = members, _targets(context, released)
        if stage > 1 and config.options.reuse_labels:
            indices = np.concatenate([members, *(e.arrays["indices"] for e in earlier)])
            targets = np.concatenate([targets, *(_targets(context, e) for e in earlier)])
        earlier.append(released)
        context.train(model, stage, len(members_by_stage), indices, targets)
        summaries.append(
            {
                "stage": stage,
                "released": int(members.size),
                "reused": int(indices.size - members.size),
                "epsilon": epsilon,
                "mean_bins": float(np.mean(released.arrays["k"])),
                "constant_releases": int(np.sum(released.arrays["k"] == 1)),
            }
        )
    return model, {"stages": summaries}


def run_laplace(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Release every label once (``stage1``) with discrete Laplace noise on the grid's lattice, then train one stage.

    epsilon-label-DP: :func:`~labeldp.boundary.release.release_laplace_value` over every training
    example, noise from the stream ``label-release`` 1, through
    :meth:`~labeldp.methods.protocol.MethodContext.spend`.
    """
    config, data = context.config, context.data
    members = np.arange(len(data.y_train))
    grid, epsilon = data.label_values, config.epsilon
    assert grid is not None, "the plan refuses a dataset without numeric labels"
    assert epsilon is not None, "a resolved configuration of a private method has its epsilon"

    def draw(ledger: PrivacyLedger) -> Release:
        release = release_laplace_value(
            ledger,
            data.y_train,
            members,
            grid,
            epsilon,
            config.noise.generator("label-release", 1),
            "stage1",
        )
        assert release.likelihood is not None  # the channel over the grid of each released value
        return release.with_arrays(indices=members, evidence=release.likelihood.astype(np.float32))

    released = context.spend("stage1", draw)
    model = context.new_model(1)
    context.train(model, 1, 1, members, _targets(context, released))
    values = released.arrays["values"]
    inside = (values >= grid[0]) & (values <= grid[-1])
    return model, {
        "stages": [
            {"stage": 1, "released": int(members.size), "reused": 0, "released_inside_range": float(inside.mean())}
        ]
    }


def _check(config: RunConfig) -> None:
    check_combined_priors(config)
    if config.options.loss == "ce":
        raise ConfigError(
            f"method {config.method!r} releases values, not labels: use loss 'forward' (the noise "
            "channel over the grid) or 'mse' (squared error against the released values)"
        )


def _plan(config: RunConfig, data: LabeledDataset) -> None:
    if not data.is_regression:
        raise ConfigError(
            f"method {config.method!r} is for numeric labels (a regression dataset such as movielens, "
            f"or a table with --label-range); dataset {data.name!r} has classes"
        )
    if config.method == "laplace-regression":
        from labeldp.mechanisms import grid_step

        grid_step(data.label_values)


register_method(
    Method(
        "rr-on-bins",
        BUILTIN_HELP["rr-on-bins"],
        run_rr_on_bins,
        takes_prior=True,
        check=_check,
        plan=_plan,
        independent_of=FIRST_RELEASES,
        default_prior="histogram",
    )
)
register_method(
    Method(
        "rr-on-bins-mst",
        BUILTIN_HELP["rr-on-bins-mst"],
        run_rr_on_bins,
        takes_prior=True,
        stages=None,
        default_stages=(0.4, 0.6),
        check=_check,
        plan=_plan,
        independent_of=FIRST_RELEASES,
        default_prior="histogram",
    )
)
register_method(
    Method(
        "laplace-regression",
        BUILTIN_HELP["laplace-regression"],
        run_laplace,
        check=_check,
        plan=_plan,
        independent_of={"stage1": TRAINING},
    )
)
