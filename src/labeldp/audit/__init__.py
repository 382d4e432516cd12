"""Audits: what an attacker can learn about training labels, as empirical epsilon lower bounds."""

from labeldp.audit.bounds import clopper_pearson_lower, epsilon_from_precision, epsilon_lower_bound
from labeldp.audit.label_inference import (
    ANSWER_FRACTIONS,
    AuditResult,
    audit_config,
    audit_guesses,
    audit_mechanism,
    audit_run,
    guess_canary_labels,
)
from labeldp.audit.membership import attack_metrics, membership_audit, membership_epsilon_lower_bound

__all__ = ["ANSWER_FRACTIONS", "AuditResult", "attack_metrics", "membership_audit", "membership_epsilon_lower_bound", "audit_config", "audit_guesses", "audit_mechanism", "audit_run",
           "clopper_pearson_lower", "epsilon_from_precision", "epsilon_lower_bound", "guess_canary_labels"]
