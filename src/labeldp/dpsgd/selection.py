"""Private selection of DP-SGD's training options (Papernot & Steinke 2022).

A secret random number of trials (:func:`draw_trials`), each DP-SGD of a randomly drawn candidate on
the examples not held out, scored by its held-out count of correct predictions plus N(0,
``score_noise``^2); only the best trial leaves (:class:`Selected`).

Privacy: (epsilon, delta)-DP for add-or-remove-one, epsilon from dp_accounting's RDP accountant for
the one ``RepeatAndSelectDpEvent`` the ledger records, the noise multiplier calibrated to the budget.
It assumes:

- An added example is appended: each example is held out by a public coin of its own position
  (:func:`holdout_coins`), so neighbouring datasets give neighbouring training and held-out sets.
- n is public, as in every DP-SGD implementation: the number held out, the rate and the steps are
  functions of n and the seed, and are written.
- The number of trials, the batches and all noise come from the noise source and are never saved or
  shown, nor are the other trials. Nothing written tells how long the trials took: the working files
  (the ledger, recorded before the first trial) stay in ``.OUT.selection/`` (owner only), and the
  output is written after the last trial into a folder renamed into place. (Whoever watches the
  command sees its duration.)
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
from labeldp.config.train_config import TrainConfig
from labeldp.config.tuning import SELECTION_DEFAULTS
from labeldp.data import LabeledDataset
from labeldp.dpsgd.trainer import DPSGDConfig, sampling_plan, train_dpsgd
from labeldp.errors import SECOND_RELEASE, ConfigError, InsecureNoiseWarning, RunDirectoryError
from labeldp.evaluation import describe_test_metrics
from labeldp.files import exclusive_lock
from labeldp.randomness import NoiseSource, public_rng
from labeldp.training.predictions import predict_proba

#: the recorded ledger's name in the scratch folder
SCRATCH_LEDGER = "ledger.json"


def draw_trials(rng, mean: float, shape: float) -> int:
    """The secret number of trials, one uniform from ``rng``: Poisson(``mean``) for ``shape`` inf, else the
    truncated negative binomial of Papernot & Steinke (2022) of mean ``mean`` (shape 1: geometric on 1, 2, ...).
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
    """The (n,) mask of the examples a selection holds out, one public coin each.

    Example i is held out when the i-th uniform of the stream ``tune-holdout`` of ``seed`` is below
    ``fraction``: its coin depends on its position alone, so appending an example changes no other's. The
    number held out is a function of the public n and seed.
    """
    if isinstance(fraction, bool) or not 0 < fraction < 1:
        raise ConfigError(f"holdout must lie in (0, 1), got {fraction!r}")
    return public_rng(seed, "tune-holdout").random(num_examples) < fraction


@dataclass(frozen=True)
class SelectionCandidate:
    """One candidate: DP-SGD's settings and ``new_model``, a builder of its initial model from public randomness only.

    All candidates share ``train.epochs`` and ``train.batch_size`` (the sampling plan).
    """

    train: TrainConfig
    dp: DPSGDConfig
    new_model: Callable[[], nn.Module]


@dataclass(frozen=True)
class SelectionPlan:
    """What a selection fixes before it spends, from public facts (n, the seed, the settings) only.

    Attributes
    ----------
    held_out, kept : numpy.ndarray
        The sorted positions held out to score the trials, and those the trials train on.
    sampling_probability, steps : float, int
        Each trial's DP-SGD plan.
    noise_multiplier : float
        sigma, calibrated so that the whole selection meets the budget.
    mean, shape : float
        The distribution of the number of trials (shape inf: Poisson, 1: geometric).
    score_noise : float
        The standard deviation of the noise on each held-out count.
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
        """The selection's one ``RepeatAndSelectDpEvent``: every trial's DP-SGD steps and noisy count."""
        trial = selection_trial_event(self.noise_multiplier, self.sampling_probability, self.steps, self.score_noise)
        return selection_event(trial, self.mean, self.shape)

    def describe(self, candidates: int) -> str:
        """The plan in one line of public facts, for the ledger's record."""
        trials = "Poisson" if math.isinf(self.shape) else f"truncated negative binomial (shape {self.shape:g})"
        return (
            f"private selection over {candidates} DP-SGD candidates: trials ~ {trials} with mean {self.mean:g}; "
            f"each DP-SGD (noise multiplier {self.noise_multiplier:.4f}, Poisson rate "
            f"{self.sampling_probability:.5g}, {self.steps} steps) and a held-out count with noise "
            f"{self.score_noise:g}"
        )


@dataclass(frozen=True)
class Selected:
    """What leaves the selection: the chosen candidate's ``index``, its trial's ``model`` (on the CPU, its EMA
    when kept), its ``noisy_count`` of correct held-out predictions, and the ``plan``.
    """

    index: int
    model: nn.Module
    noisy_count: float
    plan: SelectionPlan

    @property
    def noisy_accuracy(self) -> float:
        """The noisy held-out count over the number held out (noisy: it may lie outside [0, 1])."""
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
    """The selection's plan; it reads no label, and every refusal comes before any spend (ConfigError).

    Refused: fewer than two examples held out or none kept, candidates with different sampling plans, or
    settings or a budget that cannot pay (:func:`~labeldp.accounting.calibration.calibrate_selection_noise`).
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
    """``.OUT.selection`` beside the resolved ``out``: a selection's working files while it runs."""
    out = Path(out).resolve()
    return out.with_name(f".{out.name}.selection")


def _check_unspent(out: Path) -> None:
    """Refuse an output whose selection was recorded but did not finish (its trials are gone), or a non-empty folder."""
    ledger = scratch_folder(out) / SCRATCH_LEDGER
    if ledger.exists():
        raise RunDirectoryError(
            f"{ledger} records the spend of a private selection for {out} that did not finish: "
            "its trials are not kept, so it cannot be resumed without spending again. Keep that "
            "ledger (it accounts for the spend) and start again in a new folder "
            f"{SECOND_RELEASE}"
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
    """Select one of ``candidates`` privately on ``data``, then write ``out`` with ``write``; what ``write`` returns.

    It reads the private training labels: the kept examples' inside each trial's DP-SGD, the held-out
    ones' in each trial's count, noised before it is compared. What it releases (the chosen index, its
    model, its noisy count, the plan) is (``epsilon``, ``delta``)-DP for add-or-remove-one under the
    assumptions of :mod:`labeldp.dpsgd.selection`, the noise unpredictable only if ``noise`` is private
    (an insecure seed is warned about). ``seed`` is public (held-out coins, augmentation). Every refusal
    comes before the spend, whose ledger is recorded in :func:`scratch_folder` before the first trial; an
    interrupted selection is refused when repeated.

    Parameters
    ----------
    write : WriteOutput
        ``write(folder, ledger, selected) -> dict`` writes the output's files into ``folder``, renamed
        into place as ``out``.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If ``out`` has an unfinished selection's ledger beside it or is not an empty folder (before the
        spend), or no trial was drawn (after it: the spend stays recorded).
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
        ledger = PrivacyLedger(data.private_rows, DPSGD_RELATION)  # as a run's: private test rows too, untouched
        ledger.record(plan.event(), np.arange(len(data.y_train)), plan.describe(len(candidates)), "selection")
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
        trial_noise = noise if noise.private else NoiseSource(insecure_seed=noise.seed("tune-selection", trial + 1))
        score, model = _trial(candidates[index], plan, data, trial_noise, seed, rng)
        if best is None or score > best.noisy_count:
            best = Selected(index, model.cpu(), score, plan)
    return best


def _trial(
    candidate: SelectionCandidate, plan: SelectionPlan, data: LabeledDataset, noise: NoiseSource, seed: int, rng
) -> tuple[float, nn.Module]:
    """One trial, DP-SGD of ``candidate`` on the kept examples: its noisy held-out count, and its model."""
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
    """A private selection's outcome (``tune.json``) in three lines for people."""
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
