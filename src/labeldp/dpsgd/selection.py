"""Private selection of DP-SGD's training options (Papernot & Steinke 2022).

A secret random number of trials (:func:`draw_trials`), each DP-SGD
(:func:`~labeldp.dpsgd.trainer.train_dpsgd`) with a candidate drawn at random, trained on the
examples not held out and scored by its held-out count of correct predictions plus
N(0, ``score_noise``^2); only the best trial leaves the mechanism: its candidate, its model and its
noisy score (:class:`Selected`).

Privacy: (epsilon, delta)-DP for add-or-remove-one-example neighbours, where epsilon is what
dp_accounting's RDP accountant gives for the one ``RepeatAndSelectDpEvent`` the ledger records
(each trial: the DP-SGD steps composed with the Gaussian count of sensitivity 1, both charged to
every example), the noise multiplier being calibrated so that the whole selection meets the budget.
It assumes:

- Datasets are ordered and an added example is appended: its position is its id. Each example is
  held out by a public coin of its own position (:func:`holdout_coins`), so adding one changes no
  other example's assignment: neighbouring datasets give neighbouring training sets and
  neighbouring held-out sets.
- The number of training examples n is public, as in every DP-SGD implementation (whose sampling
  rate is q = batch / n): the number held out, the sampling rate and the number of steps are
  functions of n and the seed, and are written.
- The number of trials, the batches and all noise come from the noise source and are never saved
  or shown, nor are the trials other than the chosen one. Nothing written tells how long the trials
  took (which would tell their number): the selection's working files (its ledger, recorded before
  the first trial, so that an interrupted selection stays accounted) are kept in a scratch folder
  beside the output, ``.OUT.selection/`` (owner only), and every file of the output is written
  after the last trial, into a folder renamed into place as ``OUT``; the scratch folder is then
  removed. (Whoever watches the command run sees its duration.)
"""

from __future__ import annotations

import math
import os
import shutil
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from dp_accounting import dp_event
from torch import nn
from tqdm.auto import tqdm

from labeldp.accounting import DPSGD_RELATION, PrivacyLedger
from labeldp.accounting.calibration import calibrate_selection_noise, selection_trial_event
from labeldp.accounting.events import selection_event
from labeldp.accounting.rounding import format_epsilon
from labeldp.boundary import unseal
from labeldp.config.train import TrainConfig
from labeldp.config.tuning import SELECTION_DEFAULTS
from labeldp.data import LabeledDataset
from labeldp.dpsgd.trainer import DPSGDConfig, sampling_plan, train_dpsgd
from labeldp.errors import ConfigError, InsecureNoiseWarning, RunDirectoryError
from labeldp.evaluation import describe_test_metrics
from labeldp.files import exclusive_lock
from labeldp.randomness import NoiseSource, public_rng
from labeldp.training.predict import predict_proba

#: the recorded ledger's name in the scratch folder
SCRATCH_LEDGER = "ledger.json"


def draw_trials(rng, mean: float, shape: float) -> int:
    """The number of trials of a private selection, from the noise generator ``rng`` (never saved or shown):
    Poisson(``mean``) for ``shape`` inf, else the truncated negative binomial of Papernot & Steinke (2022)
    whose mean is ``mean`` (shape 1: geometric on 1, 2, ...), P[k] proportional to C(k + shape - 1, k)
    (1 - gamma)^k for k >= 1.

    Parameters
    ----------
    rng : numpy.random.Generator or labeldp.randomness.SecureGenerator
        The selection's noise generator (one uniform is drawn from it).
    mean : float
        The mean number of trials.
    shape : float
        The distribution's shape, > 0 (inf: Poisson, 1: geometric).

    Returns
    -------
    int
        The number of trials: >= 1 for a finite shape, possibly 0 for Poisson.
    """
    from dp_accounting.rdp.rdp_privacy_accountant import _gamma_truncated_negative_binomial

    if math.isinf(shape):  # inverse CDF of Poisson(mean), each term from its logarithm: exp(-mean) underflows
        u, k = float(rng.random()), 0  # from mean ~745 on, and a running product would stay 0
        log_mean = math.log(mean) if mean > 0 else -math.inf
        total = math.exp(-mean)
        while u > total:
            k += 1
            term = math.exp(k * log_mean - mean - math.lgamma(k + 1))
            total += term
            if term == 0.0 and k > mean:  # past the upper tail: u is above what the sum reaches in floats
                break
        return k
    gamma = _gamma_truncated_negative_binomial(shape, mean)
    u = float(rng.random())  # inverse CDF over k >= 1
    k = 1
    probability = shape * gamma**shape * (1 - gamma) / (1 - gamma**shape)  # P[1]
    total = probability
    while u > total and probability > 0:
        probability *= (k + shape) / (k + 1) * (1 - gamma)  # P[k + 1] / P[k]
        k += 1
        total += probability
    return k


def holdout_coins(num_examples: int, fraction: float, seed: int) -> np.ndarray:
    """Which training examples a private selection holds out (a boolean mask): example i when the i-th
    uniform of the public stream ``tune-holdout`` of ``seed`` is below ``fraction``.

    The first n uniforms of a stream do not depend on how many are drawn, so an example's coin depends
    on its position alone: appending an example (the add-or-remove convention of this module) changes
    no other example's assignment. The number held out is Binomial(n, ``fraction``), a function of the
    public n and seed.

    Parameters
    ----------
    num_examples : int
        n, the number of training examples.
    fraction : float
        The probability of each example being held out, in (0, 1).
    seed : int
        The public seed.

    Returns
    -------
    numpy.ndarray
        (n,) bool mask, True for the examples held out.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``fraction`` is not a number in (0, 1).
    """
    if isinstance(fraction, bool) or not 0 < fraction < 1:
        raise ConfigError(f"holdout must lie in (0, 1), got {fraction!r}")
    return public_rng(seed, "tune-holdout").random(num_examples) < fraction


@dataclass(frozen=True)
class SelectionCandidate:
    """One candidate: DP-SGD's settings and a builder of its initial model (from public randomness only),
    called afresh for every trial that draws it.

    Parameters
    ----------
    train : labeldp.config.train.TrainConfig
        The training settings (all candidates share ``epochs`` and ``batch_size``, the sampling plan).
    dp : labeldp.config.dpsgd.DPSGDConfig
        The DP-SGD settings (clipping bound, clipping method, ...).
    new_model : callable
        ``new_model() -> torch.nn.Module``, a fresh initial model.
    """

    train: TrainConfig
    dp: DPSGDConfig
    new_model: Callable[[], nn.Module]


@dataclass(frozen=True)
class SelectionPlan:
    """What a selection fixes before it spends, from public facts (n, the seed, the settings) only: the
    held-out and kept positions (sorted), the trials' sampling rate and steps, and the noise multiplier
    calibrated to the whole selection.

    Parameters
    ----------
    held_out : numpy.ndarray
        The sorted positions of the examples held out to score the trials.
    kept : numpy.ndarray
        The sorted positions of the examples the trials train on.
    sampling_probability : float
        q, the Poisson sampling rate of each DP-SGD step.
    steps : int
        The number of DP-SGD steps of each trial.
    noise_multiplier : float
        sigma, DP-SGD's noise multiplier, calibrated so that the whole selection meets the budget.
    mean : float
        The mean number of trials.
    shape : float
        The shape of the distribution of the number of trials (inf: Poisson, 1: geometric).
    score_noise : float
        The standard deviation of the Gaussian noise on each trial's held-out count.
    """

    held_out: np.ndarray
    kept: np.ndarray
    sampling_probability: float
    steps: int
    noise_multiplier: float
    mean: float
    shape: float
    score_noise: float

    def event(self) -> dp_event.DpEvent:
        """The selection's one event: every trial's DP-SGD steps and noisy count, repeated and selected.

        Returns
        -------
        dp_accounting.dp_event.DpEvent
            A ``RepeatAndSelectDpEvent`` of the trial's composed DP-SGD and Gaussian events.
        """
        trial = selection_trial_event(self.noise_multiplier, self.sampling_probability, self.steps, self.score_noise)
        return selection_event(trial, self.mean, self.shape)

    def describe(self, candidates: int) -> str:
        """The plan in one line, for the ledger's record of the selection (public facts only).

        Parameters
        ----------
        candidates : int
            The number of candidates.

        Returns
        -------
        str
            The distribution of the number of trials, DP-SGD's noise multiplier, sampling rate and steps,
            and the score's noise.
        """
        trials = "Poisson" if math.isinf(self.shape) else f"truncated negative binomial (shape {self.shape:g})"
        return (
            f"private selection over {candidates} DP-SGD candidates: trials ~ {trials} with mean {self.mean:g}; "
            f"each DP-SGD (noise multiplier {self.noise_multiplier:.4f}, Poisson rate "
            f"{self.sampling_probability:.5g}, {self.steps} steps) and a held-out count with noise "
            f"{self.score_noise:g}"
        )


@dataclass(frozen=True)
class Selected:
    """What leaves the selection: the chosen candidate's index, its trial's model (on the CPU), its noisy
    held-out count of correct predictions, and the plan.

    Parameters
    ----------
    index : int
        The chosen candidate's position in the candidates.
    model : torch.nn.Module
        The chosen trial's model (its EMA when kept), on the CPU.
    noisy_count : float
        Its held-out count of correct predictions plus N(0, ``plan.score_noise``^2).
    plan : SelectionPlan
        The selection's plan.
    """

    index: int
    model: nn.Module
    noisy_count: float
    plan: SelectionPlan

    @property
    def noisy_accuracy(self) -> float:
        """The noisy held-out count divided by the number held out (noisy: it may lie outside [0, 1]).

        Returns
        -------
        float
            ``noisy_count / plan.held_out.size``.
        """
        return self.noisy_count / self.plan.held_out.size


#: Writes the output's files into the folder it is given (renamed into place as the output afterwards) from
#: the recorded ledger and what leaves the selection; returns the outcome.
WriteOutput = Callable[[Path, PrivacyLedger, Selected], dict[str, Any]]


def plan_selection(
    candidates: Sequence[SelectionCandidate],
    num_examples: int,
    *,
    epsilon: float,
    delta: float,
    seed: int,
    holdout: float,
    mean: float,
    shape: float,
    score_noise: float,
) -> SelectionPlan:
    """The selection's plan (:class:`SelectionPlan`); every refusal comes before any spend: fewer than two
    examples held out or none kept, candidates with different sampling plans, settings or a budget that
    cannot pay (:func:`~labeldp.accounting.calibration.calibrate_selection_noise`).

    It reads no label: the plan depends on n, the seed and the settings only.

    Parameters
    ----------
    candidates : sequence of SelectionCandidate
        The candidates (their sampling plans must agree).
    num_examples : int
        n, the number of training examples.
    epsilon : float
        The selection's target epsilon.
    delta : float
        The selection's target delta.
    seed : int
        The public seed of the held-out coins.
    holdout : float
        The probability of each example being held out, in (0, 1).
    mean : float
        The mean number of trials, a finite number > 1.
    shape : float
        The shape of the distribution of the number of trials, > 0 (inf: Poisson, 1: geometric).
    score_noise : float
        The standard deviation of the noise on each trial's held-out count, > 0.

    Returns
    -------
    SelectionPlan
        The plan, its noise multiplier calibrated to (``epsilon``, ``delta``).

    Raises
    ------
    labeldp.errors.ConfigError
        If there is no candidate, ``holdout`` is not in (0, 1) or holds out fewer than two examples or all of them, the
        candidates' sampling plans differ, a candidate's batch size exceeds the kept examples, an
        argument is out of range, or the budget cannot pay for the selection.
    """
    if not candidates:
        raise ConfigError("a private selection needs at least one candidate: give the grid some values")
    held = holdout_coins(num_examples, holdout, seed)
    held_out, kept = np.flatnonzero(held), np.flatnonzero(~held)
    if held_out.size < 2 or kept.size == 0:
        lack = "fewer than two to score on: raise it" if held_out.size < 2 else "none to train on: lower it"
        raise ConfigError(
            f"holdout {holdout:g} holds out {held_out.size} of {num_examples} training examples (a "
            f"public coin each, from the seed): {lack}"
        )
    plans = {sampling_plan(kept.size, candidate.train)[:2] for candidate in candidates}
    if len(plans) > 1:
        raise ConfigError(
            "dp-sgd candidates must share epochs and batch size (the sampling plan): the selection "
            "accounts every trial as one event; tune the learning rate, momentum, weight decay, "
            "clipping norm, ..."
        )
    ((q, steps),) = plans
    sigma = calibrate_selection_noise(epsilon, delta, q, steps, score_noise, mean, shape, tolerance=1e-2)
    return SelectionPlan(held_out, kept, q, steps, sigma, float(mean), float(shape), float(score_noise))


def scratch_folder(out: str | os.PathLike) -> Path:
    """The hidden folder beside ``out`` that holds a selection's working files while it runs.

    Parameters
    ----------
    out : str or os.PathLike
        The selection's output folder.

    Returns
    -------
    pathlib.Path
        ``.OUT.selection`` beside the resolved ``out``.
    """
    out = Path(out).resolve()
    return out.with_name(f".{out.name}.selection")


def _check_unspent(out: Path) -> None:
    """Refuse an output whose selection was recorded but did not finish (it cannot be resumed: its trials
    are gone) and an output folder that is not empty (the output is written whole, at the end)."""
    ledger = scratch_folder(out) / SCRATCH_LEDGER
    if ledger.exists():
        raise RunDirectoryError(
            f"{ledger} records the spend of a private selection for {out} that did not finish: "
            "its trials are not kept, so it cannot be resumed without spending again. Keep that "
            "ledger (it accounts for the spend) and start again in a new folder (a new spend, "
            "with its own ledger)"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise RunDirectoryError(
            f"{out} is in the way: a private selection writes its folder whole, once its trials "
            "are over; choose a new folder"
        )


def select_dpsgd(
    candidates: Sequence[SelectionCandidate],
    data: LabeledDataset,
    out: str | os.PathLike,
    write: WriteOutput,
    *,
    epsilon: float,
    delta: float,
    noise: NoiseSource,
    seed: int,
    holdout: float,
    mean: float = SELECTION_DEFAULTS["mean"],
    shape: float = SELECTION_DEFAULTS["shape"],
    score_noise: float = SELECTION_DEFAULTS["score_noise"],
    progress: bool = True,
) -> dict[str, Any]:
    """Select one of ``candidates`` privately on ``data`` (see the module docstring) and write the output
    folder ``out`` with ``write`` once the trials are over; returns what ``write`` returns.

    ``seed`` is public (the held-out coins, the augmentation); ``noise`` gives the number of trials, the
    draw of each trial's candidate, the batches and every noise. Every refusal comes before the spend;
    the ledger of the spend is recorded in the scratch folder before the first trial, and a selection
    interrupted after it is refused when repeated (:func:`scratch_folder` says where its ledger is).

    It reads the private training labels: the kept examples' inside each trial's DP-SGD, the held-out
    examples' for each trial's count of correct predictions, which is noised before it is compared.
    What it releases (to ``write``, and what is returned) is the chosen candidate's index, its trial's
    model and its noisy count, and the plan: (``epsilon``, ``delta``)-DP for add-or-remove-one-example
    neighbours under the assumptions of the module docstring, with the noise unpredictable only if
    ``noise`` is private (an insecure seed is warned about).

    Parameters
    ----------
    candidates : sequence of SelectionCandidate
        The candidates; each trial draws one at random.
    data : labeldp.data.LabeledDataset
        The dataset: public inputs, private training labels (the test set is not read here).
    out : str or os.PathLike
        The output folder: it must not exist or be empty, and is written whole once the trials are over.
    write : WriteOutput
        ``write(folder, ledger, selected) -> dict`` writes the output's files into ``folder`` (renamed
        into place as ``out``) from the recorded ledger and what leaves the selection.
    epsilon : float
        The selection's target epsilon.
    delta : float
        The selection's target delta.
    noise : labeldp.randomness.NoiseSource
        The source of the number of trials, each trial's candidate, the batches and every noise.
    seed : int
        The public seed (held-out coins, augmentation).
    holdout : float
        The probability of each training example being held out to score the trials, in (0, 1).
    mean : float, optional
        The mean number of trials (default ``SELECTION_DEFAULTS["mean"]``).
    shape : float, optional
        The shape of the distribution of the number of trials (default ``SELECTION_DEFAULTS["shape"]``).
    score_noise : float, optional
        The standard deviation of the noise on each held-out count (default
        ``SELECTION_DEFAULTS["score_noise"]``).
    progress : bool, optional
        Say that the trials run in secret (default True; the trials themselves show no progress).

    Returns
    -------
    dict
        What ``write`` returns.

    Raises
    ------
    labeldp.errors.ConfigError
        Every refusal of :func:`plan_selection`, before any spend.
    labeldp.errors.RunDirectoryError
        If ``out`` has an unfinished selection's ledger beside it or is not an empty folder (before the
        spend), or the selection drew no trial (after the spend, which stays recorded).
    labeldp.errors.RunLockedError
        If another process holds the selection's scratch folder.
    """
    out = Path(out).resolve()
    plan = plan_selection(
        candidates,
        len(data.y_train),
        epsilon=epsilon,
        delta=delta,
        seed=seed,
        holdout=holdout,
        mean=mean,
        shape=shape,
        score_noise=score_noise,
    )
    _check_unspent(out)
    if not noise.private:
        warnings.warn(f"the selection's noise is {noise.describe()}", InsecureNoiseWarning, stacklevel=3)
    scratch = scratch_folder(out)
    scratch.mkdir(mode=0o700, parents=True, exist_ok=True)
    scratch.chmod(0o700)
    with exclusive_lock(scratch / ".lock", f"the private selection of {out}"):
        _check_unspent(out)
        rng = noise.generator("tune-selection")
        trials = draw_trials(rng, plan.mean, plan.shape)  # drawn before the spend: it does not depend on the data
        ledger = PrivacyLedger(len(data.y_train), DPSGD_RELATION)
        ledger.record(plan.event(), np.ones(len(data.y_train), dtype=bool), plan.describe(len(candidates)), "selection")
        ledger.save(scratch / SCRATCH_LEDGER, delta)  # recorded before the first trial
        selected = _run_trials(candidates, plan, data, noise, seed, rng, trials, progress)
        if selected is None:
            raise RunDirectoryError(
                f"the selection drew no trial (a Poisson number of trials can be 0): nothing is "
                f"output; the spend is recorded in {scratch / SCRATCH_LEDGER}"
            )
        staging = scratch / "output"
        staging.mkdir()
        outcome = write(staging, ledger, selected)
        staging.rename(out)  # replaces an empty folder
        shutil.rmtree(scratch)
    return outcome


def _run_trials(
    candidates: Sequence[SelectionCandidate],
    plan: SelectionPlan,
    data: LabeledDataset,
    noise: NoiseSource,
    seed: int,
    rng,
    trials: int,
    progress: bool,
) -> Selected | None:
    """Run ``trials`` trials in memory (no file, no checkpoint) and keep the best; None if there are none."""
    if progress:
        tqdm.write("private selection: the trials run in secret (their number is part of the noise)")
    best = None
    for trial in range(trials):
        index = int(rng.integers(len(candidates)))
        trial_noise = (
            noise if noise.private else NoiseSource(insecure_seed=int(noise.seed("tune-selection", trial + 1)))
        )
        score, model = _trial(candidates[index], plan, data, trial_noise, seed, rng)
        if best is None or score > best.noisy_count:
            best = Selected(index, model.cpu(), score, plan)
    return best


def _trial(
    candidate: SelectionCandidate, plan: SelectionPlan, data: LabeledDataset, noise: NoiseSource, seed: int, rng
) -> tuple[float, nn.Module]:
    """One trial: DP-SGD of ``candidate`` on the kept examples, then its held-out count of correct
    predictions plus N(0, score_noise^2) from ``rng``. Returns (the noisy count, the model to evaluate)."""
    model, _ = train_dpsgd(
        candidate.new_model(),
        data.x_train[plan.kept],
        data.y_train[plan.kept],
        candidate.train,
        candidate.dp,
        plan.noise_multiplier,
        augmentation=data.augmentation,
        seed=seed,
        noise=noise,
        checkpoint=None,
        progress=False,
    )
    predictions = predict_proba(model, data.x_train[plan.held_out], batch_size=candidate.train.eval_batch_size).argmax(
        axis=1
    )
    count = float(np.sum(predictions == unseal(data.y_train[plan.held_out])))  # inside the mechanism: noised below
    return count + float(rng.normal(0.0, plan.score_noise)), model


def format_selection(outcome: dict[str, Any]) -> str:
    """A private selection's outcome (``tune.json``) for people: the candidates, the chosen one and its
    noisy score, the final model's test accuracy and the ledger.

    Parameters
    ----------
    outcome : dict
        The outcome as written to ``tune.json`` (``candidates``, ``chosen``, ``shape``, ``mean``,
        ``noisy_held_out_accuracy``, ``held_out``, ``score_noise``, ``noise_multiplier``, ``final``,
        ``ledger_epsilon``, ``delta``).

    Returns
    -------
    str
        Three lines of text.
    """
    final = outcome["final"]
    shape = "Poisson" if math.isinf(outcome["shape"]) else f"shape {outcome['shape']:g}"
    return (
        f"private selection over {len(outcome['candidates'])} candidates ({', '.join(outcome['candidates'])}); "
        f"trials: {shape}, mean {outcome['mean']:g} (their number and the other trials stay secret)\n"
        f"chosen: {outcome['chosen']}, noisy held-out accuracy {100 * outcome['noisy_held_out_accuracy']:.2f}% "
        f"({outcome['held_out']} examples, count noise {outcome['score_noise']:g}); DP-SGD noise multiplier "
        f"{outcome['noise_multiplier']:.4f}\n"
        f"the chosen trial's model: {describe_test_metrics(final)}; the tune folder's ledger: "
        f"epsilon {format_epsilon(outcome['ledger_epsilon'])} at delta {outcome['delta']:g} (one "
        "RepeatAndSelectDpEvent, RDP)"
    )


__all__ = [
    "SELECTION_DEFAULTS",
    "SelectionCandidate",
    "SelectionPlan",
    "Selected",
    "WriteOutput",
    "draw_trials",
    "format_selection",
    "holdout_coins",
    "plan_selection",
    "scratch_folder",
    "select_dpsgd",
]
