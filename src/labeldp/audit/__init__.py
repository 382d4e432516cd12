"""Audits: what an attacker can learn about training labels, as empirical epsilon lower bounds. Start
with :mod:`labeldp.audit.label_inference`.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "clopper_pearson_lower": "labeldp.audit.bounds",
        "epsilon_from_precision": "labeldp.audit.bounds",
        "epsilon_lower_bound": "labeldp.audit.bounds",
        "ANSWER_FRACTIONS": "labeldp.audit.label_inference",
        "AuditResult": "labeldp.audit.label_inference",
        "audit_config": "labeldp.audit.label_inference",
        "audit_guesses": "labeldp.audit.label_inference",
        "audit_mechanism": "labeldp.audit.label_inference",
        "audit_run": "labeldp.audit.label_inference",
        "guess_canary_labels": "labeldp.audit.label_inference",
        "attack_metrics": "labeldp.audit.membership",
        "membership_audit": "labeldp.audit.membership",
        "membership_epsilon_lower_bound": "labeldp.audit.membership",
    },
)
