"""Tuning on released labels (``labeldp tune``): release the labels once, choose training options on the
release, train the final run with the best of them (the steps, for users: docs/guides/tuning.md).

Privacy: before any spend, every release the method makes (``Method.releases``) must be one no candidate
changes (its :func:`~labeldp.config.run_config.release_inputs` are the same for all). A multi-stage method's later
releases depend on the first stage's model, so options acting on it only through its training
(``Method.first_stage_options``) are chosen on the first stage's release and the later releases drawn once, by
the final run: a function of the first release, covered by the run's adaptive composition. The shared releases
are drawn once, in the tune folder, on its one ledger; each candidate trains on a copy of the data without
true training labels and is scored on held-out examples' *released* labels
(:class:`~labeldp.experiments.held_out.HeldOutScorer`). Neither the true labels nor the test set choose
anything, so a tune spends one run's releases. DP-SGD, whose training is its release, is tuned by private
selection instead (:mod:`labeldp.dpsgd.selection`).

The tune folder is the final run's folder plus ``tune.json``, ``tune.csv`` and ``candidates/<key>/`` (each
candidate's configuration, metrics and checkpoints: no release, no ledger)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from labeldp.accounting.policy import BudgetPolicy
from labeldp.accounting.rounding import format_epsilon
from labeldp.boundary import Release
from labeldp.config.run_config import RunConfig
from labeldp.config.tuning import DEFAULT_HOLDOUT, SELECTION_DEFAULTS
from labeldp.data import LabeledDataset
from labeldp.dpsgd.selection import format_selection
from labeldp.errors import ConfigError
from labeldp.evaluation import describe_test_metrics
from labeldp.experiments.candidates import candidate_config, candidate_key, candidate_options, check_tunable, jsonable
from labeldp.experiments.held_out import (
    UNINFORMATIVE_WARNING,
    HeldOutScorer,
    holdout_split,
    labels_each,
    uninformative_message,
)
from labeldp.experiments.one_release import (
    best_of,
    check_candidates,
    estimated_accuracy,
    held_out_examples,
    public_results,
    release_once,
    score_candidates,
)
from labeldp.experiments.private_selection import select_with_folder
from labeldp.experiments.tune_folder import TUNE_FILE, TUNE_TABLE, finished, write_table
from labeldp.files import write_json_atomic
from labeldp.recipes.applied import AppliedRecipe
from labeldp.released_metrics import points
from labeldp.runs.reservation import reserve_run
from labeldp.runs.run import train_run
from labeldp.runs.rundir import RunDirectory


def _check_selection(base: RunConfig, selection: Mapping[str, float] | None) -> None:
    """Settings of a private selection are known ones, and only given for a method tuned by one."""
    unknown = sorted(set(selection or {}) - set(SELECTION_DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown selection settings {unknown}; known: {', '.join(SELECTION_DEFAULTS)}")
    if selection and base.method_spec.tuning != "private-selection":
        raise ConfigError(
            "the selection's settings (mean number of trials, shape, score noise) apply to a private "
            f"selection only: method {base.method!r} is tuned on one release of its labels"
        )


def _held_out(
    releases: dict[str, Release], data: LabeledDataset, holdout: float, seed: int
) -> tuple[np.ndarray, HeldOutScorer]:
    """The held-out examples and their scorer, with a warning where most were released with k = 1."""
    held_out, scorer = held_out_examples(releases, data, holdout, seed)
    if scorer.uninformative > UNINFORMATIVE_WARNING:
        warnings.warn(uninformative_message(scorer.uninformative), UserWarning, stacklevel=3)
    return held_out, scorer


def _announce(key: str, result: dict[str, Any], later: tuple[str, ...]) -> str:
    then = f"; its run draws {', '.join(later)}" if later else ""
    return f"best candidate {key}: estimated clean accuracy {estimated_accuracy(result)}; training it on every " + (
        f"released label{then}"
    )


def tune(
    config: RunConfig,
    grid: Mapping[str, Sequence[Any]],
    out: str | Path,
    *,
    holdout: float = DEFAULT_HOLDOUT,
    trials: int | None = None,
    device: str = "auto",
    progress: bool = True,
    dataset: LabeledDataset | None = None,
    selection: Mapping[str, float] | None = None,
    recipe: AppliedRecipe | None = None,
    policy: BudgetPolicy | None = None,
) -> dict[str, Any]:
    """Tune ``config``'s training options over ``grid`` on one release of the labels (see the module
    docstring); the tune folder ``out`` ends as the run of the best candidate. Returns what ``tune.json``
    holds (a finished tune of the same record is read back): the candidates' estimated clean accuracies with
    standard errors, the choice, ``ledger_epsilon`` and the final run's summary.

    What is released, all on ``out``'s one ledger: the shared releases, drawn once under the base
    configuration, then by the final run (:func:`~labeldp.runs.run.train_run` of the chosen configuration) the
    later releases and ``test``, as a run records them. The candidates release nothing. DP-SGD's private
    selection releases what :func:`~labeldp.experiments.private_selection.select_with_folder` says.

    Parameters
    ----------
    grid : mapping of str to sequence
        The options to try and their values (:func:`~labeldp.experiments.candidates.candidate_options`).
    holdout : float, optional
        The share of the labelled training examples held out to score the candidates.
    trials : int or None, optional
        Try that many combinations of ``grid``, drawn from the public seed (a random search); None: all.
    selection : mapping of str to float, or None, optional
        The private selection's settings (DP-SGD only): ``mean``, ``shape``, ``score_noise``.
    recipe : AppliedRecipe or None, optional
        The recipe ``config``'s options came from, which the final run's summary names.
    policy : BudgetPolicy or None, optional
        The dataset ledgers' folder and cap, as :func:`~labeldp.runs.run.train_run` takes it.

    Raises
    ------
    labeldp.errors.ConfigError
        Before any spend, for candidates that cannot share one release or run on the data; after the
        shared releases, if a held-out example has no released label.
    labeldp.errors.RunDirectoryError
        If ``out`` holds a finished run or another finished tune, releases of another configuration, or
        the method did not make its shared releases before training.
    """
    base = config.resolved()
    policy = policy or BudgetPolicy.from_environment()
    options = candidate_options(grid, trials=trials, seed=base.seed)
    candidates = [candidate_config(base, chosen) for chosen in options]
    keys = [candidate_key(chosen) for chosen in options]
    _check_selection(base, selection)
    if base.method_spec.tuning == "private-selection":
        return select_with_folder(
            base,
            candidates,
            options,
            out,
            holdout=holdout,
            device=device,
            progress=progress,
            dataset=dataset,
            settings=selection or {},
            recipe=recipe,
            policy=policy,
        )
    data, names, later, torch_device = check_candidates(base, candidates, dataset, device, holdout)
    folder = RunDirectory(out)
    record = {
        "base": base.to_dict(),
        "candidates": keys,
        "holdout": holdout,
        "search": "random" if trials is not None else "grid",
    }
    done = finished(folder, record)
    if done is not None:
        return done

    spending = reserve_run(policy, base, data, folder.root, progress, route="tune")
    releases = release_once(base, folder, data, torch_device, progress, dataset is not None, names, spending)
    held_out, scorer = _held_out(releases, data, holdout, base.seed)
    results = score_candidates(
        options, candidates, folder, data, torch_device, releases, held_out, scorer, later, progress
    )
    best = best_of(results)
    if progress:
        tqdm.write(_announce(keys[best], results[best], later))
    summary = train_run(
        candidates[best], folder.root, device=device, progress=progress, dataset=dataset, recipe=recipe, policy=policy
    )
    outcome = {
        **record,
        "method": base.method,
        "dataset": base.dataset,
        "epsilon": base.epsilon,
        "releases": list(names + later),
        "scored_on": [name for name in names if labels_each(releases[name])] if later else None,
        "held_out": int(held_out.size),
        "uninformative_share": scorer.uninformative,
        "num_train": int(len(data.y_train)),
        "results": public_results(results),
        "chosen": keys[best],
        "chosen_options": jsonable(options[best]),
        "ledger_epsilon": summary.get("epsilon"),
        "final": summary,
    }
    write_json_atomic(folder.root / TUNE_FILE, outcome)
    write_table(outcome, folder.root / TUNE_TABLE)
    return outcome


def format_tune(outcome: dict[str, Any]) -> str:
    """The candidates as a table, best marked, then the final run and its ledger (a private selection's as
    :func:`~labeldp.dpsgd.selection.format_selection`)."""
    if outcome.get("search") == "private selection":
        return format_selection(outcome)
    width = max(len("candidate"), *(len(r["key"]) for r in outcome["results"]))
    lines = [
        f"{'candidate':<{width}}  estimated clean accuracy (95% interval)   minus the chosen's (same releases)",
        f"{'-' * width}  {'-' * 39}   {'-' * 35}",
    ]
    for row in outcome["results"]:
        if row["key"] == outcome["chosen"]:
            versus = "chosen"
        else:
            versus = points(row["difference"], row["difference_error"])
        lines.append(f"{row['key']:<{width}}  {estimated_accuracy(row):<39}   {versus}")
    lines.append("(differences in percentage points +- one standard error, on the held-out examples' released labels)")
    if outcome.get("scored_on"):
        later = [name for name in outcome["releases"] if name not in outcome["scored_on"]]
        lines.append(
            f"(each candidate's first-stage model, scored on {', '.join(outcome['scored_on'])}; the later "
            f"releases ({', '.join(later)}) depend on the options: drawn once, by the final run)"
        )
    if outcome.get("uninformative_share", 0.0) > UNINFORMATIVE_WARNING:
        lines.append(uninformative_message(outcome["uninformative_share"]))
    final = outcome["final"]
    epsilon = format_epsilon(outcome["ledger_epsilon"])
    lines.append(
        f"\n{outcome['held_out']} of {outcome['num_train']} training examples held out; the final run "
        f"({outcome['chosen']}) trained on every released label: {describe_test_metrics(final)}; the tune "
        f"folder's ledger: epsilon {epsilon} (one run's releases: {', '.join(outcome['releases'])})"
    )
    return "\n".join(lines)


__all__ = [
    "candidate_config",
    "candidate_key",
    "candidate_options",
    "check_tunable",
    "format_tune",
    "holdout_split",
    "tune",
]
