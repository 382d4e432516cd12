"""What an audit spends (labeldp.audit.spend): the audit runs' ledgers on the audited run's private rows,
composed per privacy unit as the audited run's ledger composes them."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.accounting import NEIGHBORING_RELATION, PrivacyLedger
from labeldp.audit.spend import AUDIT_LEDGER, AuditLedger, folder_epsilon
from labeldp.boundary import PrivateLabels, release_noisy_histogram, release_randomized_response

#: six training rows of two users (three rows each), then two test rows of a third
UNITS = np.array([0, 0, 0, 1, 1, 1, 2, 2])
TRAIN = np.arange(6)


def _run_ledger(test: bool) -> PrivacyLedger:
    """What a run at epsilon 2 per user records: its training labels by randomized response (2 / 3 a row),
    a histogram over them (an aggregate, once per user), and with ``test`` its private test labels."""
    ledger = PrivacyLedger(UNITS.size, units=UNITS)
    labels = PrivateLabels.from_indices([0, 1, 0, 1, 1, 0, 1, 0], 2)
    release_randomized_response(ledger, labels[TRAIN], TRAIN, 2, 2.0, 0, "stage1")
    release_noisy_histogram(ledger, labels[TRAIN], TRAIN, np.zeros(6, dtype=int), 1, 2, 2.0, 0, "prior")
    if test:
        release_randomized_response(ledger, labels[6:], np.arange(6, 8), 2, 2.0, 0, "test")
    return ledger


def test_an_audit_of_a_run_per_user_states_each_users_spending_never_each_rows(tmp_path) -> None:
    run = _run_ledger(test=True)
    assert run.epsilon() == pytest.approx(4.0, abs=1e-3)  # per user: 3 x 2/3 by randomized response, 2 the histogram
    canary = tmp_path / "canary_run"
    canary.mkdir()
    _run_ledger(test=False).save(canary / "ledger.json")  # the audit's run: the training labels once more
    spend = AuditLedger(UNITS.size, NEIGHBORING_RELATION, UNITS)  # the audited run's private rows, test ones included
    spend.add_run(canary, "canary")
    report = spend.report(0.0, run)
    assert report["audit_epsilon"] == pytest.approx(4.0, abs=1e-3)  # not 2/3 + 2/3: a user's three rows together
    assert report["run_epsilon"] == pytest.approx(4.0, abs=1e-3)
    assert report["run_and_audit_epsilon"] == pytest.approx(8.0, abs=1e-3)  # never below the run's alone

    folder = tmp_path / "run"
    (folder / "audit" / "label").mkdir(parents=True)
    run.save(folder / "ledger.json")
    spend.ledger.save(folder / "audit" / "label" / AUDIT_LEDGER)
    assert folder_epsilon(folder) == pytest.approx(8.0, abs=1e-3)  # the histograms charged once per user
