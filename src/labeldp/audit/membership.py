"""Membership inference, for recipes that claim to protect whole examples (full DP, e.g. DP-SGD).

Label DP does not hide a public input's membership. Targets are training inputs given labels the
auditor draws, a random half trained on; an attacker scores each by the model's confidence in its
planted label, so no true label is read outside the runs. Under (eps, delta)-DP for add/remove-one,
TPR <= e^eps FPR + delta and 1 - FPR <= e^eps (1 - TPR) + delta, so confidence intervals on TPR and
FPR bound epsilon from below (Jagielski et al. 2020), Bonferroni-corrected over thresholds.

Attacks: the loss threshold (Yeom et al. 2018) and offline LiRA (Carlini et al. 2022): shadow models
without the targets give each a Gaussian of phi = log(p / (1 - p)) on its label, and a target scores
high when its phi under the audited model lies far above it.
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
from labeldp.accounting.policy import BudgetPolicy
from labeldp.audit.bounds import clopper_pearson_lower, clopper_pearson_upper
from labeldp.audit.label_inference import with_train_labels
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
    """Epsilon lower bound from attack ``scores`` (higher: member), with Clopper-Pearson intervals.

    At each target false-positive rate a threshold is set on the non-members' scores and both
    inequalities (see :mod:`labeldp.audit.membership`) are tried with the TPR's lower and the FPR's upper
    bound; all intervals hold together with probability >= ``confidence`` (two per threshold).
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
    """An attack's ``auc``, its ``tpr_at_fpr`` at each of :data:`FPR_POINTS`, and its ``epsilon_lower_bound``."""
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
    """Targets when none are given: 1000, or as many as leave room for the shadows' other half."""
    return max(2, min(1000, num_examples // 2 - 1))


def check_membership_options(
    num_examples: int, num_targets: int | None, num_shadows: int, privacy_unit: str | None = None
) -> None:
    """Refuse, before any training, a membership audit that cannot run on ``num_examples`` training examples.

    A run with a privacy unit is refused too: its members are whole units, and the targets are rows.
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
    policy: BudgetPolicy | None = None,
) -> dict[str, Any]:
    """Audit a recipe by membership inference on ``num_targets`` targets, a random half of them members.

    ``num_shadows`` shadow models train on random halves of the other examples. Each run releases the
    labels (and for DP-SGD the inputs) it trains on again: their ledgers go to
    ``out_dir/audit_ledger.json`` and the report's ``spent`` gives the audit's epsilon and, with
    ``audited_ledger``, its composition with the audited run's. Planted labels come from the public
    stream ``membership``. Writes ``out_dir/membership.json``.
    """
    config = config.resolved()
    policy = policy or BudgetPolicy.from_environment()
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
    with_canaries = with_train_labels(data, lambda labels: labels.replaced(targets, planted))
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
        policy=policy,
    )
    spend.add_run(target_dir, "target", trained_on)
    phi = _planted_confidence(target_dir, data.x_train[targets], planted)
    losses = -np.log(phi)
    phi = np.log(phi) - np.log1p(-phi)
    shadow_phis = []
    for index in range(num_shadows):
        half = rng.choice(pool, size=pool.size // 2 + num_targets // 2, replace=False)
        shadow_dir = out / f"shadow{index}"
        shadow_config = dataclasses.replace(audit_run_config(config, seed, 1 + index), seed=config.seed + 1 + index)
        train_run(shadow_config, shadow_dir, device=device, progress=False, dataset=_subset(data, half), policy=policy)
        spend.add_run(shadow_dir, f"shadow{index}", half)
        p = _planted_confidence(shadow_dir, data.x_train[targets], planted)
        shadow_phis.append(np.log(p) - np.log1p(-p))
    shadow_phi = np.stack(shadow_phis)
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
