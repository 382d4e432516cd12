"""``labeldp train`` where a dataset has no recipe of its own: the learning rate chosen on the run's own
release, within a budget of training work, at no extra epsilon (for users: docs/guides/runs.md, "Tuned on your
own release").

The run is a tune on one release (:mod:`labeldp.experiments.one_release`) whose grid is planned here:
multiples of the base learning rate (:data:`~labeldp.config.tuning.LR_FACTORS`) while the candidates' work,
examples x epochs from public sizes only (the same plan on every machine and resume), stays within ``budget``
untuned runs'. Where the best is an edge of the grid, clearly ahead of its neighbour, the grid extends beyond
it (:data:`~labeldp.config.tuning.LR_EDGE_STEPS`) within the same budget, a step replacing the choice only
where clearly ahead of it: a choice on the scores of released labels, each step recorded before its
candidate trains, so that a resumed run tries the same ones. On images, the choice mirrored at random (where
their augmentation has no flip) then cut out, and on a table of yours gradient-boosted trees, are one more
candidate each (:mod:`labeldp.experiments.extra_candidates`). The ledger holds exactly one run's releases:
the candidates read them and have no true training label. Where the release says nothing about the options
(most held-out examples released with k = 1) or ``labeldp tune`` refuses the method, the run says so and
trains its base options. ``auto_tune.json`` records the plan, the steps past an edge, the scores and the
choice, which an interrupted run keeps."""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from labeldp.accounting.policy import BudgetPolicy
from labeldp.accounting.spending import Spending
from labeldp.config.run_config import RunConfig
from labeldp.config.tuning import DEFAULT_HOLDOUT, DEFAULT_TUNE_BUDGET, LR_EDGE_STEPS, LR_FACTORS
from labeldp.data import LabeledDataset
from labeldp.data.splits import split_stages
from labeldp.errors import SECOND_RELEASE, ConfigError, RunDirectoryError
from labeldp.experiments.candidates import candidate_config, candidate_key, check_tunable, jsonable
from labeldp.experiments.extra_candidates import EXTRAS, augmented, trees, try_extras
from labeldp.experiments.held_out import UNINFORMATIVE_WARNING, labels_each
from labeldp.experiments.one_release import (
    best_of,
    check_candidates,
    clearly_ahead,
    estimated_accuracy,
    held_out_examples,
    lead,
    public_results,
    release_once,
    score_candidates,
)
from labeldp.files import write_json_atomic
from labeldp.models.names import FITTED_MODELS
from labeldp.recipes.applied import AS_GIVEN, AppliedRecipe
from labeldp.released_metrics import points
from labeldp.runs.plan import config_dataset
from labeldp.runs.reservation import reserve_run, withdraw_unspent
from labeldp.runs.run import train_run
from labeldp.runs.rundir import RunDirectory

#: the record of an auto-tuned run, in its folder
AUTO_TUNE_FILE = "auto_tune.json"


def _work(config: RunConfig, data: LabeledDataset, later: tuple[str, ...], holdout: float) -> tuple[float, float]:
    """(one untuned run's training work, one candidate's at the same epochs), in examples x epochs; a
    candidate trains on the examples not held out, only the first stage's where releases ``later`` depend on
    it."""
    assert config.stages is not None, "a resolved configuration has its stages"
    sizes = [part.size for part in split_stages(len(data.y_train), config.stages, config.seed, data.train_units)]
    reuse = getattr(config.options, "reuse_labels", True)  # (lp-2st-counts' last model trains on every stage)
    trained = [sum(sizes[: t + 1]) if t and reuse else sizes[t] for t in range(len(sizes))]
    epochs = config.train.epochs
    run = epochs * sum(trained)
    candidate = epochs * (sizes[0] - round(holdout * sizes[0])) if later else run * (1 - holdout)
    return float(run), float(candidate)


def plan_candidates(
    base: RunConfig, data: LabeledDataset, budget: float, holdout: float = DEFAULT_HOLDOUT
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The learning rates to try (``{"lr": value}`` each), multiples of the base one in
    :data:`~labeldp.config.tuning.LR_FACTORS`' order while their work fits ``budget`` untuned runs', and the
    plan's facts (``most_candidates``: with those the budget leaves for steps beyond an edge).

    Raises
    ------
    labeldp.errors.ConfigError
        Where ``labeldp tune`` would refuse the candidates, or fewer than two fit the budget.
    """
    network = base.model_name(data.input_shape, data.categorical)
    if network in FITTED_MODELS:
        raise ConfigError(f"network {network!r} is fitted, not trained at a learning rate: there is none to choose")
    every = [{"lr": float(f"{base.train.lr * factor:.6g}")} for factor in LR_FACTORS]
    _, later = check_tunable(base, [candidate_config(base, options) for options in every], data)
    run, each = _work(base, data, later, holdout)
    affordable = int(budget * run / each + 1e-9) if each > 0 else len(every)
    fit = min(len(every), affordable)
    if fit < 2:
        raise ConfigError(
            f"a budget of {budget:g} untuned runs pays for {fit} candidate(s) of {each / run:.2f} run each: "
            "give --tune-budget at least twice that to choose between two"
        )
    most = min(affordable, len(every) + LR_EDGE_STEPS)
    work = {"untuned_run": run, "candidate": each, "ratio": round(fit * each / run, 4), "most_candidates": most}
    return every[:fit], work


def beyond_the_edges(options: list[dict[str, Any]], steps: int) -> list[dict[str, Any]]:
    """Every learning rate ``steps`` extensions of ``options`` could add past either edge (each twice the
    largest, or half the smallest, before it), as :func:`beyond_the_edge` writes them: checked before the
    draw."""
    found = []
    for direction, edge in ((2.0, max), (0.5, min)):
        lr = edge(o["lr"] for o in options)
        for _ in range(steps):
            lr = float(f"{lr * direction:.6g}")
            found.append({"lr": lr})
    return found


def beyond_the_edge(options: list[dict[str, Any]], results: list[dict[str, Any]], most: int) -> dict[str, Any] | None:
    """The next step past an edge of the rates tried (their scored ``results``, in order), or None: where the
    best is the largest (smallest) rate, ahead of the next one inward by more than the standard error of
    their paired difference, and fewer than ``most`` were tried, a candidate at twice (half) its rate."""
    if len(options) >= most:
        return None
    best = best_of(results)
    rates = [o["lr"] for o in options]
    rate = rates[best]
    if rate == max(rates):
        beyond, factor, inward = "largest", 2.0, [i for i, r in enumerate(rates) if r < rate]
    elif rate == min(rates):
        beyond, factor, inward = "smallest", 0.5, [i for i, r in enumerate(rates) if r > rate]
    else:
        return None
    if not inward:
        return None
    neighbour = min(inward, key=lambda i: abs(rates[i] - rate))
    ahead, error = lead(results[best], results[neighbour])
    if not clearly_ahead(ahead, error):  # within the noise of the held-out releases: no sign of more beyond
        return None
    step = {"lr": float(f"{rate * factor:.6g}")}
    return {
        "options": step,
        "candidate": candidate_key(step),
        "beyond": beyond,
        "after": candidate_key(options[best]),
        "ahead_of": candidate_key(options[neighbour]),
        "ahead": ahead,
        "ahead_error": error,
    }


def kept_steps(results: list[dict[str, Any]], steps: list[dict[str, Any]]) -> int:
    """How many of ``steps`` past an edge (their candidates last in ``results``) the choice may take: each
    while its candidate leads the edge it went past by more than the standard error of their paired
    difference. The best of many near-equal estimates is biased up, more so the more there are: a step
    replaces the grid's choice only where it is clearly ahead of it."""
    keys = [result["key"] for result in results]
    for count, step in enumerate(steps):
        if not clearly_ahead(*lead(results[keys.index(step["candidate"])], results[keys.index(step["after"])])):
            return count
    return len(steps)


def _say(progress: bool, text: str) -> None:
    if progress:
        tqdm.write(text)


def _read_record(folder: RunDirectory, base: RunConfig) -> dict[str, Any] | None:
    """The folder's record of an earlier start (None: none), refused if made from another configuration."""
    path = folder.root / AUTO_TUNE_FILE
    if not path.exists():
        return None
    record = folder.read_json(path)
    saved, new = RunConfig.from_dict(record.get("base") or {}).to_dict(), base.to_dict()  # an older record's too
    if saved != new:
        differs = ", ".join(sorted(k for k in set(saved) | set(new) if saved.get(k) != new.get(k)))
        raise RunDirectoryError(
            f"{folder.root} holds a run whose options were chosen on its release from another configuration "
            f"(differs in: {differs}); run the command that started it to finish it, or choose another folder"
        )
    declined = record.get("chosen", "") is None and "options" not in record  # not tuned, said why: no plan
    needed = {"holdout"} | ({"options"} if not declined else set())
    needed |= {"results", "chosen_options"} if record.get("chosen") is not None else set()
    missing = sorted(needed - set(record))
    if missing:
        raise RunDirectoryError(
            f"{path} is damaged (it lacks {', '.join(missing)}): restore it from a copy of the folder, or move the "
            f"folder aside and run again into a new one {SECOND_RELEASE}"
        )
    return record


def _write_record(folder: RunDirectory, record: dict[str, Any]) -> None:
    folder.root.mkdir(parents=True, exist_ok=True)
    write_json_atomic(folder.root / AUTO_TUNE_FILE, record)


def _fall_back(folder: RunDirectory, record: dict[str, Any], reason: str, base_name: str, progress: bool) -> None:
    record.update(chosen=None, chosen_options=None, reason=reason)
    _write_record(folder, record)
    _say(progress, f"auto-tune: not tuned ({reason}); training {base_name}")


def _choose(
    base: RunConfig,
    folder: RunDirectory,
    record: dict[str, Any],
    data: LabeledDataset,
    in_memory: bool,
    device: str,
    progress: bool,
    base_name: str,
    spending: Spending,
) -> RunConfig:
    """Release once, score the record's candidates on the held-out released labels and record the choice (or
    why there is none); returns the configuration the run trains."""
    holdout = record["holdout"]
    options = record["options"] + [step["options"] for step in record.get("extended", [])]
    candidates = [candidate_config(base, chosen) for chosen in options]
    data, names, later, torch_device = check_candidates(base, candidates, data, device, holdout)
    releases = release_once(base, folder, data, torch_device, progress, in_memory, names, spending)
    held_out, scorer = held_out_examples(releases, data, holdout, base.seed)
    record.update(held_out=int(held_out.size), scored_on=[n for n in names if labels_each(releases[n])])
    if scorer.uninformative > UNINFORMATIVE_WARNING:
        reason = (
            f"{100 * scorer.uninformative:.0f}% of the held-out examples were released with k = 1, the prior's "
            "top class whatever their label: the release says nothing about the options"
        )
        _fall_back(folder, record, reason, base_name, progress)
        return base
    _say(
        progress,
        f"auto-tune: {len(options)} learning rates ({', '.join(format(o['lr'], 'g') for o in options)}) trained on "
        f"this run's released labels and scored on {held_out.size} held-out ones (no extra epsilon)",
    )
    scored = (folder, data, torch_device, releases, held_out, scorer, later, progress)
    results = score_candidates(options, candidates, *scored)
    most = record.get("work", {}).get("most_candidates", len(record["options"]))  # an earlier version's: none
    while (step := beyond_the_edge(options, results, most)) is not None:
        record.setdefault("extended", []).append(step)
        _write_record(folder, record)  # before its candidate trains: a resumed run tries it too
        _say(
            progress,
            f"auto-tune: {step['after']}, the {step['beyond']} rate tried, is ahead of {step['ahead_of']} by "
            f"{points(step['ahead'], step['ahead_error'])}: trying {step['candidate']} too",
        )
        options.append(step["options"])
        candidates.append(candidate_config(base, step["options"]))
        results += score_candidates(options[-1:], candidates[-1:], *scored)
    steps = record.get("extended", [])
    kept = kept_steps(results, steps)
    for number, step in enumerate(steps):
        step["kept"] = number < kept
    grid = len(options) - len(steps) + kept
    best = settled(results[:grid], record)
    best = try_extras(
        base, record, options, candidates, results, best, scored, progress, most, partial(_write_record, folder)
    )
    for result in results[grid:]:  # its difference from the choice too
        result["difference"], result["difference_error"] = lead(result, results[best])
    work = record.get("work", {})
    record.update(
        results=public_results(results),
        chosen=candidate_key(options[best]),
        chosen_options=jsonable(options[best]),
        reason=None,
        seconds=round(sum(r["seconds"] for r in results), 2),
        tried_ratio=round(sum(o.get("model") is None for o in options) * work["candidate"] / work["untuned_run"], 4)
        if work
        else None,
    )
    _write_record(folder, record)
    _say(progress, describe_choice(record))
    return candidates[best]


def settled(results: list[dict[str, Any]], record: dict[str, Any]) -> int:
    """The position of the choice among ``results`` (the base first): the best, where it is clearly ahead of
    the base on their paired held-out terms; else the base, the record saying the candidates could not be
    told apart (the best of near-equal estimates is biased up)."""
    best = best_of(results)
    ahead, error = lead(results[best], results[0])
    if best == 0 or clearly_ahead(ahead, error):
        return best
    record["indistinct"] = {"best": results[best]["key"], "ahead": ahead, "ahead_error": error}
    for result in results:
        result["difference"], result["difference_error"] = lead(result, results[0])
    return 0


def describe_choice(record: dict[str, Any]) -> str:
    """What an auto-tuned run chose and why, in one line, from its record (``auto_tune.json``)."""
    if record.get("chosen") is None:
        return f"auto-tune: not tuned ({record.get('reason')})"
    results = {r["key"]: r for r in record["results"]}
    chosen, base = results[record["chosen"]], record["results"][0]
    versus = (
        "the base learning rate"
        if base["key"] == record["chosen"]
        else f"the base {base['key']}: {points(base['difference'], base['difference_error'])}"
    )
    if indistinct := record.get("indistinct"):
        versus = (
            f"the candidates could not be told apart: the best, {indistinct['best']}, ahead by "
            f"{points(indistinct['ahead'], indistinct['ahead_error'])}; kept the base"
        )
    estimate = estimated_accuracy(chosen)
    steps = record.get("extended") or []
    extended = (
        f"; the grid extended beyond its {steps[0]['beyond']} rate to {', '.join(s['candidate'] for s in steps)}"
        + ("" if all(s.get("kept", True) for s in steps) else f" ({steps[-1]['candidate']} not clearly ahead)")
        if steps
        else ""
    )
    tried = [
        (words, form(extra["ahead"], extra["ahead_error"]) if "ahead" in extra else "", extra)
        for name, _, words, _, form in EXTRAS
        if "kept" in (extra := record.get(name) or {})
    ]
    for words, shown, extra in tried:
        if extra["kept"]:  # (a record written before 'versus' was: ahead of the choice)
            versus = f"{words} ahead of {extra.get('versus', 'the choice')}: {shown}"
    behind = "".join(
        f"; {words} not tried ({e['skipped']})" if "skipped" in e else f"; {words} not clearly ahead ({shown})"
        for words, shown, e in tried
        if not e["kept"]
    )
    return (
        f"auto-tune: chose {record['chosen']} ({versus}): estimated clean accuracy {estimate} on "
        f"{record['held_out']} held-out released labels{extended}{behind}; the candidates took "
        f"{record['seconds']:.1f}s"
    )


def _start(
    base: RunConfig,
    folder: RunDirectory,
    budget: float,
    data: LabeledDataset,
    device: str,
    progress: bool,
    base_name: str,
) -> tuple[dict[str, Any], bool]:
    """The record of a new auto-tuned run, written before anything is drawn: its plan, or (True) why there is
    none, the run then training without tuning."""
    record: dict[str, Any] = {"base": base.to_dict(), "budget": budget, "holdout": DEFAULT_HOLDOUT}
    try:
        options, work = plan_candidates(base, data, budget, DEFAULT_HOLDOUT)
        possible = options + beyond_the_edges(options, work["most_candidates"] - len(options))
        mirror = augmented(base, data, options[0], "flip")
        cut = augmented(base, data, mirror or options[0], "cutout")  # both at once: checked, never trained
        possible += [extra for extra in (mirror, cut) if extra is not None]
        check_candidates(base, [candidate_config(base, o) for o in possible], data, device, DEFAULT_HOLDOUT)
    except ConfigError as error:
        _fall_back(folder, record, str(error), base_name, progress)
        return record, True
    record.update(options=options, candidates=[candidate_key(o) for o in options], work=work)
    if (tree := trees(base, data, device)) is not None:
        record["trees"] = {"options": tree, "candidate": candidate_key(tree)}
    _write_record(folder, record)
    return record, False


def auto_tuned_run(
    config: RunConfig,
    out_dir: str | Path,
    *,
    budget: float = DEFAULT_TUNE_BUDGET,
    device: str = "auto",
    progress: bool = True,
    dataset: LabeledDataset | None = None,
    base_name: str | None = None,
    recipe: AppliedRecipe | None = None,
    policy: BudgetPolicy | None = None,
) -> dict[str, Any]:
    """Run ``config`` in ``out_dir`` with its learning rate chosen on the run's own release (see the module
    docstring); returns the run's summary, whose ``auto_tune`` records the choice.

    What is released: exactly what :func:`~labeldp.runs.run.train_run` of ``config`` releases, on the run
    folder's one ledger: the shared releases drawn once under ``config``, the rest (LP-2ST's ``stage2``,
    ``test``) by the final run. The candidates release nothing and read no true label.

    Parameters
    ----------
    budget : float, optional
        The candidates' training work at most this multiple of one untuned run's; 0: an untuned run.
    base_name : str, optional
        What the base options are, in the messages; default: named after the recipe they came from (the
        family's, or the library's defaults), else the options given.
    recipe : AppliedRecipe or None, optional
        The recipe the base options came from, which the summary names.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If ``out_dir`` holds a run whose options were chosen from another configuration.
    """
    if budget < 0:
        raise ConfigError(f"--tune-budget must be 0 (off) or positive, got {budget:g}")
    base_name = base_name or _base_name(recipe)
    policy = policy or BudgetPolicy.from_environment()
    run: dict[str, Any] = dict(device=device, progress=progress, dataset=dataset, recipe=recipe, policy=policy)
    if budget == 0:
        return train_run(config, out_dir, **run)
    base = config.resolved()
    folder = RunDirectory(out_dir)
    folder.refuse_foreign_files()  # before the record is written into it
    record = _read_record(folder, base)
    if record is None and folder.read_config() is not None:
        _say(progress, f"auto-tune: {folder.root} holds a run started without tuning: it continues as it was")
        return train_run(config, out_dir, **run)
    data = dataset if dataset is not None else config_dataset(base)
    in_memory = dataset is not None
    resumed = record is not None  # else this call makes the release the run continues from: no "resuming"
    if record is None:  # refused past --total-epsilon before auto_tune.json is written
        spending = reserve_run(policy, base, data, out_dir, progress)
        try:
            record, settled = _start(base, folder, budget, data, device, progress, base_name)
        except BaseException:
            withdraw_unspent(spending, out_dir)
            raise
        choosing = (base, folder, record, data, in_memory, device, progress, base_name, spending)
        chosen = base if settled else _choose(*choosing)
    elif "chosen" not in record:  # interrupted while choosing: its plan, its release, its scored candidates
        spending = reserve_run(policy, base, data, out_dir, progress)  # on the ledgers already: adds nothing
        chosen = _choose(base, folder, record, data, in_memory, device, progress, base_name, spending)
    else:
        chosen = base if record["chosen"] is None else candidate_config(base, record["chosen_options"])
        if folder.read_summary() is None:
            _say(progress, f"{describe_choice(record)} (recorded: kept)")
    chosen = config if chosen is base else chosen  # resolved by train_run, as it would be without tuning
    if "model" in (record.get("chosen_options") or {}):
        run["recipe"] = replace(recipe or AS_GIVEN, model_chosen=True)
    summary = train_run(chosen, out_dir, announce_resume=resumed, **run)
    return _with_record(folder, summary, record)


def _with_record(folder: RunDirectory, summary: dict[str, Any], record: dict[str, Any]) -> dict[str, Any]:
    """The summary with the record (written once): ``seconds`` then counts the candidates' too."""
    if "auto_tune" in summary:
        return summary
    public = {k: v for k, v in record.items() if k not in ("base", "options")}
    summary = {**summary, "seconds": round(summary["seconds"] + record.get("seconds", 0.0), 2), "auto_tune": public}
    write_json_atomic(folder.summary_path, summary)
    return summary


def _base_name(recipe: AppliedRecipe | None) -> str:
    if recipe is None or recipe is AS_GIVEN:
        return "the options given"
    # named <dataset chosen on>/<method>; None: no recipe
    return f"{recipe.name.split('/')[0]}'s recipe" if recipe.name else "the library's defaults"


__all__ = [
    "AUTO_TUNE_FILE",
    "auto_tuned_run",
    "beyond_the_edge",
    "beyond_the_edges",
    "describe_choice",
    "kept_steps",
    "plan_candidates",
]
