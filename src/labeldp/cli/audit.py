"""``labeldp audit``: an empirical epsilon lower bound for a run's recipe (and membership inference)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from labeldp.cli.common import budget_policy, set_threads
from labeldp.config.auditing import CANARY_KINDS, DEFAULT_CONFIDENCE, DEFAULT_SHADOWS
from labeldp.config.shared_options import BUDGET_DIR, DEVICE, SEED, THREADS, TOTAL_EPSILON
from labeldp.options import Option, add_options

DESCRIPTION = (
    "Retrain RUNDIR's recipe with canaries (random-noise inputs with random labels, or training examples "
    "given random wrong labels) in RUNDIR/audit, guess each canary's label from the model calibrated by "
    "RUNDIR's own model, and turn the guesses into an epsilon lower bound with a Clopper-Pearson interval. "
    "The run itself and its ledger are not touched."
)


CANARIES = Option(
    "number of canaries (default: 1000, or half the training set when it is smaller)",
    type="int | None",
    flag="--canaries",
)
CANARY_KIND = Option(
    "mislabeled: training examples given a random wrong label; noise: extra random-noise inputs with random labels",
    CANARY_KINDS[0],
    type="str",
    flag="--canary-kind",
    choices=CANARY_KINDS,
)
CONFIDENCE = Option("confidence of the bound", DEFAULT_CONFIDENCE, type="float", flag="--confidence")
MEMBERSHIP = Option(
    "also run membership inference (loss threshold and offline LiRA with shadow models), the audit for recipes "
    "that protect whole examples",
    False,
    flag="--membership",
)
TARGETS = Option(
    "with --membership: targets, half of them members (default: 1000, or fewer on a small dataset: half the "
    "training set less one)",
    argparse.SUPPRESS,
    type="int",
    flag="--targets",
)
SHADOWS = Option(
    f"with --membership: shadow models for LiRA (default {DEFAULT_SHADOWS})",
    argparse.SUPPRESS,
    type="int",
    flag="--shadows",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """RUNDIR, the canaries, the confidence, the seed, the device and the membership audit's options."""
    parser.add_argument("run_dir", metavar="RUNDIR")
    add_options(parser, "audit", CANARIES, CANARY_KIND, CONFIDENCE, SEED, DEVICE, THREADS, MEMBERSHIP)
    add_options(parser, "audit", TARGETS, SHADOWS, BUDGET_DIR, TOTAL_EPSILON)


def run(args: argparse.Namespace) -> None:
    """Audit RUNDIR's recipe: retrain it with canaries in ``RUNDIR/audit`` and print the empirical epsilon
    lower bound (and, with ``--membership``, the membership inference audit's).

    The audit trains on the run's private labels again, with noise of its own: what it writes under
    ``RUNDIR/audit`` is covered by each audit's own ledger, not the run's. The epsilon of everything in RUNDIR
    together is printed; delete ``RUNDIR/audit`` before sharing the run folder.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If RUNDIR holds no run to audit, or another audit of it stopped between releasing labels and
        recording them (refused before this audit spends anything).
    """
    from labeldp.accounting import PrivacyLedger
    from labeldp.accounting.rounding import format_epsilon, format_lower_bound
    from labeldp.audit import audit_run, membership_audit
    from labeldp.audit.label_inference import audit_folder, audited_config, run_canaries
    from labeldp.audit.membership import check_membership_options
    from labeldp.audit.spend import folder_epsilon, refuse_unfinished_audits
    from labeldp.errors import ConfigError
    from labeldp.runs import config_dataset

    run_dir = Path(args.run_dir)
    targets, shadows = getattr(args, "targets", None), getattr(args, "shadows", DEFAULT_SHADOWS)
    typed = sorted(f"--{name}" for name in ("targets", "shadows") if hasattr(args, name))
    if not args.membership and typed:
        raise ConfigError(f"{', '.join(typed)} apply only with --membership")
    config = audited_config(run_dir)
    set_threads(args, config.dataset)
    canaries = run_canaries(run_dir, args.canaries or None, "--canaries")
    this = [audit_folder(run_dir, args.canary_kind, canaries=canaries, seed=args.seed)]
    if args.membership:
        this.append(audit_folder(run_dir, "membership", targets=targets, shadows=shadows, seed=args.seed))
    refuse_unfinished_audits(run_dir, tuple(this))  # before this audit spends: the total must be known
    if args.membership:  # refuse what cannot run before the label audit spends its minutes
        check_membership_options(len(config_dataset(config.resolved()).y_train), targets, shadows, config.privacy_unit)
    result = audit_run(
        run_dir,
        num_canaries=args.canaries,
        confidence=args.confidence,
        seed=args.seed,
        device=args.device,
        canaries=args.canary_kind,
        policy=budget_policy(args),
    )
    claimed = format_epsilon(result["claimed_epsilon"])
    if result["claimed_label_epsilon"] != result["claimed_epsilon"]:
        claimed += f" per example, {format_epsilon(result['claimed_label_epsilon'])} per replaced label"
    print(
        f"{result['method']} on {result['dataset']}: claimed epsilon {claimed}, "
        f"empirical epsilon lower bound {format_lower_bound(result['epsilon_lower_bound'])} "
        f"({100 * result['confidence']:g}% confidence, {result['num_canaries']} canaries)"
    )
    for t in result["thresholds"]:
        print(
            f"  answering top {100 * t['answer_fraction']:g}%: {t['correct']}/{t['answered']} correct "
            f"-> epsilon >= {format_lower_bound(t['epsilon_lower_bound'])}"
        )
    print(f"written: {Path(result['folder']) / 'audit.json'}")
    if args.membership:
        audited = PrivacyLedger.load(run_dir / "ledger.json")
        folder = audit_folder(run_dir, "membership", targets=targets, shadows=shadows, seed=args.seed)
        mia = membership_audit(
            config,
            folder,
            num_targets=targets,
            num_shadows=shadows,
            confidence=args.confidence,
            seed=args.seed,
            device=args.device,
            audited_ledger=audited,
            policy=budget_policy(args),
        )
        for name in ("loss_threshold", "lira_offline"):
            m = mia[name]
            print(
                f"membership ({name}): AUC {m['auc']:.3f}, TPR at 1% FPR {m['tpr_at_fpr']['0.01']:.3f}, "
                f"epsilon lower bound {format_lower_bound(m['epsilon_lower_bound'])}"
            )
        print(f"written: {folder / 'membership.json'}")
    delta = result["spent"]["delta"]
    total = folder_epsilon(run_dir, delta)
    print(
        f"The audit trained on the run's labels again, with noise of its own (each audit's ledger: "
        f"audit_ledger.json in its folder). Everything in {run_dir} together is epsilon "
        f"{format_epsilon(None if math.isinf(total) else total)}; the run alone is epsilon "
        f"{format_epsilon(result['claimed_epsilon'])}. Delete {run_dir / 'audit'} before you share the run folder."
    )
