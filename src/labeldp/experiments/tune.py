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

import csv
import dataclasses
import functools
import itertools
import json
import math
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from tqdm.auto import tqdm

from labeldp.accounting import PrivacyLedger
from labeldp.data import LabeledDataset
from labeldp.dpsgd.selection import SELECTION_DEFAULTS, Selected, SelectionCandidate, format_selection, select_dpsgd
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.experiments.sweep import _RUN_FIELDS, _TRAIN_FIELDS, _parse_value
from labeldp.accounting.rounding import format_epsilon
from labeldp.evaluation import describe_test_metrics
from labeldp.files import write_atomic, write_json_atomic
from labeldp.boundary import PrivateLabels
from labeldp.randomness import public_rng
from labeldp.released_metrics import clean_accuracy_terms
from labeldp.boundary import Release
from labeldp.runs.config import RunConfig, split_stages
from labeldp.runs.context import RunContext, initial_model, release_inputs
from labeldp.runs.rundir import RunDirectory
from labeldp.runs.run import _accept_changed_config, check_plan, config_dataset, data_facts, train_run
from labeldp.training.stage import predict_proba, resolve_device

TUNE_FILE = "tune.json"
TUNE_TABLE = "tune.csv"
CANDIDATES_FOLDER = "candidates"
DEFAULT_HOLDOUT = 0.2
#: the share of held-out releases that do not depend on their label above which a tune warns
UNINFORMATIVE_WARNING = 0.5
#: DP-SGD's settings a tune may try (the clipping bound, the EMA; not the noise, which it calibrates)
_DPSGD_FIELDS = {f.name for f in dataclasses.fields(RunConfig().dpsgd)} - _RUN_FIELDS - _TRAIN_FIELDS - {"noise_multiplier"}
#: options named by their command-line flag where it differs from the field (mixup: mixup_alpha)
_FLAG_NAMES = {f.metadata["flag"].lstrip("-").replace("-", "_"): f.name
               for cls in (RunConfig, type(RunConfig().train), type(RunConfig().dpsgd))
               for f in dataclasses.fields(cls)
               if f.metadata.get("flag")}
_TABLE_COLUMNS = ("key", "estimated_clean_accuracy", "standard_error", "difference", "difference_error", "held_out",
                  "seconds", "chosen")


def candidate_options(grid: Mapping[str, Sequence[Any]], *, trials: int | None = None,
                      seed: int = 0) -> list[dict[str, Any]]:
    """The candidates' options: every combination of ``grid``'s values (names are fields of RunConfig
    or TrainConfig, values typed or as in ``labeldp sweep --grid``: ``0.01``, ``true``, ``0.3:0.7``),
    or, with ``trials``, that many of the combinations drawn without replacement from the public
    stream ``tune-search`` of ``seed`` (a random search)."""
    if not grid:
        raise ConfigError("the tuning grid is empty: give options with values to try, e.g. lr=0.01,0.03")
    grid = {_FLAG_NAMES.get(name, name): values for name, values in grid.items()}
    unknown = sorted(set(grid) - _RUN_FIELDS - _TRAIN_FIELDS - _DPSGD_FIELDS)
    if unknown:
        raise ConfigError(f"unknown tuning options {unknown}; use fields of RunConfig, TrainConfig or DPSGDConfig")
    types = ({f.name: str(f.type) for f in dataclasses.fields(RunConfig)}
             | {f.name: str(f.type) for f in dataclasses.fields(RunConfig().dpsgd)}
             | {f.name: str(f.type) for f in dataclasses.fields(RunConfig().train)})
    values: dict[str, list[Any]] = {}
    for name, given in grid.items():
        given = [given] if isinstance(given, (str, int, float, bool)) or given is None else list(given)
        if not given:
            raise ConfigError(f"tuning option {name!r} has no values")
        parsed = [_parse_value(name, v, types[name]) if isinstance(v, str) else v for v in given]
        values[name] = list(dict.fromkeys(tuple(v) if isinstance(v, list) else v for v in parsed))
    combinations = [dict(zip(values, chosen)) for chosen in itertools.product(*values.values())]
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise ConfigError(f"trials must be a positive integer, got {trials!r}")
        if trials < len(combinations):
            picked = public_rng(seed, "tune-search").choice(len(combinations), trials, replace=False)
            combinations = [combinations[i] for i in sorted(picked)]
    if len(combinations) < 2:
        raise ConfigError("tuning needs at least two candidates (give some option two or more values)")
    return combinations


def candidate_key(options: Mapping[str, Any]) -> str:
    """A candidate's name, also its folder: ``lr=0.01,epochs=10``."""
    def text(value: Any) -> str:
        return ":".join(map(str, value)) if isinstance(value, tuple) else str(value)
    return ",".join(f"{name}={text(value)}" for name, value in options.items())


def candidate_config(base: RunConfig, options: Mapping[str, Any]) -> RunConfig:
    """``base`` with a candidate's options, resolved (every error before any spend)."""
    run_part = {k: v for k, v in options.items() if k in _RUN_FIELDS}
    train_part = {k: v for k, v in options.items() if k in _TRAIN_FIELDS}
    dpsgd_part = {k: v for k, v in options.items() if k in _DPSGD_FIELDS}
    try:
        config = dataclasses.replace(base, **run_part, train=dataclasses.replace(base.train, **train_part),
                                     dpsgd=dataclasses.replace(base.dpsgd, **dpsgd_part))
    except TypeError as error:
        raise ConfigError(f"candidate {candidate_key(options)}: {error}") from None
    try:
        return config.resolved()
    except ConfigError as error:
        raise ConfigError(f"candidate {candidate_key(options)}: {error}") from None


def _flat(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def check_tunable(base: RunConfig, candidates: Sequence[RunConfig],
                  data: LabeledDataset | None = None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Refuse, before any spend, a tune whose candidates would need releases of their own. Returns
    ``(shared, later)``: the releases every candidate shares, and those drawn after the first stage
    with its model as their prior, which depend on the options tried (empty unless the candidates
    vary only ``Method.first_stage_options``: they are then scored on the first stage's model, and
    the later releases are drawn once, by the final run)."""
    method = base.method_spec
    if method.training_releases and base.method != "dp-sgd":
        raise ConfigError(f"method {base.method!r} releases through its training steps: every candidate would be a "
                          "new release, and tune's private selection is implemented for dp-sgd only")
    if base.method == "pate":
        raise ConfigError("method 'pate' releases labels only for the student's queries: held-out training examples "
                          "have no released label to score candidates on, so tune does not take it")
    if method.releases is None:
        raise ConfigError(f"method {base.method!r} does not declare its releases (Method.releases): tune cannot check "
                          "that its candidates share them")
    if base.label_range is not None or (data is not None and data.is_regression):
        raise ConfigError("tune scores candidates by their estimated clean accuracy over classes; numeric labels "
                          "(a regression) are not supported yet")
    names = method.releases(base)
    for candidate in candidates:
        if candidate.method != base.method or method.releases(candidate) != names:
            raise ConfigError("every candidate must run the same method with the same releases; tune the training "
                              "options of one method")
    for position, name in enumerate(names):
        changed = sorted({key for candidate in candidates for key in _changed(release_inputs(base, name),
                                                                              release_inputs(candidate, name))})
        if not changed:
            continue
        shared, later = names[:position], names[position:]
        if "stage1" in shared and method.first_stage_options:
            varied = sorted({key for candidate in candidates[1:]
                             for key in _changed(candidates[0].to_dict(), candidate.to_dict())})
            after = [key for key in varied if key.split(".")[0] not in method.first_stage_options]
            if not after:
                return shared, later
            apart = [key for key in after if all(key in method.independent_of.get(n, ()) for n in later)]
            if apart == after:
                raise ConfigError(
                    f"method {base.method!r}: release {name!r} depends on {', '.join(changed)}, so these options are "
                    f"chosen on the first stage's release, by the first stage's model; {', '.join(after)} act only "
                    "after every release and cannot be told apart there. Tune them in a tune of their own")
            changed = [key for key in after if key not in apart]
            raise ConfigError(f"method {base.method!r}: its later releases ({', '.join(later)}) depend on "
                              f"{', '.join(changed)}, which the first stage's model cannot tell apart: each candidate "
                              "would need releases of its own (a new spend)")
        free = method.independent_of.get(name, ())
        can = (f"it does not depend on {', '.join(free)}" if free
               else "it depends on every option (drawn after training, from a model trained with them)")
        raise ConfigError(f"method {base.method!r}: release {name!r} depends on {', '.join(changed)}, so "
                          f"each candidate would need a release of its own (a new spend); {can}. Tune options "
                          "that act only after every release (e.g. the training options of lp-1st or alibi)")
    return names, ()


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The flattened names (``train.lr``) whose values differ between two configuration dictionaries."""
    old, new = _flat(old), _flat(new)
    return [key for key in set(old) | set(new) if old.get(key) != new.get(key)]


def holdout_split(num_examples: int, fraction: float, seed: int) -> np.ndarray:
    """The held-out training examples, sorted: ``fraction`` of them, from the public stream
    ``tune-holdout`` of ``seed`` (positions only, never labels)."""
    if isinstance(fraction, bool) or not 0 < fraction < 1:
        raise ConfigError(f"holdout must lie in (0, 1), got {fraction!r}")
    size = int(round(fraction * num_examples))
    if not 2 <= size < num_examples:
        raise ConfigError(f"holdout {fraction:g} of {num_examples} training examples leaves "
                          f"{'fewer than two to score on' if size < 2 else 'none to train on'}")
    return np.sort(public_rng(seed, "tune-holdout").permutation(num_examples)[:size])


class _Released(Exception):
    """The method asked to train: every release before training has been made."""


class _FirstStageTrained(Exception):
    """A candidate asked for a release drawn after its first stage (scored on that stage's model)."""


class _ReleaseContext(RunContext):
    """Runs a method until every release ``names`` is drawn, saved and recorded: a release drawn after
    training (LP-2ST's second stage, with the first stage's model as its prior) trains before it as
    the run would."""

    def __init__(self, *args: Any, names: tuple[str, ...], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.names = names

    def train(self, *args: Any, **kwargs: Any) -> None:
        if all(self.out.load_release(name) is not None for name in self.names):
            raise _Released
        super().train(*args, **kwargs)


class _CandidateContext(RunContext):
    """One candidate: reads the tune's releases (never draws), trains without the held-out examples,
    and evaluates no epoch on the test set. Where the releases ``later`` than the first stage depend
    on the candidate's options, it stops when it would need one: its first stage's model is scored."""

    def __init__(self, config: RunConfig, out: RunDirectory, data: LabeledDataset, device, releases: dict[str, Release],
                 held_out: np.ndarray, later: tuple[str, ...]):
        super().__init__(config, out, data, device, progress=False)
        self.releases, self.held_out, self.later = releases, held_out, later
        self.trained = None

    def spend(self, name, draw) -> Release:
        if name in self.later:
            raise _FirstStageTrained
        if name not in self.releases:
            raise RunDirectoryError(f"a tuning candidate asked for release {name!r}, which the tune did not make: it "
                                    "would be a second spend")
        return self.releases[name]

    def will_draw(self, name: str) -> bool:
        if name in self.later:  # before the prior's inference that only the draw needs
            raise _FirstStageTrained
        return False

    def saved_release(self, name: str) -> Release:
        return self.spend(name, None)

    def train(self, model, *args: Any, **kwargs: Any) -> None:
        super().train(model, *args, **kwargs)
        self.trained = model

    def training_part(self, indices: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keep = ~np.isin(indices, self.held_out)
        return indices[keep], targets[keep]

    def evaluation_set(self) -> None:
        return None


def sealed(data: LabeledDataset) -> LabeledDataset:
    """``data`` with its true training labels withheld (nothing, not even the boundary, can read them):
    what candidates train with."""
    return dataclasses.replace(data, y_train=PrivateLabels.withheld(len(data.y_train), data.num_classes))


class HeldOutScorer:
    """Estimates a model's clean accuracy on the held-out examples from their releases alone."""

    def __init__(self, releases: Mapping[str, Release], held_out: np.ndarray, num_examples: int, num_classes: int):
        labels = np.full(num_examples, -1, dtype=np.int64)
        likelihood = np.full((num_examples, num_classes), np.nan)
        vectors = np.full((num_examples, num_classes), np.nan)
        for release in releases.values():
            if release.labels is None or release.likelihood is None:
                continue  # a histogram, not a label release
            members = np.asarray(release.members)
            labels[members], likelihood[members] = release.labels, release.likelihood
            if "noisy_one_hot" in release.arrays:  # ALIBI: the noisy vector itself
                vectors[members] = release.arrays["noisy_one_hot"]
        missing = held_out[labels[held_out] < 0]
        if missing.size:
            raise ConfigError(f"{missing.size} held-out examples have no released label to be scored on")
        self.held_out = held_out
        self.labels, self.likelihood, self.vectors = labels[held_out], likelihood[held_out], vectors[held_out]
        self.alibi = ~np.isnan(self.vectors[:, 0])
        #: the share of held-out examples whose release does not depend on their label (RR-with-prior with
        #: k = 1: the prior's top class whatever the label); their terms measure agreement with the prior
        rows = self.likelihood[~self.alibi]
        self.uninformative = float(np.mean(np.ptp(rows, axis=1) < 1e-12)) if rows.size else 0.0

    def terms(self, predictions: np.ndarray) -> np.ndarray:
        """Per held-out example, a term whose expectation is its clean-label indicator 1[y = prediction]
        (RR-with-prior: when y lies in the example's top-k set; see clean_accuracy_terms)."""
        rows = np.arange(predictions.size)
        terms = np.zeros(predictions.size)
        channel = ~self.alibi
        if channel.any():
            terms[channel] = clean_accuracy_terms(predictions[channel], self.labels[channel], self.likelihood[channel])
        terms[self.alibi] = self.vectors[rows[self.alibi], predictions[self.alibi]]
        return terms

    def score(self, model, inputs: np.ndarray, batch_size: int) -> np.ndarray:
        """The per-example terms of ``model``'s clean accuracy on the held-out ``inputs``: their mean
        estimates it, their spread gives its standard error (:func:`mean_and_error`)."""
        return self.terms(predict_proba(model, inputs, batch_size=batch_size).argmax(axis=1))


def mean_and_error(terms: np.ndarray) -> tuple[float, float]:
    """The mean of per-example terms and its standard error."""
    terms = np.asarray(terms, dtype=np.float64)
    return float(terms.mean()), float(terms.std(ddof=1) / math.sqrt(terms.size))


def _release_once(config: RunConfig, out: RunDirectory, data: LabeledDataset, device, progress: bool,
                  in_memory: bool, names: tuple[str, ...]) -> dict[str, Release]:
    """Run the method in ``out`` until the releases ``names`` are made; returns them (as saved).

    A folder whose final run was interrupted after it drew later releases (under the chosen options,
    which its config.json holds) is left as it is: the shared releases are read back, and the final
    run continues it."""
    with out.lock():
        saved = out.read_config()
        inputs = out.release_inputs()
        if saved is not None and set(inputs) - set(names):
            stale = [name for name in names if inputs.get(name) != release_inputs(config, name)]
            if stale:
                raise RunDirectoryError(f"{out.root} holds releases {', '.join(stale)} of another configuration: "
                                        "choose another folder for the tune (a new release)")
            return {name: Release.from_arrays(out.load_release(name)) for name in names}
        if saved is not None:
            _accept_changed_config(saved, config, out, progress)
        out.create()
        out.write_config(config.to_dict())
        write_json_atomic(out.data_path, data_facts(data, in_memory=in_memory))
        try:
            config.method_spec.run(_ReleaseContext(config, out, data, device, progress, names=names))
        except _Released:
            pass
        missing = [name for name in names if out.load_release(name) is None]
        if missing:
            raise RunDirectoryError(f"method {config.method!r} did not make its releases {', '.join(missing)} before "
                                    "training: tune cannot share them between candidates")
        return {name: Release.from_arrays(out.load_release(name)) for name in names}


def _run_candidate(config: RunConfig, options: dict[str, Any], folder: RunDirectory, data: LabeledDataset, device,
                   releases: dict[str, Release], held_out: np.ndarray, scorer: HeldOutScorer,
                   later: tuple[str, ...]) -> dict[str, Any]:
    """Train one candidate on the released labels of the examples not held out (up to its first stage
    when releases ``later`` depend on its options) and score it; a candidate scored before under the
    same configuration is read back."""
    result_path = folder.root / "result.json"
    if result_path.exists():
        saved = json.loads(result_path.read_text())
        if (saved.get("config") == config.to_dict() and saved.get("held_out") == int(held_out.size)
                and len(saved.get("terms", ())) == held_out.size):
            return saved
    with folder.lock():
        previous = folder.read_config()
        if previous is not None and previous != config.to_dict():
            folder.discard_training()
        (folder.root / "checkpoints").mkdir(exist_ok=True)
        folder.write_config(config.to_dict())
        context = _CandidateContext(config, folder, data, device, releases, held_out, later)
        try:
            model, _ = config.method_spec.run(context)
        except _FirstStageTrained:
            model = context.trained
        terms = scorer.score(model, data.x_train[held_out], config.train.eval_batch_size)
        estimate, error = mean_and_error(terms)
        result = {"key": candidate_key(options), "options": _jsonable(options), "estimated_clean_accuracy": estimate,
                  "standard_error": error, "held_out": int(held_out.size), "seconds": round(context.seconds(), 2),
                  "config": config.to_dict(), "terms": terms.tolist()}
        write_json_atomic(result_path, result)
        return result


def _uninformative_message(share: float) -> str:
    return (f"warning: {100 * share:.0f}% of the held-out examples were released with k = 1 (the prior's top "
            "class, whatever their label): their estimate measures how well a candidate agrees with the prior, "
            "not its clean accuracy")


def _labelled(releases: Mapping[str, Release], num_examples: int) -> np.ndarray:
    """The training examples (sorted positions) that ``releases`` released a label of."""
    labelled = np.zeros(num_examples, dtype=bool)
    for release in releases.values():
        if release.labels is not None:
            labelled[np.asarray(release.members)] = True
    return np.flatnonzero(labelled)


def _jsonable(options: Mapping[str, Any]) -> dict[str, Any]:
    return {name: list(value) if isinstance(value, tuple) else value for name, value in options.items()}


def _select_dpsgd(base: RunConfig, candidates: Sequence[RunConfig], options: Sequence[Mapping[str, Any]],
                  out: str | Path, *, holdout: float, device: str, progress: bool, dataset: LabeledDataset | None,
                  settings: Mapping[str, float]) -> dict[str, Any]:
    """Tune DP-SGD by private selection (:func:`labeldp.dpsgd.selection.select_dpsgd`, with ``settings``
    over :data:`~labeldp.dpsgd.selection.SELECTION_DEFAULTS`): the tune folder is the chosen trial's
    run folder (config.json, data.json, ledger.json, model.pt, summary.json) with ``tune.json``, all
    written once the trials are over. A finished selection is read back; everything the run's
    configuration can refuse is refused before the spend."""
    settings = {name: float(value) for name, value in {**SELECTION_DEFAULTS, **settings}.items()}
    keys = [candidate_key(chosen) for chosen in options]
    record = {"base": base.to_dict(), "candidates": keys, "holdout": holdout, "search": "private selection",
              **settings}
    done = _finished(RunDirectory(out), record)
    if done is not None:
        return done
    _check_selection_candidates(base, candidates)
    data = dataset if dataset is not None else config_dataset(base)
    torch_device = resolve_device(device)
    for candidate in candidates:
        check_plan(candidate, data, torch_device)
    trials = [SelectionCandidate(candidate.train, candidate.dpsgd,
                                 functools.partial(initial_model, candidate, data, 1, torch_device))
              for candidate in candidates]
    write = functools.partial(_write_selection, base=base, candidates=candidates, options=options, record=record,
                              data=data, device=torch_device, in_memory=dataset is not None, progress=progress)
    return select_dpsgd(trials, data, out, write, epsilon=base.epsilon, delta=base.delta, noise=base.noise,
                        seed=base.seed, holdout=holdout, progress=progress, **settings)


def _check_selection_candidates(base: RunConfig, candidates: Sequence[RunConfig]) -> None:
    """Refuse candidates that vary more than training and clipping options (the budget, the noise and the
    data are the selection's own), and a given noise multiplier (the selection calibrates its own)."""
    if base.dpsgd.noise_multiplier is not None:
        raise ConfigError("tune calibrates DP-SGD's noise multiplier to the whole selection: leave --noise-multiplier "
                          "out")
    for candidate in candidates:
        differs = sorted(name for name in _RUN_FIELDS - {"dpsgd"} if getattr(candidate, name) != getattr(base, name))
        if candidate.dpsgd.noise_multiplier != base.dpsgd.noise_multiplier:
            differs.append("noise_multiplier")
        if differs:
            raise ConfigError(f"a private selection's candidates may vary training and clipping options only, not "
                              f"{', '.join(differs)}: the budget, the noise and the data are the selection's own")


def _write_selection(root: Path, ledger: PrivacyLedger, selected: Selected, *, base: RunConfig,
                     candidates: Sequence[RunConfig], options: Sequence[Mapping[str, Any]], record: dict[str, Any],
                     data: LabeledDataset, device, in_memory: bool, progress: bool) -> dict[str, Any]:
    """Write a private selection's tune folder into ``root``: the chosen trial's run folder and
    ``tune.json``. Its summary has no duration (``seconds`` null): the trials' would tell their number."""
    chosen, plan = candidates[selected.index], selected.plan
    folder = RunDirectory(root)
    folder.write_config(chosen.to_dict())
    write_json_atomic(folder.data_path, data_facts(data, in_memory=in_memory))
    ledger.save(folder.ledger_path, base.delta)
    key = record["candidates"][selected.index]
    facts = {"seconds": None, "noise_multiplier": plan.noise_multiplier,
             "sampling_probability": plan.sampling_probability, "steps": plan.steps,
             "selection": {"chosen": key, "noisy_held_out_accuracy": selected.noisy_accuracy,
                           "held_out": int(plan.held_out.size), "mean": plan.mean, "shape": plan.shape,
                           "score_noise": plan.score_noise}}
    summary = RunContext(chosen, folder, data, device, progress).finish(selected.model, facts)
    outcome = {**record, "method": base.method, "dataset": base.dataset, "epsilon": base.epsilon,
               "delta": base.delta, "noise_multiplier": plan.noise_multiplier, "held_out": int(plan.held_out.size),
               "num_train": int(len(data.y_train)), "chosen": key,
               "chosen_options": _jsonable(options[selected.index]),
               "noisy_held_out_accuracy": selected.noisy_accuracy,
               "ledger_epsilon": math.ceil(ledger.epsilon(base.delta) * 1e6) / 1e6, "final": summary}
    write_json_atomic(folder.root / TUNE_FILE, outcome)
    return outcome


def tune(config: RunConfig, grid: Mapping[str, Sequence[Any]], out: str | Path, *, holdout: float = DEFAULT_HOLDOUT,
         trials: int | None = None, device: str = "auto", progress: bool = True,
         dataset: LabeledDataset | None = None, selection: Mapping[str, float] | None = None) -> dict[str, Any]:
    """Tune ``config``'s training options over ``grid`` on one release of the labels; the tune folder
    ``out`` ends as the run of the best candidate (see the module docstring). Returns what
    ``tune.json`` holds: the candidates with their estimated clean accuracy and its standard error
    on the held-out released labels, the chosen key, and the final run's summary. ``dp-sgd``, whose
    steps are its release, is tuned by private selection instead (:mod:`labeldp.dpsgd.selection`,
    with the settings ``selection``: ``mean``, ``shape``, ``score_noise``)."""
    base = config.resolved()
    options = candidate_options(grid, trials=trials, seed=base.seed)
    candidates = [candidate_config(base, chosen) for chosen in options]
    keys = [candidate_key(chosen) for chosen in options]
    unknown = sorted(set(selection or {}) - set(SELECTION_DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown selection settings {unknown}; known: {', '.join(SELECTION_DEFAULTS)}")
    if base.method_spec.training_releases and base.method == "dp-sgd":
        return _select_dpsgd(base, candidates, options, out, holdout=holdout, device=device, progress=progress,
                             dataset=dataset, settings=selection or {})
    if selection:
        raise ConfigError("the selection's settings (mean number of trials, shape, score noise) apply to dp-sgd only: "
                          f"method {base.method!r} is tuned on one release of its labels")
    check_tunable(base, candidates)
    data = dataset if dataset is not None else config_dataset(base)
    names, later = check_tunable(base, candidates, data)
    torch_device = resolve_device(device)
    for candidate in candidates:
        check_plan(candidate, data, torch_device)
    # scored on the first stage's examples when later releases depend on the options (sizes: public)
    scored = len(split_stages(len(data.y_train), base.stages, base.seed)[0]) if later else len(data.y_train)
    holdout_split(scored, holdout, base.seed)  # its refusals, before any spend
    folder = RunDirectory(out)
    record = {"base": base.to_dict(), "candidates": keys, "holdout": holdout,
              "search": "random" if trials is not None else "grid"}
    done = _finished(folder, record)
    if done is not None:
        return done

    releases = _release_once(base, folder, data, torch_device, progress, dataset is not None, names)
    labelled = _labelled(releases, len(data.y_train))
    held_out = labelled[holdout_split(labelled.size, holdout, base.seed)]
    scorer = HeldOutScorer(releases, held_out, len(data.y_train), data.num_classes)
    if scorer.uninformative > UNINFORMATIVE_WARNING:
        warnings.warn(_uninformative_message(scorer.uninformative), UserWarning, stacklevel=2)
    blind = sealed(data)
    results = []
    bar = tqdm(total=len(candidates), desc="tune", unit="candidate", disable=None if progress else True)
    for key, chosen, candidate in zip(keys, options, candidates):
        bar.set_postfix_str(key)
        results.append(_run_candidate(candidate, chosen, RunDirectory(folder.root / CANDIDATES_FOLDER / key), blind,
                                      torch_device, releases, held_out, scorer, later))
        bar.update()
    bar.close()
    best = max(range(len(results)), key=lambda i: (results[i]["estimated_clean_accuracy"], -i))
    for result in results:  # paired on the same held-out releases: their shared noise cancels
        result["difference"], result["difference_error"] = mean_and_error(
            np.subtract(result["terms"], results[best]["terms"]))
    if progress:
        then = f"; its run draws {', '.join(later)}" if later else ""
        tqdm.write(f"best candidate {keys[best]}: estimated clean accuracy "
                   f"{results[best]['estimated_clean_accuracy']:.4f} +- {results[best]['standard_error']:.4f}; "
                   f"training it on every released label{then}")
    summary = train_run(candidates[best], folder.root, device=device, progress=progress, dataset=dataset)
    outcome = {**record, "method": base.method, "dataset": base.dataset, "epsilon": base.epsilon,
               "releases": list(names + later),
               "scored_on": [name for name in names if releases[name].labels is not None] if later else None,
               "held_out": int(held_out.size), "uninformative_share": scorer.uninformative,
               "num_train": int(len(data.y_train)),
               "results": [{k: v for k, v in r.items() if k not in ("config", "terms")} for r in results],
               "chosen": keys[best], "chosen_options": _jsonable(options[best]),
               "ledger_epsilon": summary.get("epsilon"), "final": summary}
    write_json_atomic(folder.root / TUNE_FILE, outcome)
    _write_table(outcome, folder.root / TUNE_TABLE)
    return outcome


def _finished(folder: RunDirectory, record: dict[str, Any]) -> dict[str, Any] | None:
    """The saved outcome of the same tune, finished; a different tune's finished folder is refused."""
    path = folder.root / TUNE_FILE
    if not path.exists():
        if folder.read_summary() is not None:
            raise RunDirectoryError(f"{folder.root} holds a finished run: choose another folder for the tune")
        return None
    saved = json.loads(path.read_text())
    if all(saved.get(name) == value for name, value in record.items()):
        return saved
    raise RunDirectoryError(f"{folder.root} holds a finished tune of other candidates or another configuration; "
                            "choose another folder (a new release)")


def _write_table(outcome: dict[str, Any], path: Path) -> None:
    def write(tmp: Path) -> None:
        with open(tmp, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=_TABLE_COLUMNS)
            writer.writeheader()
            for row in outcome["results"]:
                writer.writerow({**{name: row[name] for name in _TABLE_COLUMNS[:-1]},
                                 "chosen": row["key"] == outcome["chosen"]})

    write_atomic(path, write)


def format_tune(outcome: dict[str, Any]) -> str:
    """The candidates as a table, best marked, then the final run and its ledger."""
    if outcome.get("search") == "private selection":
        return format_selection(outcome)
    width = max(len("candidate"), *(len(r["key"]) for r in outcome["results"]))
    lines = [f"{'candidate':<{width}}  estimated clean accuracy   minus the chosen's (same releases)",
             f"{'-' * width}  {'-' * 24}   {'-' * 35}"]
    for row in outcome["results"]:
        if row["key"] == outcome["chosen"]:
            versus = "chosen"
        else:
            versus = f"{100 * row['difference']:+6.2f} +- {100 * row['difference_error']:5.2f}"
        lines.append(f"{row['key']:<{width}}  {100 * row['estimated_clean_accuracy']:6.2f}% +- "
                     f"{100 * row['standard_error']:5.2f}        {versus}")
    lines.append("(percentage points +- one standard error, on the held-out examples' released labels)")
    if outcome.get("scored_on"):
        later = [name for name in outcome["releases"] if name not in outcome["scored_on"]]
        lines.append(f"(each candidate's first-stage model, scored on {', '.join(outcome['scored_on'])}; the later "
                     f"releases ({', '.join(later)}) depend on the options: drawn once, by the final run)")
    if outcome.get("uninformative_share", 0.0) > UNINFORMATIVE_WARNING:
        lines.append(_uninformative_message(outcome["uninformative_share"]))
    final = outcome["final"]
    epsilon = format_epsilon(outcome["ledger_epsilon"])
    lines.append(f"\n{outcome['held_out']} of {outcome['num_train']} training examples held out; the final run "
                 f"({outcome['chosen']}) trained on every released label: {describe_test_metrics(final)}; the tune "
                 f"folder's ledger: epsilon {epsilon} (one run's releases: {', '.join(outcome['releases'])})")
    return "\n".join(lines)


__all__ = ["DEFAULT_HOLDOUT", "HeldOutScorer", "candidate_config", "candidate_key", "candidate_options",
           "check_tunable", "mean_and_error", "format_tune", "holdout_split", "sealed", "tune"]
