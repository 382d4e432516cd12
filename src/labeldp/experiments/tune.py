"""Tuning on released labels (``labeldp tune``): release the labels once, choose training options on
the release, train the final run with the best of them.

1. Before anything is spent, every candidate configuration is resolved and checked, and each release
   the method makes (``Method.releases``) must be one that no candidate changes: its inputs
   (:func:`labeldp.runs.context.release_inputs`, which drops what ``Method.independent_of`` names)
   are the same for every candidate. LP-1ST (with any prior) and ALIBI release before they train, so
   every training option can be tried. One exception: a multi-stage method's later releases are
   drawn with the first stage's model as their prior, so they depend on how it trains; options that
   act on that model only through its training (``Method.first_stage_options``: LP-2ST's and
   LP-MST's ``train``, ``model``, ``loss``) are then chosen *on the first stage's release*, scoring
   each candidate's first-stage model, and the later releases are drawn once, by the final run under
   the chosen options: a function of the first release only, so the run's adaptive composition
   covers it. What acts only after LP-2ST's second release (``reuse_labels``, ``warm_start``) is
   tried on both releases, in a tune of its own. DP-SGD, whose training steps are the release, is
   tuned by private selection instead (:mod:`labeldp.dpsgd.selection`).
2. The method runs once in the tune folder until the releases the candidates share are made
   (training before one where it needs a model, as the run would): they are drawn, saved and
   recorded on the folder's one ledger (read back, never drawn again, when the tune is repeated).
3. A held-out part of the training examples with a shared release (``holdout``, chosen from the
   public seed) is set aside. Every candidate runs the method on a copy of the data without its true
   training labels, reading the saved releases, training on the released labels of the other
   examples (up to its first stage where later releases depend on its options), and is scored on the
   held-out examples' *released* labels by an estimate of its clean accuracy from their noise channel
   (:func:`labeldp.released_metrics.clean_accuracy_terms`; ALIBI: the noisy one-hot vector's entry at the
   prediction, whose expectation is the clean indicator), with its standard error. Neither the true
   labels nor the test set choose anything.
4. The best candidate's configuration becomes the run of the tune folder, trained on every released
   label (:func:`labeldp.runs.train_run`, which reads the shared releases back and draws the later
   ones).

The tune folder is a run folder (config.json of the chosen configuration, ledger.json with the one
run's releases, noisy_labels/, model.pt, summary.json) plus ``tune.json`` and ``tune.csv`` (the
candidates, their estimates and standard errors) and ``candidates/<key>/`` (each candidate's
configuration, metrics and checkpoints: no release, no ledger). Tuning spends nothing beyond one
run's releases: everything else is post-processing of released labels and public inputs.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from labeldp.accounting.rounding import format_epsilon
from labeldp.boundary import Release
from labeldp.config.run import RunConfig
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
    uninformative_message,
)
from labeldp.experiments.one_release import (
    best_of,
    check_candidates,
    held_out_examples,
    public_results,
    release_once,
    score_candidates,
)
from labeldp.experiments.private_selection import select_with_folder
from labeldp.experiments.tune_folder import TUNE_FILE, TUNE_TABLE, finished, write_table
from labeldp.files import write_json_atomic
from labeldp.recipes.applied import AppliedRecipe
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
    return (
        f"best candidate {key}: estimated clean accuracy {result['estimated_clean_accuracy']:.4f} "
        f"+- {result['standard_error']:.4f}; training it on every released label{then}"
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
) -> dict[str, Any]:
    """Tune ``config``'s training options over ``grid`` on one release of the labels; the tune folder
    ``out`` ends as the run of the best candidate (see the module docstring). Returns what
    ``tune.json`` holds: the candidates with their estimated clean accuracy and its standard error
    on the held-out released labels, the chosen key, and the final run's summary. ``dp-sgd``, whose
    steps are its release, is tuned by private selection instead (:mod:`labeldp.dpsgd.selection`,
    with the settings ``selection``: ``mean``, ``shape``, ``score_noise``).

    What is released, all recorded on the tune folder's one ledger (``ledger.json``): the releases the
    candidates share (``Method.releases``), drawn once in ``out`` by the method under the base
    configuration, each saved in ``noisy_labels/<name>.npz`` and recorded as an entry tagged ``<name>``
    (:meth:`RunContext.spend <labeldp.runs.context.RunContext.spend>`); then, by the final run
    (:func:`~labeldp.runs.run.train_run` of the chosen configuration in ``out``), the later releases
    that depend on the options, under the chosen ones, and the release ``test`` of private test labels,
    recorded in the same way. The candidates release nothing: they read the shared releases, and their
    folders hold no release and no ledger. The outcome's ``ledger_epsilon`` is the final run's epsilon.
    A repeated tune reads every saved release back. DP-SGD's private selection releases and records
    what :func:`~labeldp.experiments.private_selection.select_with_folder` says.

    Parameters
    ----------
    config : RunConfig
        The base configuration (resolved here); the candidates override it.
    grid : mapping of str to sequence
        The options to try and their values (:func:`~labeldp.experiments.candidates.candidate_options`).
    out : str or pathlib.Path
        The tune folder.
    holdout : float, optional
        The share of the labelled training examples held out to score the candidates
        (default :data:`~labeldp.config.tuning.DEFAULT_HOLDOUT`).
    trials : int or None, optional
        Try that many combinations of ``grid``, drawn from the public seed (a random search); None: all.
    device : str, optional
        ``"auto"`` (the GPU when torch sees one, else the CPU) or a device torch knows.
    progress : bool, optional
        Show progress.
    dataset : LabeledDataset or None, optional
        The dataset given in memory; None: loaded from the files ``config`` names.
    selection : mapping of str to float, or None, optional
        The private selection's settings (DP-SGD only).
    recipe : AppliedRecipe or None, optional
        The recipe ``config``'s options came from, which the final run's summary names (default None:
        the configuration as given).

    Returns
    -------
    dict
        The outcome (``tune.json``): the record (base, candidates, holdout, search), the method, dataset,
        epsilon, releases, the candidates' ``results`` (estimated clean accuracy, standard error,
        difference from the chosen one and its error, seconds), the chosen key and options, the number
        held out, the uninformative share, ``ledger_epsilon`` and the final run's summary (``final``).
        A finished tune of the same record is read back.

    Raises
    ------
    labeldp.errors.ConfigError
        Before any spend: a grid that gives fewer than two candidates, a candidate that does not resolve
        or cannot run on the data, a method not tuned on shared releases, a release that depends on the
        options tried, numeric labels, a holdout that leaves too few examples, or selection settings
        that are unknown or given to a method not tuned by private selection. Also if a held-out example
        has no released label (checked after the shared releases are made).
    labeldp.errors.BudgetError
        If the budget cannot pay for a candidate's plan.
    labeldp.errors.RunDirectoryError
        If ``out`` holds a finished run or a finished tune of another record, releases of another
        configuration, or if the method did not make its shared releases before training.
    labeldp.errors.RunLockedError
        If another process is using ``out`` or a candidate's folder.
    """
    base = config.resolved()
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

    releases = release_once(base, folder, data, torch_device, progress, dataset is not None, names)
    held_out, scorer = _held_out(releases, data, holdout, base.seed)
    results = score_candidates(
        options, candidates, folder, data, torch_device, releases, held_out, scorer, later, progress
    )
    best = best_of(results)
    if progress:
        tqdm.write(_announce(keys[best], results[best], later))
    summary = train_run(candidates[best], folder.root, device=device, progress=progress, dataset=dataset, recipe=recipe)
    outcome = {
        **record,
        "method": base.method,
        "dataset": base.dataset,
        "epsilon": base.epsilon,
        "releases": list(names + later),
        "scored_on": [name for name in names if releases[name].labels is not None] if later else None,
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
    """The candidates as a table, best marked, then the final run and its ledger.

    Parameters
    ----------
    outcome : dict
        What :func:`tune` returns (a private selection's is formatted by
        :func:`~labeldp.dpsgd.selection.format_selection`).

    Returns
    -------
    str
        The text, in lines.
    """
    if outcome.get("search") == "private selection":
        return format_selection(outcome)
    width = max(len("candidate"), *(len(r["key"]) for r in outcome["results"]))
    lines = [
        f"{'candidate':<{width}}  estimated clean accuracy   minus the chosen's (same releases)",
        f"{'-' * width}  {'-' * 24}   {'-' * 35}",
    ]
    for row in outcome["results"]:
        if row["key"] == outcome["chosen"]:
            versus = "chosen"
        else:
            versus = f"{100 * row['difference']:+6.2f} +- {100 * row['difference_error']:5.2f}"
        lines.append(
            f"{row['key']:<{width}}  {100 * row['estimated_clean_accuracy']:6.2f}% +- "
            f"{100 * row['standard_error']:5.2f}        {versus}"
        )
    lines.append("(percentage points +- one standard error, on the held-out examples' released labels)")
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
