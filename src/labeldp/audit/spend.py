"""What an audit spends: its runs release the audited training labels again.

An audit retrains a recipe on the audited data (with canaries, or on subsets for membership
inference), and every such run releases those labels once more, with noise of its own. Its
ledgers, mapped onto the audited dataset's examples, compose with the audited run's: the folder
that holds a run and its audit protects each label only as well as their composition. Nothing of
this is hidden: :class:`AuditLedger` collects the audit runs' ledgers on the audited examples, the
audit writes it next to its results, and the totals are reported.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from labeldp.accounting import PrivacyLedger
from labeldp.randomness import public_seed
from labeldp.runs import RunConfig


def audit_run_config(config: RunConfig, seed: int, index: int) -> RunConfig:
    """The configuration of the audit's ``index``-th run: the audited recipe, with noise that is not
    the audited run's, and no release of private test labels (the audit measures labels leaked, not
    accuracy: its runs release the training labels only, which its ledger maps onto the audited
    examples). Fresh or secure noise never repeats; an insecure noise seed is replaced by one derived
    from it, the audit's seed and ``index``, so that tests stay reproducible."""
    if config.test_held_out and config.test_labels == "released":
        config = dataclasses.replace(config, test_labels="none")
    if config.insecure_noise_seed is None:
        return config
    return dataclasses.replace(config, insecure_noise_seed=public_seed(config.insecure_noise_seed, "audit", seed,
                                                                       index))


class AuditLedger:
    """The audit runs' spending, on the audited dataset's ``num_examples`` examples."""

    def __init__(self, num_examples: int, relation):
        self.ledger = PrivacyLedger(num_examples, relation)

    def add_run(self, run_dir: str | Path, name: str, positions: np.ndarray | None = None) -> None:
        """Add the ledger of the audit run in ``run_dir``, which trained on the audited examples
        ``positions`` (one per example of its dataset; -1 for a synthetic canary, which is no one's
        label; None: the audited examples themselves, in order)."""
        run_ledger = PrivacyLedger.load(Path(run_dir) / "ledger.json")
        for entry in run_ledger.entries:
            touched = np.flatnonzero(entry.members)
            if positions is not None:
                touched = positions[touched]
                touched = touched[touched >= 0]
            self.ledger.record(entry.event, touched, f"{name}: {entry.description}", f"{name}/{entry.tag}")

    def report(self, delta: float, audited_ledger: PrivacyLedger | None = None) -> dict[str, Any]:
        """The audit's own epsilon and, given the audited run's ledger, the run's and their composition."""
        def rounded(value: float) -> float | None:  # up: a printed epsilon is never below the true one
            return None if math.isinf(value) else math.ceil(value * 1e6) / 1e6

        report = {"audit_epsilon": rounded(self.ledger.epsilon(delta)), "delta": delta}
        if audited_ledger is not None:
            combined = PrivacyLedger(self.ledger.dataset_size, self.ledger.neighboring_relation)
            for entry in audited_ledger.entries:
                combined.record(entry.event, entry.members, entry.description, f"run/{entry.tag}")
            for entry in self.ledger.entries:
                combined.record(entry.event, entry.members, entry.description, entry.tag)
            report["run_epsilon"] = rounded(audited_ledger.epsilon(delta))
            report["run_and_audit_epsilon"] = rounded(combined.epsilon(delta))
        return report


#: the name of an audit's ledger on the audited run's examples (the audit's own runs keep theirs,
#: on their own datasets, as ledger.json in their folders)
AUDIT_LEDGER = "audit_ledger.json"


def folder_epsilon(run_dir: str | Path, delta: float = 0.0) -> float:
    """Epsilon of everything a run folder holds: the run's ledger composed with the ledgers of every
    audit kept in its ``audit/`` folder."""
    run_dir = Path(run_dir)
    combined = PrivacyLedger.load(run_dir / "ledger.json")
    for path in sorted((run_dir / "audit").rglob(AUDIT_LEDGER)):
        name = path.parent.relative_to(run_dir)
        for entry in PrivacyLedger.load(path).entries:
            combined.record(entry.event, entry.members, entry.description, f"{name}:{entry.tag}")
    return combined.epsilon(delta)
