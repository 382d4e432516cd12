"""``pate`` (Papernot et al. 2017, 2018): teachers on disjoint parts of the data vote on the student's
queries, answered by GNMax (or confident GNMax); the student trains on the answers.

(epsilon, delta)-label-DP (Gaussian noise has no pure-epsilon guarantee). :mod:`labeldp.teachers`
trains the teachers, :mod:`labeldp.accounting.calibration` plans the queries and the noise.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release, release_pate_labels
from labeldp.config.method_registry import BUILTIN_HELP, Method, register_method
from labeldp.config.run_config import RunConfig
from labeldp.data import LabeledDataset
from labeldp.errors import BudgetError, ConfigError
from labeldp.methods.protocol import MethodContext
from labeldp.models import build_model
from labeldp.models.names import FITTED_MODELS
from labeldp.randomness import public_seed
from labeldp.teachers import partition_teachers, select_queries, teacher_train_config, train_teachers


def run_pate(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Train the teachers (resumable), release their answers once (``pate``), then train the student.

    The release (:func:`~labeldp.boundary.release.release_pate_labels`, through
    :meth:`~labeldp.methods.protocol.MethodContext.spend`) charges every training example for every
    query, answered or not. The teachers' votes, computed from the true labels, stay in
    ``private/teachers.npz`` only until it is made.

    Raises
    ------
    labeldp.errors.BudgetError
        If no query was answered (after the release: its budget is spent).
    """
    config, data = context.config, context.data
    pate, n = config.options, len(data.y_train)
    assert config.epsilon is not None and config.delta is not None, "a resolved (epsilon, delta) method's budget"
    num_queries, noise_std = pate.plan(config.epsilon, config.delta, n)
    ratio = pate.threshold_noise_ratio_or_none
    teacher_of = partition_teachers(n, pate.teachers, config.seed)
    queries = select_queries(n, num_queries, config.seed)

    def teacher(t: int) -> nn.Module:
        seed = public_seed(config.seed, "pate-teachers", t)
        name = config.model_name(data.input_shape, data.categorical)
        return build_model(name, data.input_shape, data.num_classes, seed, data.categorical).to(context.device)

    def votes() -> np.ndarray | None:
        return train_teachers(
            teacher,
            data.x_train,
            data.y_train,
            teacher_of,
            data.x_train[queries],
            data.num_classes,
            teacher_train_config(config.train, pate),
            augmentation=data.augmentation,
            seed=config.seed,
            progress=context.progress,
            parallel=context.parallel,
            checkpoint=context.private_path("teachers.npz"),
        )

    # under torchrun the ranks share the teachers (their votes gathered on rank 0) before rank 0 draws
    shared = votes() if context.parallel and context.will_draw("pate") else None

    def draw(ledger: PrivacyLedger) -> Release:
        predictions = shared if shared is not None else votes()
        threshold = pate.threshold * pate.teachers if pate.confident else None
        release = release_pate_labels(
            ledger,
            predictions,
            teacher_of,
            np.arange(n),
            data.num_classes,
            noise_std,
            threshold,
            None if ratio is None else ratio * noise_std,
            config.noise.generator("pate-votes"),
            "pate",
        )
        return release.with_arrays(queries=queries, noise_std=np.array(noise_std))

    released = context.spend("pate", draw)
    # the teachers' raw votes, computed from true labels without noise: gone once the answers are released
    context.discard_private()
    answered = released.arrays["answered"]
    if not answered.any():
        raise BudgetError("no query was answered: lower --threshold or raise --queries (the budget is spent)")
    model = context.new_model(1)
    labels = released.labels
    assert labels is not None, "the release answers every query, -1 where it abstains"
    context.train(model, 1, 1, released.arrays["queries"][answered], labels[answered], "student")
    return model, {
        "teachers": pate.teachers,
        "queries": num_queries,
        "answered": int(answered.sum()),
        "noise_std": float(released.arrays["noise_std"]),
    }


#: why PATE takes privacy units of one row only
_ONE_ROW_PER_UNIT = (
    "PATE's teachers hold rows, not privacy units: a unit's rows could sit with several teachers and sway "
    "several votes. With a privacy unit, run it with max_rows_per_unit 1 (each unit then has one row)"
)


def _check(config: RunConfig) -> None:
    if config.max_rows_per_unit is not None and config.max_rows_per_unit > 1:
        raise ConfigError(_ONE_ROW_PER_UNIT)


def _plan(config: RunConfig, data: LabeledDataset) -> None:
    """Refuse a plan the budget cannot pay for, units of several rows, or a fitted network (the teachers train
    theirs by gradient steps on true labels), before the run directory is written."""
    if config.model_name(data.input_shape, data.categorical) in FITTED_MODELS:
        raise ConfigError("PATE's teachers train a network by gradient steps: choose one (--model mlp), not 'gbdt'")
    if data.train_units is not None and np.bincount(data.train_units).max() > 1:
        raise ConfigError(_ONE_ROW_PER_UNIT)
    assert config.epsilon is not None and config.delta is not None, "a resolved (epsilon, delta) method's budget"
    config.options.plan(config.epsilon, config.delta, len(data.y_train))


register_method(
    Method(
        "pate",
        BUILTIN_HELP["pate"],
        run_pate,
        gaussian=True,
        check=_check,
        plan=_plan,
        # the student's own settings: the teachers train with PATE's epochs and batch size, no mixup
        independent_of={"pate": ("train.epochs", "train.batch_size", "train.mixup_alpha", "train.eval_batch_size")},
        releases=lambda config: ("pate",),
        tuning=None,
        untunable="PATE releases labels only for the student's queries: held-out training examples have "
        "no released label to score candidates on",
    )
)
