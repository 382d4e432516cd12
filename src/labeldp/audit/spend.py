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
from labeldp.errors import RunDirectoryError
from labeldp.randomness import public_seed
from labeldp.runs import RunConfig


def audit_run_config(config: RunConfig, seed: int, index: int) -> RunConfig:
    """The configuration of the audit's ``index``-th run.

    The audited recipe, with noise that is not the audited run's, and no release of private test
    labels (the audit measures labels leaked, not accuracy: its runs release the training labels only,
    which its ledger maps onto the audited examples). Fresh or secure noise never repeats; an insecure
    noise seed is replaced by one derived from it, the audit's seed and ``index``, so that tests stay
    reproducible.

    Parameters
    ----------
    config : labeldp.runs.RunConfig
        The audited recipe.
    seed : int
        The audit's seed.
    index : int
        The run's index within the audit.

    Returns
    -------
    labeldp.runs.RunConfig
        The run's configuration (``config`` itself when nothing needs to change).
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

    Each entry keeps what the audit run recorded it as (an aggregate over privacy units, its per-row
    event), and with ``units`` the ledger composes per unit, as the audited run's does: an audit of a
    run whose epsilon is each user's states each user's spending, never each row's.

    Parameters
    ----------
    num_examples : int
        Number of examples of the audited dataset's ledger: its private rows (the training rows, then
        the test rows where their labels are private).
    relation : dp_accounting.NeighboringRelation
        The neighbouring relation of the audited run's ledger.
    units : numpy.ndarray or None, optional
        The audited dataset's privacy unit of each of those rows (its ``units``), or None (default).

    Attributes
    ----------
    ledger : labeldp.accounting.PrivacyLedger
        The audit runs' entries, mapped onto the audited examples.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``num_examples`` is not positive or the relation is not supported.
    """

    def __init__(self, num_examples: int, relation, units: np.ndarray | None = None):
        self.ledger = PrivacyLedger(num_examples, relation, units)

    def add_run(self, run_dir: str | Path, name: str, positions: np.ndarray | None = None) -> None:
        """Add the ledger of the audit run in ``run_dir``, which trained on the audited examples ``positions``.

        ``positions`` holds one entry per example of its dataset; -1 for a synthetic canary, which is no
        one's label; None: the audited examples themselves, in order.

        Parameters
        ----------
        run_dir : str or pathlib.Path
            The audit run's folder, holding its ``ledger.json``.
        name : str
            The run's name, prefixed to its entries' tags and descriptions.
        positions : numpy.ndarray or None, optional
            The audited example of each of the run's examples, shape (run's dataset size,), or None.

        Returns
        -------
        None

        Raises
        ------
        labeldp.errors.ConfigError
            If an entry cannot be recorded (a tag already used, or members outside the audited dataset).
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
        """The audit's own epsilon and, given the audited run's ledger, the run's and their composition.

        Epsilons are rounded up to 6 decimals; an infinite one is None.

        Parameters
        ----------
        delta : float
            The delta at which epsilons are reported, in [0, 1).
        audited_ledger : labeldp.accounting.PrivacyLedger or None, optional
            The audited run's ledger, on the same examples.

        Returns
        -------
        dict
            ``audit_epsilon`` and ``delta``; with ``audited_ledger`` also ``run_epsilon`` and
            ``run_and_audit_epsilon``.

        Raises
        ------
        labeldp.errors.ConfigError
            If ``delta`` is not in [0, 1), or ``audited_ledger`` covers another number of examples.
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
    """The audits of a run folder stopped after releasing labels and before recording them.

    An audit writes its ledger (``audit_ledger.json``) once its runs have finished; a folder of
    ``run_dir/audit`` that holds a run's ``ledger.json`` without it was stopped part-way (Ctrl-C, a
    crash), and what its runs released is recorded nowhere :func:`folder_epsilon` reads.

    Parameters
    ----------
    run_dir : str or pathlib.Path
        The audited run's folder.

    Returns
    -------
    list of pathlib.Path
        Those audit folders, sorted.
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
    """Refuse a run folder holding audits stopped after releasing labels (:func:`unfinished_audits`).

    Parameters
    ----------
    run_dir : str or pathlib.Path
        The audited run's folder.
    resumed : tuple of pathlib.Path, optional
        Audit folders the caller is about to finish (their runs resume without drawing again).

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If another audit of ``run_dir`` was stopped after releasing labels.
    """
    stopped = [folder for folder in unfinished_audits(run_dir) if folder not in resumed]
    if stopped:
        names = ", ".join(str(folder) for folder in stopped)
        raise RunDirectoryError(
            f"{names}: an audit stopped after its runs released labels, before recording them in its "
            f"{AUDIT_LEDGER}. Run the same audit again to finish it (its runs resume without drawing "
            f"again), or delete {Path(run_dir) / 'audit'} before sharing the run folder"
        )


def folder_epsilon(run_dir: str | Path, delta: float = 0.0) -> float:
    """Epsilon of everything a run folder holds.

    The run's ledger composed with the ledgers of every audit kept in its ``audit/`` folder.

    Parameters
    ----------
    run_dir : str or pathlib.Path
        The run's folder.
    delta : float, optional
        The delta at which the epsilon is reported, in [0, 1) (default 0).

    Returns
    -------
    float
        The epsilon of the composition (``math.inf`` if a release was not private).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``delta`` is not in [0, 1), or an entry of a ledger cannot be recorded (see
        :meth:`labeldp.accounting.PrivacyLedger.from_dict`).
    labeldp.errors.RunDirectoryError
        If an audit was stopped after releasing labels (:func:`refuse_unfinished_audits`): what it
        released is recorded nowhere.
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
