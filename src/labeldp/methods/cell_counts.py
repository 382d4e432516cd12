"""``lp-2st-counts``: two stages whose second releases noisy label counts per cell, not a label per row.

Stage 1 releases its labels by randomized response and trains a model on them. The second stage's rows
are cut into cells of at least ``cell_rows`` rows: the leaves of a regression tree over their public
inputs fitted to that model's log-probabilities, so each cell holds rows the model scores alike. Each
cell's label counts are released with discrete Laplace noise, and a new model learns every row's soft
label: its cell's noisy label fractions (second stage), or its posterior under the first model given its
released label (first stage). Counts beat randomized response's noise where a cell holds rows of nearly
one label rate (docs/results.md, tables).

Privacy: the cells depend on public inputs and the first release only, and every label is released
once (by RR, or in one cell's counts): epsilon-label-DP by parallel composition, which the ledger
computes from what was released.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release
from labeldp.config.method_registry import BUILTIN_HELP, Method, register_method
from labeldp.data.splits import split_stages
from labeldp.errors import ConfigError
from labeldp.methods.protocol import MethodContext
from labeldp.methods.stage_release import cell_soft_labels, release_cell_counts
from labeldp.methods.stages import TRAINING, release_stage, stage_targets
from labeldp.priors import FIRST_SHARE, cells_of


def run_cell_counts(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Release ``stage1`` by RR and train on it; release ``stage2`` as noisy counts per cell; train the run's model.

    ``stage1``: :func:`~labeldp.methods.stages.release_stage`. ``stage2``:
    :func:`~labeldp.methods.stage_release.release_cell_counts` of the second stage's labels, through
    :meth:`~labeldp.methods.protocol.MethodContext.spend`.
    """
    config, data = context.config, context.data
    assert config.stages is not None and config.label_epsilon is not None, "a resolved private configuration"
    epsilon = config.label_epsilon
    first, second = split_stages(len(data.y_train), config.stages, config.seed, data.train_units)
    model = context.new_model(1)
    released = release_stage(context, 1, first, model, None)
    context.train(model, 1, 2, first, stage_targets(context, released))
    cells = None
    if context.will_draw("stage2"):  # a collective prediction under torchrun, before rank 0 draws
        cells = cells_of(
            data.x_train[second],
            context.predict_proba(model, data.x_train[second]),
            config.options.cell_rows,
            config.seed,
        )

    def draw(ledger: PrivacyLedger) -> Release:
        assert cells is not None
        return release_cell_counts(ledger, data.y_train[second], second, cells, data.num_classes, epsilon, config.noise)

    counted = context.spend("stage2", draw)
    first_prior = context.predict_proba(model, data.x_train[first])
    posterior, fractions = cell_soft_labels(first_prior, released.arrays["evidence"], counted)
    final = context.new_model(2)
    indices, targets = np.concatenate([first, second]), np.concatenate([posterior, fractions]).astype(np.float32)
    context.train(final, 2, 2, indices, targets, soft_labels=True)
    stages = [
        {"stage": 1, "released": int(first.size), "reused": 0, "mean_k": float(np.mean(released.arrays["k"]))},
        {"stage": 2, "released": int(second.size), "reused": int(first.size), "cells": len(counted.arrays["counts"])},
    ]
    return final, {"stages": stages}


def _plan(config, data) -> None:
    if data.is_regression:
        raise ConfigError("method 'lp-2st-counts' counts classes; for numeric labels use rr-on-bins")


register_method(
    Method(
        "lp-2st-counts",
        BUILTIN_HELP["lp-2st-counts"],
        run_cell_counts,
        stages=2,
        default_stages=(FIRST_SHARE, 1 - FIRST_SHARE),
        plan=_plan,
        independent_of={"stage1": TRAINING},
        releases=lambda config: ("stage1", "stage2"),
        first_stage_options=("train", "model", "loss"),
    )
)
