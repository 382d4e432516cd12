"""Audits: what an attacker can learn about training labels, as empirical epsilon lower bounds. Start
with :mod:`labeldp.audit.label_inference`.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.audit.bounds import clopper_pearson_lower as clopper_pearson_lower
    from labeldp.audit.bounds import epsilon_from_precision as epsilon_from_precision
    from labeldp.audit.bounds import epsilon_lower_bound as epsilon_lower_bound
    from labeldp.audit.label_inference import ANSWER_FRACTIONS as ANSWER_FRACTIONS
    from labeldp.audit.label_inference import AuditResult as AuditResult
    from labeldp.audit.label_inference import audit_config as audit_config
    from labeldp.audit.label_inference import audit_guesses as audit_guesses
    from labeldp.audit.label_inference import audit_mechanism as audit_mechanism
    from labeldp.audit.label_inference import audit_run as audit_run
    from labeldp.audit.label_inference import guess_canary_labels as guess_canary_labels
    from labeldp.audit.membership import attack_metrics as attack_metrics
    from labeldp.audit.membership import membership_audit as membership_audit
    from labeldp.audit.membership import membership_epsilon_lower_bound as membership_epsilon_lower_bound

__getattr__, __dir__, __all__ = lazy_exports(__name__)
