"""Membership inference: was a given example in the training set? (For full-DP training, e.g. DP-SGD.)

Label DP protects labels only, so membership of a *public* input is not what it hides; these attacks
audit recipes that claim to protect whole examples. The game: targets are training inputs given labels
the auditor draws (uniformly, from its public stream), split at random into members (trained on, with
the planted label) and non-members (left out); an attacker scores each target by the model's
confidence in its planted label, and a threshold on the score gives a (false positive rate, true
positive rate) pair. The attack reads no true label: what the audit writes depends on the private
labels only through the runs it trains, whose releases its ledger records. For an (eps, delta)-DP training algorithm
(add/remove-one neighbours), TPR <= e^eps FPR + delta and 1 - FPR <= e^eps (1 - TPR) + delta, so
confidence intervals on TPR and FPR give an epsilon lower bound (Jagielski et al. 2020), Bonferroni-
corrected over the thresholds tried.

Attacks: the loss-threshold attack (Yeom et al. 2018: low loss means member) and offline LiRA
(Carlini et al. 2022): shadow models trained without the targets give, per target, a Gaussian of
the logit-scaled confidence phi = log(p / (1 - p)) on its label; a target scores high when its
phi under the audited model lies far above that distribution.
"""

from __future__ import annotations

import dataclasses
import math
import time
from pathlib import Path
from typing import Any

import numpy as np
from scipy.stats import norm
from sklearn.metrics import roc_auc_score, roc_curve

from labeldp.accounting import PrivacyLedger
from labeldp.audit.bounds import clopper_pearson_lower, clopper_pearson_upper
from labeldp.audit.spend import AUDIT_LEDGER, AuditLedger, audit_run_config
from labeldp.config.auditing import DEFAULT_CONFIDENCE, DEFAULT_SHADOWS
from labeldp.data import LabeledDataset
from labeldp.errors import ConfigError
from labeldp.files import write_json_atomic
from labeldp.randomness import public_rng
from labeldp.runs import RunConfig, config_dataset, load_run_model, train_run
from labeldp.training import predict_proba

#: False-positive rates at which the TPR is reported and thresholds are tried for the bound.
FPR_POINTS = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5)


def membership_epsilon_lower_bound(
    scores: np.ndarray,
    is_member: np.ndarray,
    confidence: float = DEFAULT_CONFIDENCE,
    delta: float = 0.0,
    fpr_points=FPR_POINTS,
) -> float:
    """Epsilon lower bound from attack ``scores`` (higher = member), with Clopper-Pearson intervals.

    For an (eps, delta)-DP algorithm under add/remove-one neighbours, TPR <= e^eps FPR + delta and
    1 - FPR <= e^eps (1 - TPR) + delta (see the module docstring). At each target false-positive rate a
    threshold is set on the non-members' scores, and both inequalities are tried with the lower bound on
    TPR and the upper bound on FPR; all intervals together hold with probability >= ``confidence``
    (Bonferroni, two intervals per threshold).

    Parameters
    ----------
    scores : numpy.ndarray
        The attack's score of each target, shape (n,).
    is_member : numpy.ndarray
        Whether each target was trained on, boolean, shape (n,).
    confidence : float, optional
        Probability that the bound holds (default 0.95).
    delta : float, optional
        The delta of the guarantee being audited (default 0).
    fpr_points : sequence of float, optional
        The false-positive rates at which thresholds are tried (default :data:`FPR_POINTS`).

    Returns
    -------
    float
        The lower bound on epsilon, >= 0.
    """
    scores, is_member = np.asarray(scores, dtype=float), np.asarray(is_member, dtype=bool)
    members, others = np.sort(scores[is_member])[::-1], np.sort(scores[~is_member])[::-1]
    alpha = (1 - confidence) / (2 * len(fpr_points))  # two intervals per threshold
    best = 0.0
    for target_fpr in fpr_points:
        false_pos = int(math.floor(target_fpr * others.size))
        threshold = others[false_pos] if false_pos < others.size else -np.inf  # strictly above it
        tp, fp = int((members > threshold).sum()), int((others > threshold).sum())
        tpr_low = clopper_pearson_lower(tp, members.size, alpha)
        fpr_high = clopper_pearson_upper(fp, others.size, alpha)
        candidates = []
        if fpr_high > 0 and tpr_low - delta > 0:
            candidates.append(math.log((tpr_low - delta) / fpr_high))
        if tpr_low < 1 and 1 - fpr_high - delta > 0:
            candidates.append(math.log((1 - fpr_high - delta) / (1 - tpr_low)))
        best = max([best] + candidates)
    return best


def attack_metrics(
    scores: np.ndarray, is_member: np.ndarray, confidence: float = DEFAULT_CONFIDENCE, delta: float = 0.0
) -> dict[str, Any]:
    """AUC, TPR at each FPR in :data:`FPR_POINTS`, and the implied epsilon lower bound.

    Parameters
    ----------
    scores : numpy.ndarray
        The attack's score of each target, shape (n,).
    is_member : numpy.ndarray
        Whether each target was trained on, boolean, shape (n,).
    confidence : float, optional
        Probability that the bound holds (default 0.95).
    delta : float, optional
        The delta of the guarantee being audited (default 0).

    Returns
    -------
    dict
        ``{"auc": float, "tpr_at_fpr": {fpr: tpr}, "epsilon_lower_bound": float}``.
    """
    fpr, tpr, _ = roc_curve(is_member, scores)
    return {
        "auc": float(roc_auc_score(is_member, scores)),
        "tpr_at_fpr": {f"{p:g}": float(np.interp(p, fpr, tpr)) for p in FPR_POINTS},
        "epsilon_lower_bound": membership_epsilon_lower_bound(scores, is_member, confidence, delta),
    }


def _planted_confidence(run_dir: Path, inputs: np.ndarray, planted: np.ndarray) -> np.ndarray:
    """The model's probability of each target's planted label."""
    probs = predict_proba(load_run_model(run_dir), inputs)
    return np.clip(probs[np.arange(planted.size), planted], 1e-12, 1 - 1e-12)


def _subset(data: LabeledDataset, indices: np.ndarray) -> LabeledDataset:
    return dataclasses.replace(data, x_train=data.x_train[indices], y_train=data.y_train[indices])


def default_targets(num_examples: int) -> int:
    """Targets when none are given: 1000, or as many as leave room for the shadows' other half.

    Parameters
    ----------
    num_examples : int
        Number of training examples.

    Returns
    -------
    int
        ``max(2, min(1000, num_examples // 2 - 1))``.
    """
    return max(2, min(1000, num_examples // 2 - 1))


def check_membership_options(
    num_examples: int, num_targets: int | None, num_shadows: int, privacy_unit: str | None = None
) -> None:
    """Refuse a membership audit that cannot run on ``num_examples`` training examples (before any training).

    Parameters
    ----------
    num_examples : int
        Number of training examples.
    num_targets : int or None
        Number of targets (None: :func:`default_targets`).
    num_shadows : int
        Number of shadow models.
    privacy_unit : str or None, optional
        The audited run's privacy unit: its members are whole units, which this audit, whose targets
        are rows, does not draw (default None).

    Returns
    -------
    None

    Raises
    ------
    labeldp.errors.ConfigError
        If the run has a privacy unit, ``num_targets`` is not in [2, num_examples // 2) or ``num_shadows``
        is below 1.
    """
    if privacy_unit is not None:
        raise ConfigError(
            f"the membership audit draws rows as targets, and this run protects its privacy unit "
            f"{privacy_unit!r} (several rows each): audit its labels without --membership"
        )
    num_targets = default_targets(num_examples) if num_targets is None else num_targets
    if not 2 <= num_targets < num_examples // 2:
        raise ConfigError(
            f"num_targets (--targets) must lie in [2, {num_examples // 2}) for a dataset of "
            f"{num_examples} training examples, got {num_targets}"
        )
    if num_shadows < 1:
        raise ConfigError(f"num_shadows (--shadows) must be at least 1, got {num_shadows}")


def membership_audit(
    config: RunConfig,
    out_dir: str | Path,
    *,
    num_targets: int | None = None,
    num_shadows: int = DEFAULT_SHADOWS,
    confidence: float = DEFAULT_CONFIDENCE,
    delta: float = 0.0,
    seed: int = 0,
    dataset: LabeledDataset | None = None,
    device: str = "auto",
    audited_ledger: PrivacyLedger | None = None,
) -> dict[str, Any]:
    """Audit a recipe by membership inference on targets of which a random half are members.

    Train ``config`` on a dataset where a random half of ``num_targets`` targets are members, train
    ``num_shadows`` shadow models on random halves of the non-target examples, and attack the targets
    (``num_targets`` None: :func:`default_targets`).

    Every one of these runs releases the labels (and, for DP-SGD, the inputs) of the examples it
    trains on again: their ledgers, on the audited examples, go to ``out_dir/audit_ledger.json`` and
    the report gives the audit's epsilon and, with ``audited_ledger``, its composition with the
    audited run's. Each target carries a label the auditor planted (drawn from the public stream
    ``membership``), and the attack scores it by the model's confidence in that label, so no true
    label is read outside the runs. Writes ``out_dir/membership.json``.

    Parameters
    ----------
    config : labeldp.runs.RunConfig
        The recipe to audit.
    out_dir : str or pathlib.Path
        The audit's folder.
    num_targets : int or None, optional
        Number of targets, in [2, n // 2) (default :func:`default_targets`).
    num_shadows : int, optional
        Number of shadow models, >= 1 (default 4).
    confidence : float, optional
        Probability that each bound holds (default 0.95).
    delta : float, optional
        The delta of the guarantee being audited (default 0).
    seed : int, optional
        Seed of the audit's public stream (targets, members, planted labels, shadow subsets); with a
        recipe's insecure noise seed it also enters the audit runs' derived noise seeds (default 0).
    dataset : labeldp.data.LabeledDataset or None, optional
        The dataset, if not the one ``config`` names.
    device : str, optional
        Where to train (default ``"auto"``).
    audited_ledger : labeldp.accounting.PrivacyLedger or None, optional
        The audited run's ledger, to report the composition with it.

    Returns
    -------
    dict
        The report written to ``membership.json``: the settings, :func:`attack_metrics` of the
        loss-threshold attack and of offline LiRA, the time taken and the audit's spending (``spent``).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``num_targets`` or ``num_shadows`` is invalid (checked before any training), or the recipe
        cannot run.
    labeldp.errors.LabelDPError
        Any other error a run raises.
    """
    config = config.resolved()
    data = dataset if dataset is not None else config_dataset(config)
    n = len(data.y_train)
    per_unit = config.privacy_unit or ("units" if data.units is not None else None)
    check_membership_options(n, num_targets, num_shadows, per_unit)
    num_targets = default_targets(n) if num_targets is None else num_targets
    spend = AuditLedger(data.private_rows, config.method_spec.neighboring_relation, data.units)
    rng = public_rng(seed, "membership")
    order = rng.permutation(n)
    targets, pool = np.sort(order[:num_targets]), order[num_targets:]
    is_member = rng.permutation(np.arange(num_targets) < num_targets // 2)
    planted = rng.integers(0, data.num_classes, num_targets)  # the auditor's labels, not the true ones
    with_canaries = dataclasses.replace(data, y_train=data.y_train.replaced(targets, planted))
    out = Path(out_dir)
    start = time.perf_counter()
    target_dir = out / "target_run"
    trained_on = np.concatenate([pool, targets[is_member]])
    train_run(
        audit_run_config(config, seed, 0),
        target_dir,
        device=device,
        progress=False,
        dataset=_subset(with_canaries, trained_on),
    )
    spend.add_run(target_dir, "target", trained_on)
    phi = _planted_confidence(target_dir, data.x_train[targets], planted)
    losses = -np.log(phi)
    phi = np.log(phi) - np.log1p(-phi)
    shadow_phi = []
    for index in range(num_shadows):
        half = rng.choice(pool, size=pool.size // 2 + num_targets // 2, replace=False)
        shadow_dir = out / f"shadow{index}"
        shadow_config = dataclasses.replace(audit_run_config(config, seed, 1 + index), seed=config.seed + 1 + index)
        train_run(shadow_config, shadow_dir, device=device, progress=False, dataset=_subset(data, half))
        spend.add_run(shadow_dir, f"shadow{index}", half)
        p = _planted_confidence(shadow_dir, data.x_train[targets], planted)
        shadow_phi.append(np.log(p) - np.log1p(-p))
    shadow_phi = np.stack(shadow_phi)
    mean, std = shadow_phi.mean(axis=0), shadow_phi.std(axis=0) + 1e-3
    lira_scores = norm.logcdf(phi, loc=mean, scale=std)  # offline LiRA: one-sided test against OUT
    report = {
        "method": config.method,
        "dataset": config.dataset,
        "num_targets": num_targets,
        "num_members": int(is_member.sum()),
        "num_shadows": num_shadows,
        "confidence": confidence,
        "delta": delta,
        "loss_threshold": attack_metrics(-losses, is_member, confidence, delta),
        "lira_offline": attack_metrics(lira_scores, is_member, confidence, delta),
        "seconds": round(time.perf_counter() - start, 2),
        "spent": spend.report(config.delta or 0.0, audited_ledger),
    }
    spend.ledger.save(out / AUDIT_LEDGER, config.delta or 0.0)
    write_json_atomic(out / "membership.json", report)
    return report
