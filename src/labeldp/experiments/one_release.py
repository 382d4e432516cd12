"""The steps of choosing among candidate configurations on one release of the labels, shared by
``labeldp tune`` (:mod:`labeldp.experiments.release_tuning`, a grid the user gives) and an auto-tuned
``labeldp train`` (:mod:`labeldp.experiments.auto_tune`, a grid planned within a time budget).

Before any spend, :func:`check_candidates` refuses what cannot share one release; :func:`release_once`
makes the releases the candidates share in the run folder (recorded on its one ledger); every
candidate is trained on a copy of the data without its true training labels and scored on held-out
examples' *released* labels (:func:`held_out_examples`, :func:`score_candidates`); :func:`best_of`
picks the best. Everything after the release is post-processing of released labels and public inputs.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from tqdm.auto import tqdm

from labeldp.accounting.spending import Spending
from labeldp.boundary import Release
from labeldp.config.run_config import RunConfig, as_recorded, release_holds
from labeldp.data import LabeledDataset
from labeldp.data.splits import split_stages
from labeldp.errors import SECOND_RELEASE, RunDirectoryError
from labeldp.experiments.candidates import candidate_key, check_tunable, jsonable
from labeldp.experiments.held_out import HeldOutScorer, holdout_split, labelled
from labeldp.experiments.tune_contexts import CandidateContext, FirstStageTrained, ReleaseContext, Released, sealed
from labeldp.experiments.tune_folder import CANDIDATES_FOLDER
from labeldp.files import write_json_atomic
from labeldp.released_metrics import estimate_mean, mean_and_error
from labeldp.runs.plan import RunPlan, check_plan, config_dataset
from labeldp.runs.reservation import withdraw_unspent
from labeldp.runs.run import accept_changed_config
from labeldp.runs.rundir import RunDirectory
from labeldp.training.stage import resolve_device


def check_candidates(
    base: RunConfig, candidates: list[RunConfig], dataset: LabeledDataset | None, device: str, holdout: float
) -> tuple[LabeledDataset, tuple[str, ...], tuple[str, ...], Any]:
    """Every refusal of a choice on one release, before anything is written or drawn; returns ``(data, shared,
    later, torch_device)`` (:func:`~labeldp.experiments.candidates.check_tunable`)."""
    check_tunable(base, candidates)
    data = dataset if dataset is not None else config_dataset(base)
    names, later = check_tunable(base, candidates, data)
    torch_device = resolve_device(device)
    for candidate in candidates:
        check_plan(candidate, data, torch_device)
    # scored on the first stage's examples when later releases depend on the options (sizes: public)
    assert base.stages is not None, "a resolved configuration has its stages"
    first = split_stages(len(data.y_train), base.stages, base.seed, data.train_units)[0]
    scored = len(first) if later else len(data.y_train)
    holdout_split(scored, holdout, base.seed)  # its refusals, before any spend
    return data, names, later, torch_device


def release_once(
    config: RunConfig,
    out: RunDirectory,
    data: LabeledDataset,
    device,
    progress: bool,
    in_memory: bool,
    names: tuple[str, ...],
    spending: Spending,
) -> dict[str, Release]:
    """Run the method in ``out`` until the releases ``names`` are made (drawn, saved and recorded on the
    folder's ledger as a run records them; read back when saved).

    A folder whose final run was interrupted after drawing later releases is left as it is: the shared
    releases are read back and the final run continues it.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If ``out`` holds releases of another configuration, or the method did not make ``names``
        before training.
    """
    try:
        return _release_once(config, out, data, device, progress, in_memory, names, spending)
    except BaseException:
        withdraw_unspent(spending, out.root)
        raise


def _release_once(config, out, data, device, progress, in_memory, names, spending) -> dict[str, Release]:
    with out.lock():
        saved = out.read_config()
        inputs = out.release_inputs()
        if saved is not None and set(inputs) - set(names):
            stale = [name for name in names if not release_holds(inputs.get(name), config, name, data.num_classes)]
            if stale:
                raise RunDirectoryError(
                    f"{out.root} holds releases {', '.join(stale)} of another configuration: "
                    f"choose another folder for the tune {SECOND_RELEASE}"
                )
            return {name: Release.from_arrays(out.load_release(name)) for name in names}
        plan = RunPlan.of(config, data, device, in_memory)
        if saved is not None:
            accept_changed_config(saved, plan, out, progress)
        out.create()
        plan.write(out)
        try:
            config.method_spec.run(ReleaseContext(config, out, data, device, progress, spending=spending, names=names))
        except Released:
            pass
        missing = [name for name in names if out.load_release(name) is None]
        if missing:
            raise RunDirectoryError(
                f"method {config.method!r} did not make its releases {', '.join(missing)} before "
                "training: tune cannot share them between candidates"
            )
        return {name: Release.from_arrays(out.load_release(name)) for name in names}


def held_out_examples(
    releases: dict[str, Release], data: LabeledDataset, holdout: float, seed: int
) -> tuple[np.ndarray, HeldOutScorer]:
    """The held-out examples among those the releases label (a public split), and their scorer."""
    labelled_examples = labelled(releases, len(data.y_train))
    held_out = labelled_examples[holdout_split(labelled_examples.size, holdout, seed)]
    return held_out, HeldOutScorer(releases, held_out, len(data.y_train), data.num_classes)


def _run_candidate(
    config: RunConfig,
    options: dict[str, Any],
    folder: RunDirectory,
    data: LabeledDataset,
    device,
    releases: dict[str, Release],
    held_out: np.ndarray,
    scorer: HeldOutScorer,
    later: tuple[str, ...],
) -> dict[str, Any]:
    """Train one candidate on the released labels of the examples not held out (up to its first stage when
    releases ``later`` depend on its options) and score it; one scored before under the same configuration is
    read back."""
    result_path = folder.root / "result.json"
    if result_path.exists():
        saved = folder.read_json(result_path)
        if (
            as_recorded(saved.get("config") or {}) == config.to_dict()
            and saved.get("held_out") == int(held_out.size)
            and len(saved.get("terms", ())) == held_out.size
            and "log_likelihood_terms" in saved
        ):
            return saved
    with folder.lock():
        previous = folder.read_config()
        if previous is not None and as_recorded(previous) != config.to_dict():
            folder.discard_training()
        (folder.root / "checkpoints").mkdir(exist_ok=True)
        folder.write_config(config.to_dict())
        context = CandidateContext(config, folder, data, device, releases, held_out, later)
        try:
            model, _ = config.method_spec.run(context)
        except FirstStageTrained:
            model = context.trained
        terms, log_likelihood = scorer.score(model, data.x_train[held_out], config.train.eval_batch_size)
        result = candidate_result(options, terms, context.seconds(), config.to_dict(), log_likelihood)
        write_json_atomic(result_path, result)
        return result


def candidate_result(
    options: dict[str, Any], terms: np.ndarray, seconds: float, config: dict, log_likelihood: np.ndarray
) -> dict[str, Any]:
    """A scored candidate: its estimated clean accuracy within [0, 1] with its standard error and 95 % interval
    (:func:`~labeldp.released_metrics.estimate_mean` of its held-out ``terms``), the mean log-likelihood of the
    held-out released labels, and the terms of both."""
    estimate = estimate_mean(terms, 0.0, 1.0)
    return {
        "key": candidate_key(options),
        "options": jsonable(options),
        "estimated_clean_accuracy": estimate.value,
        "standard_error": estimate.error,
        "interval": [estimate.low, estimate.high],
        "held_out": int(len(terms)),
        "seconds": round(seconds, 2),
        "config": config,
        "released_log_likelihood": float(np.mean(log_likelihood)),
        "terms": np.asarray(terms).tolist(),
        "log_likelihood_terms": np.asarray(log_likelihood).tolist(),
    }


def score_candidates(
    options: list[dict[str, Any]],
    candidates: list[RunConfig],
    folder: RunDirectory,
    data: LabeledDataset,
    device,
    releases: dict[str, Release],
    held_out: np.ndarray,
    scorer: HeldOutScorer,
    later: tuple[str, ...],
    progress: bool,
) -> list[dict[str, Any]]:
    """Train and score every candidate in ``folder/candidates/<key>/`` (read back where scored before), on a
    copy of ``data`` whose true training labels are withheld; per candidate its key, options, estimate,
    standard error, seconds, configuration and per-example terms."""
    withheld = sealed(data)
    bar = tqdm(total=len(candidates), desc="tune", unit="candidate", disable=None if progress else True)
    results = []
    for chosen, candidate in zip(options, candidates):
        key = candidate_key(chosen)
        bar.set_postfix_str(key)
        candidate_folder = RunDirectory(folder.root / CANDIDATES_FOLDER / key)
        results.append(
            _run_candidate(candidate, chosen, candidate_folder, withheld, device, releases, held_out, scorer, later)
        )
        bar.update()
    bar.close()
    return results


def best_of(results: list[dict[str, Any]]) -> int:
    """The best candidate's position (the first of equals); each result gets its ``difference`` from the best,
    paired on the same held-out releases so that their shared noise cancels."""
    best = max(range(len(results)), key=lambda i: (float(np.mean(results[i]["terms"])), -i))  # unbiased, uncut
    for result in results:
        result["difference"], result["difference_error"] = mean_and_error(
            np.subtract(result["terms"], results[best]["terms"])
        )
    return best


def lead(result: dict[str, Any], other: dict[str, Any], terms: str = "terms") -> tuple[float, float]:
    """How far ``result``'s estimate is ahead of ``other``'s (of their ``terms``: the clean accuracy's, or
    ``log_likelihood_terms``), and its standard error, paired on the same held-out releases."""
    return mean_and_error(np.subtract(result[terms], other[terms]))


def clearly_ahead(ahead: float, error: float) -> bool:
    """Whether a lead is more than its standard error. A lead resting on one held-out example equals its
    standard error exactly: rounding must not make it more."""
    return ahead > error * (1 + 1e-9)


def estimated_accuracy(result: dict[str, Any]) -> str:
    """A candidate's estimated clean accuracy, within [0, 1], with its 95 % interval (a result saved before
    results had one: its standard error)."""
    if "interval" not in result:
        return f"{100 * result['estimated_clean_accuracy']:.2f}% +- {100 * result['standard_error']:.2f}"
    low, high = result["interval"]
    return f"{100 * result['estimated_clean_accuracy']:.2f}% (95% interval {100 * low:.2f} to {100 * high:.2f}%)"


def public_results(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The results as ``tune.json`` and a summary record them: without ``config`` and the terms."""
    return [{k: v for k, v in r.items() if k not in ("config", "terms", "log_likelihood_terms")} for r in results]
