"""``dp-sgd``, the full-DP baseline: inputs *and* labels private, (epsilon, delta)-DP for add-or-remove
one example.

The true labels are read only inside DP-SGD's Poisson-sampled, clipped and noised steps
(:mod:`labeldp.dpsgd`); its plan is recorded on the ledger before the first step.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn
from tqdm.auto import tqdm

from labeldp.accounting import DPSGD_RELATION, PrivacyLedger, calibrate_noise_multiplier, dpsgd_epsilon, dpsgd_event
from labeldp.accounting.policy import Guarantee
from labeldp.boundary import Release, release_dpsgd_plan
from labeldp.config.method_registry import BUILTIN_HELP, Method, register_method
from labeldp.config.run_config import RunConfig
from labeldp.data import LabeledDataset
from labeldp.dpsgd.clipping import check_per_example_model
from labeldp.dpsgd.trainer import check_training_options, sampling_plan, train_dpsgd
from labeldp.errors import BudgetError, ConfigError
from labeldp.methods.protocol import MethodContext
from labeldp.models import build_model


def run_dpsgd(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Record DP-SGD's plan (once, as the release ``dp-sgd``), then train with it.

    The released steps (and so the model, its checkpoints and per-epoch metrics) are (epsilon,
    delta)-DP under add-or-remove-one; the plan (:func:`~labeldp.boundary.release.release_dpsgd_plan`:
    noise multiplier given or calibrated, sampling probability, steps, clipping norm) is recorded over
    every training example through :meth:`~labeldp.methods.protocol.MethodContext.spend`.
    """
    config, data = context.config, context.data
    n = len(data.y_train)
    q, steps, _ = sampling_plan(n, config.train)
    epsilon, delta = config.epsilon, config.delta
    assert epsilon is not None and delta is not None, "a resolved (epsilon, delta) method's budget"

    def plan(ledger: PrivacyLedger) -> Release:
        if config.options.noise_multiplier is None and context.progress:  # seconds of PLD accounting
            tqdm.write(
                f"calibrating the noise multiplier for epsilon {epsilon:g} at delta {delta:g} "
                f"({steps} steps at Poisson rate {q:.4g}) with dp_accounting's PLD accountant"
            )
        sigma = config.options.noise_multiplier or calibrate_noise_multiplier(epsilon, delta, q, steps)
        return release_dpsgd_plan(ledger, np.arange(n), sigma, q, steps, config.options.max_grad_norm, "dp-sgd")

    sigma = float(context.spend("dp-sgd", plan).arrays["noise_multiplier"])
    evaluated, _ = train_dpsgd(
        context.new_model(1),
        data.x_train,
        data.y_train,
        config.train,
        config.options,
        sigma,
        augmentation=data.augmentation,
        # private test labels: no release here
        test=(data.x_test, data.public_test_labels) if data.public_test else None,
        seed=config.seed,
        noise=config.noise,
        checkpoint=context.checkpoint_path(1),
        on_epoch_end=context.on_epoch_end(1, 1),
        progress=context.progress,
        data_parallel=context.parallel,
    )
    return evaluated.cpu(), {"noise_multiplier": sigma, "sampling_probability": q, "steps": steps}


def _check(config: RunConfig) -> None:
    check_training_options(config.train, config.options)


def _plan(config: RunConfig, data: LabeledDataset) -> None:
    """Refuse a run DP-SGD cannot do as configured on ``data``, before anything is written.

    A model that mixes examples, training options it cannot honour, or a given noise multiplier that
    spends more than the budget.
    """
    q, steps, _ = sampling_plan(len(data.y_train), config.train)
    try:
        check_per_example_model(
            build_model(
                config.model_name(data.input_shape, data.categorical),
                data.input_shape,
                data.num_classes,
                categorical=data.categorical,
            )
        )
    except ValueError as error:
        raise ConfigError(
            f"{error} (in the CLI: choose a --model without BatchNorm, e.g. cnn or tanh-cnn for 28x28 images, "
            "wrn16-4 for 32x32)"
        ) from None
    check_training_options(config.train, config.options, data.augmentation)
    sigma, epsilon, delta = config.options.noise_multiplier, config.epsilon, config.delta
    assert epsilon is not None and delta is not None, "a resolved (epsilon, delta) method's budget"
    if sigma is not None and (spent := dpsgd_epsilon(sigma, q, steps, delta)) > epsilon:
        raise BudgetError(
            f"noise multiplier {sigma:g} ({steps} steps at Poisson rate {q:.4g}) spends epsilon "
            f"{spent:.3g} at delta {delta:g}, more than the budget {epsilon:g}; "
            "raise it, raise --epsilon, or leave the noise multiplier out to calibrate it"
        )


def _planned(config: RunConfig, examples: int, guarantee: Guarantee) -> Guarantee:
    """``Method.planned``: the planned steps (the noise multiplier given or calibrated to ``guarantee``)
    accounted under replace-one, as the run's ledger will account them."""
    q, steps, _ = sampling_plan(examples, config.train)
    sigma = config.options.noise_multiplier or calibrate_noise_multiplier(guarantee.epsilon, guarantee.delta, q, steps)
    ledger = PrivacyLedger(examples, DPSGD_RELATION)
    ledger.record(dpsgd_event(sigma, q, steps), np.ones(examples, dtype=bool), "planned")
    return Guarantee.of_ledger(ledger, guarantee.delta)


register_method(
    Method(
        "dp-sgd",
        BUILTIN_HELP["dp-sgd"],
        run_dpsgd,
        gaussian=True,
        relation="ADD_OR_REMOVE_ONE",
        check=_check,
        plan=_plan,
        planned=_planned,
        training_releases=True,
        per_example=True,
        tuning="private-selection",
        # how the steps are computed, not what they release
        independent_of={"dp-sgd": ("train.eval_batch_size",)},
        releases=lambda config: ("dp-sgd",),
    )
)
