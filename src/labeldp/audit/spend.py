"""What an audit spends: its runs release the audited training labels again, with noise of their own.

Their ledgers, mapped onto the audited dataset's examples (:class:`AuditLedger`), compose with the
audited run's: a folder holding a run and its audit protects each label only as well as their
composition. The audit writes that ledger next to its results and reports the totals.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from labeldp.accounting import PrivacyLedger
from labeldp.errors import RunDirectoryError
from labeldp.randomness import public_seed
from labeldp.runs import RunConfig


def audit_run_config(config: RunConfig, seed: int, index: int) -> RunConfig:
    """The configuration of the audit's ``index``-th run: the audited recipe with noise that is not the audited run's.

    Released test labels are dropped (an audit measures labels leaked, not accuracy). An insecure noise
    seed is replaced by one derived from it, ``seed`` and ``index``, so tests stay reproducible.
    """
    if config.test_held_out and config.test_labels == "released":
        config = dataclasses.replace(config, test_labels="none")
    if config.insecure_noise_seed is None:
        return config
    return dataclasses.replace(
        config, insecure_noise_seed=public_seed(config.insecure_noise_seed, "audit", seed, index)
    )


class AuditLedger:
    """The audit runs' spending, on the audited dataset's ``num_examples`` examples.

    Entries keep their aggregate over privacy units, so with ``units`` the ledger composes per unit, as
    the audited run's does.

    Parameters
    ----------
    num_examples : int
        The audited ledger's private rows: the training rows, then the test rows whose labels are private.
    relation : dp_accounting.NeighboringRelation
        The audited run's neighbouring relation.
    units : numpy.ndarray or None, optional
        The audited dataset's privacy unit of each of those rows.

    Attributes
    ----------
    ledger : labeldp.accounting.PrivacyLedger
        The audit runs' entries, mapped onto the audited examples.
    """

    def __init__(self, num_examples: int, relation, units: np.ndarray | None = None):
        self.ledger = PrivacyLedger(num_examples, relation, units)

    def add_run(self, run_dir: str | Path, name: str, positions: np.ndarray | None = None) -> None:
        """Add the ledger of the audit run in ``run_dir`` under ``name``.

        ``positions`` holds the audited example of each of the run's examples, -1 for a synthetic canary
        (no one's label); None: the audited examples themselves, in order.
        """
        run_ledger = PrivacyLedger.load(Path(run_dir) / "ledger.json")
        for entry in run_ledger.entries:
            touched = np.flatnonzero(entry.members)
            if positions is not None:
                touched = positions[touched]
                touched = touched[touched >= 0]
            self.ledger.record(
                entry.event,
                touched,
                f"{name}: {entry.description}",
                f"{name}/{entry.tag}",
                aggregate=entry.aggregate,
                row_event=entry.row_event,
            )

    def report(self, delta: float, audited_ledger: PrivacyLedger | None = None) -> dict[str, Any]:
        """``audit_epsilon`` and ``delta``; with ``audited_ledger`` also ``run_epsilon`` and ``run_and_audit_epsilon``.

        Epsilons rounded up to 6 decimals; an infinite one is None.
        """

        def rounded(value: float) -> float | None:  # up: a printed epsilon is never below the true one
            return None if math.isinf(value) else math.ceil(value * 1e6) / 1e6

        report = {"audit_epsilon": rounded(self.ledger.epsilon(delta)), "delta": delta}
        if audited_ledger is not None:
            combined = PrivacyLedger(self.ledger.dataset_size, self.ledger.neighboring_relation, self.ledger.units)
            tagged = [(f"run/{e.tag}", e) for e in audited_ledger.entries] + [(e.tag, e) for e in self.ledger.entries]
            for tag, entry in tagged:
                combined.record(
                    entry.event,
                    entry.members,
                    entry.description,
                    tag,
                    aggregate=entry.aggregate,
                    row_event=entry.row_event,
                )
            report["run_epsilon"] = rounded(audited_ledger.epsilon(delta))
            report["run_and_audit_epsilon"] = rounded(combined.epsilon(delta))
        return report


#: the name of an audit's ledger on the audited run's examples (the audit's own runs keep theirs,
#: on their own datasets, as ledger.json in their folders)
AUDIT_LEDGER = "audit_ledger.json"


def unfinished_audits(run_dir: str | Path) -> list[Path]:
    """The audit folders of ``run_dir/audit`` stopped after releasing labels and before recording them.

    Such a folder holds a run's ``ledger.json`` but no ``audit_ledger.json`` (written once its runs
    finish): what its runs released is recorded nowhere :func:`folder_epsilon` reads.
    """
    root = Path(run_dir) / "audit"
    if not root.is_dir():
        return []
    return sorted(
        folder
        for folder in root.iterdir()
        if folder.is_dir() and not (folder / AUDIT_LEDGER).exists() and any(folder.rglob("ledger.json"))
    )


def refuse_unfinished_audits(run_dir: str | Path, resumed: tuple[Path, ...] = ()) -> None:
    """Refuse a run folder holding :func:`unfinished_audits` other than ``resumed`` (RunDirectoryError)."""
    stopped = [folder for folder in unfinished_audits(run_dir) if folder not in resumed]
    if stopped:
        names = ", ".join(str(folder) for folder in stopped)
        raise RunDirectoryError(
            f"{names}: an audit stopped after its runs released labels, before recording them in its "
            f"{AUDIT_LEDGER}. Run the same audit again to finish it (its runs resume without drawing "
            f"again), or delete {Path(run_dir) / 'audit'} before sharing the run folder"
        )


def folder_epsilon(run_dir: str | Path, delta: float = 0.0) -> float:
    """Epsilon of everything a run folder holds: the run's ledger composed with each audit's in ``audit/``.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If an audit was stopped after releasing labels (:func:`refuse_unfinished_audits`).
    """
    run_dir = Path(run_dir)
    refuse_unfinished_audits(run_dir)
    combined = PrivacyLedger.load(run_dir / "ledger.json")
    for path in sorted((run_dir / "audit").rglob(AUDIT_LEDGER)):
        name = path.parent.relative_to(run_dir)
        for entry in PrivacyLedger.load(path).entries:
            combined.record(
                entry.event,
                entry.members,
                entry.description,
                f"{name}:{entry.tag}",
                aggregate=entry.aggregate,
                row_event=entry.row_event,
            )
    return combined.epsilon(delta)
