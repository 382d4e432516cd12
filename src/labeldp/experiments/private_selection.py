"""DP-SGD's private selection from the run side: the candidates checked, the trials' inputs built, and the
tune folder written once the selection's mechanism (:mod:`labeldp.dpsgd.selection`) is done."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from labeldp.accounting import PrivacyLedger
from labeldp.accounting.datasets import new_release
from labeldp.accounting.policy import BudgetPolicy, Guarantee, group_bound
from labeldp.accounting.spending import Spending
from labeldp.config.run_config import RunConfig
from labeldp.config.tuning import SELECTION_DEFAULTS
from labeldp.data import LabeledDataset
from labeldp.dpsgd.selection import (
    SCRATCH_LEDGER,
    Selected,
    SelectionCandidate,
    scratch_folder,
    select_dpsgd,
)
from labeldp.errors import ConfigError
from labeldp.experiments.candidates import candidate_key, jsonable
from labeldp.experiments.tune_folder import TUNE_FILE, finished
from labeldp.files import write_json_atomic
from labeldp.recipes.applied import AppliedRecipe
from labeldp.runs.context import RunContext, initial_model
from labeldp.runs.plan import RunPlan, check_plan, config_dataset
from labeldp.runs.reservation import run_source
from labeldp.runs.rundir import RunDirectory
from labeldp.training.stage import resolve_device


def select_with_folder(
    base: RunConfig,
    candidates: Sequence[RunConfig],
    options: Sequence[Mapping[str, Any]],
    out: str | Path,
    *,
    holdout: float,
    device: str,
    progress: bool,
    dataset: LabeledDataset | None,
    settings: Mapping[str, float],
    recipe: AppliedRecipe | None = None,
    policy: BudgetPolicy,
) -> dict[str, Any]:
    """Tune DP-SGD by private selection (:func:`labeldp.dpsgd.selection.select_dpsgd`, ``settings`` over
    :data:`~labeldp.config.tuning.SELECTION_DEFAULTS`); every refusal comes before the spend, and a finished
    selection is read back.

    What is released, and its guarantee, is :mod:`labeldp.dpsgd.selection`'s: the chosen candidate, its model,
    its noisy held-out accuracy and the public plan, recorded as one ``selection`` entry. The tune folder,
    written once the trials are over, is the chosen trial's run folder with ``tune.json``; the whole selection
    is reserved on the dataset ledgers before its first trial, at the group bound of its add-or-remove
    guarantee (a label replaced); its summary is
    :meth:`RunContext.finish <labeldp.runs.context.RunContext.finish>`'s, which releases no test label for
    DP-SGD.

    Raises
    ------
    labeldp.errors.ConfigError
        If a noise multiplier is given, the candidates vary more than training and clipping options, or
        a candidate or the selection's plan is refused.
    labeldp.errors.RunDirectoryError
        If ``out`` holds a finished run, another finished tune, other files, or the spend of a selection
        that did not finish.
    """
    settings = {name: float(value) for name, value in {**SELECTION_DEFAULTS, **settings}.items()}
    keys = [candidate_key(chosen) for chosen in options]
    record = {"base": base.to_dict(), "candidates": keys, "holdout": holdout, "search": "private selection", **settings}
    done = finished(RunDirectory(out), record)
    if done is not None:
        return done
    _check_selection_candidates(base, candidates)
    data = dataset if dataset is not None else config_dataset(base)
    torch_device = resolve_device(device)
    for candidate in candidates:
        check_plan(candidate, data, torch_device)
    trials = [
        SelectionCandidate(
            candidate.train, candidate.options, functools.partial(initial_model, candidate, data, 1, torch_device)
        )
        for candidate in candidates
    ]
    spending = Spending(policy, run_source(base, data), new_release(out), "tune", str(Path(out)))
    write = functools.partial(
        _write_selection,
        spending=spending,
        base=base,
        candidates=candidates,
        options=options,
        record=record,
        data=data,
        device=torch_device,
        in_memory=dataset is not None,
        progress=progress,
        recipe=recipe,
    )
    assert base.epsilon is not None and base.delta is not None, "a resolved (epsilon, delta) method's budget"
    epsilon, delta = group_bound(base.epsilon, base.delta, 2)  # what its ledger records: a label replaced
    spending.reserve(Guarantee(epsilon, delta, None, epsilon), quiet=not progress)
    try:
        return select_dpsgd(
            trials,
            data,
            out,
            write,
            epsilon=base.epsilon,
            delta=base.delta,
            noise=base.noise,
            seed=base.seed,
            holdout=holdout,
            progress=progress,
            **settings,
        )
    except BaseException:
        if not (scratch_folder(out) / SCRATCH_LEDGER).exists():  # no trial ran: nothing was drawn
            spending.cancel()
        raise


def _check_selection_candidates(base: RunConfig, candidates: Sequence[RunConfig]) -> None:
    """Refuse candidates that vary more than training and clipping options (the budget, noise and data are the
    selection's own), and a given noise multiplier (the selection calibrates its own)."""
    if base.options.noise_multiplier is not None:
        raise ConfigError(
            "tune calibrates DP-SGD's noise multiplier to the whole selection: leave --noise-multiplier out"
        )
    for candidate in candidates:
        differs = sorted(
            field.name
            for field in dataclasses.fields(RunConfig)
            if field.name not in ("train", "options") and getattr(candidate, field.name) != getattr(base, field.name)
        )
        if candidate.options.noise_multiplier != base.options.noise_multiplier:
            differs.append("noise_multiplier")
        if differs:
            raise ConfigError(
                f"a private selection's candidates may vary training and clipping options only, not "
                f"{', '.join(differs)}: the budget, the noise and the data are the selection's own"
            )


def _write_selection(
    root: Path,
    ledger: PrivacyLedger,
    selected: Selected,
    *,
    base: RunConfig,
    candidates: Sequence[RunConfig],
    options: Sequence[Mapping[str, Any]],
    record: dict[str, Any],
    data: LabeledDataset,
    device,
    in_memory: bool,
    progress: bool,
    recipe: AppliedRecipe | None = None,
    spending: Spending,
) -> dict[str, Any]:
    """Write a private selection's tune folder into ``root``: the chosen trial's run folder and ``tune.json``.
    Its summary's ``seconds`` is null: the trials' duration would tell their number."""
    chosen, plan = candidates[selected.index], selected.plan
    assert base.delta is not None, "a resolved (epsilon, delta) method's budget"
    folder = RunDirectory(root)
    RunPlan.of(chosen, data, device, in_memory).write(folder)
    ledger.save(folder.ledger_path, base.delta)
    key = record["candidates"][selected.index]
    facts = {
        "seconds": None,
        "noise_multiplier": plan.noise_multiplier,
        "sampling_probability": plan.sampling_probability,
        "steps": plan.steps,
        "selection": {
            "chosen": key,
            "noisy_held_out_accuracy": selected.noisy_accuracy,
            "held_out": int(plan.held_out.size),
            "mean": plan.mean,
            "shape": plan.shape,
            "score_noise": plan.score_noise,
        },
    }
    context = RunContext(chosen, folder, data, device, progress, spending=spending, recipe=recipe)
    summary = context.finish(selected.model, facts)
    outcome = {
        **record,
        "method": base.method,
        "dataset": base.dataset,
        "epsilon": base.epsilon,
        "delta": base.delta,
        "noise_multiplier": plan.noise_multiplier,
        "held_out": int(plan.held_out.size),
        "num_train": int(len(data.y_train)),
        "chosen": key,
        "chosen_options": jsonable(options[selected.index]),
        "noisy_held_out_accuracy": selected.noisy_accuracy,
        "ledger_epsilon": math.ceil(ledger.epsilon(base.delta) * 1e6) / 1e6,
        "final": summary,
    }
    write_json_atomic(folder.root / TUNE_FILE, outcome)
    return outcome
