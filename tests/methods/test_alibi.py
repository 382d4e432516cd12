"""The ALIBI method (methods/alibi.py) end to end: a run on the digits spends its epsilon and learns;
ALIBI refuses a loss it does not use."""

from __future__ import annotations

import pytest

from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig


def test_alibi_run_on_digits(tmp_path):
    config = RunConfig(
        dataset="digits",
        method="alibi",
        epsilon=4.0,
        train=TrainConfig(epochs=20, batch_size=32, lr=0.02, weight_decay=1e-3),
    )
    summary = train_run(config, tmp_path / "run", progress=False)
    assert summary["epsilon"] == pytest.approx(4.0, abs=1e-3)
    assert summary["test_accuracy"] > 0.6
    with pytest.raises(ValueError, match="alibi"):
        RunConfig(method="alibi", epsilon=1.0, options={"loss": "ce"}).resolved()
