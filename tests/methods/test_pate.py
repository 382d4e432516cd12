"""The PATE method (methods/pate.py) end to end: a run records what it released (its epsilon
recomputed from the recorded queries and noise), and bad settings are refused before anything is
written."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from labeldp.config.pate_config import PATEConfig
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig
from tests.helpers import analytic_gaussian_epsilon


@pytest.mark.parametrize("aggregator", ["gnmax", "confident"])
def test_pate_run_on_digits_records_what_it_released(tmp_path, aggregator):
    pate = PATEConfig(teachers=10, queries=300, aggregator=aggregator, threshold=0.5, teacher_epochs=5)
    config = RunConfig(dataset="digits", method="pate", epsilon=8.0, options=pate, train=TrainConfig(epochs=3))
    summary = train_run(config, tmp_path / "run", progress=False)
    assert summary["epsilon"] <= 8.0 and summary["delta"] == 1e-5 and summary["queries"] == 300
    released = np.load(tmp_path / "run" / "noisy_labels" / "pate.npz")
    assert released["queries"].size == 300 and summary["answered"] == int(released["answered"].sum())
    assert not (tmp_path / "run" / "checkpoints" / "teachers.npz").exists()
    # the ledger's epsilon, recomputed independently from the recorded queries and noise
    sigma = float(released["noise_std"])
    sigma1 = 2.0 * sigma if aggregator == "confident" else math.inf
    mu = math.sqrt(300 * (2 / sigma**2 + 1 / sigma1**2))
    ledger = json.loads((tmp_path / "run" / "ledger.json").read_text())
    assert ledger["epsilon"] == pytest.approx(analytic_gaussian_epsilon(mu, 1e-5), abs=1e-3)
    assert ledger["epsilon"] == pytest.approx(summary["epsilon"], abs=1e-6)
    assert train_run(config, tmp_path / "run", progress=False) == summary  # finished: nothing redrawn


def test_pate_run_refuses_bad_settings_before_writing_anything(tmp_path):
    with pytest.raises(ValueError, match="cannot exceed"):
        train_run(
            RunConfig(dataset="digits", method="pate", epsilon=1.0, options=PATEConfig(queries=5000)),
            tmp_path / "a",
            progress=False,
        )
    assert not (tmp_path / "a").exists()
    with pytest.raises(ValueError, match="does not use prior"):
        RunConfig(dataset="digits", method="pate", epsilon=1.0, prior="cluster").resolved()
