"""LP-2ST with counts (methods/cell_counts.py): every label released once, by RR or in one cell's noisy counts;
the cells come from public inputs and the first model; refusals before anything is written."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.errors import ConfigError
from labeldp.priors import cells_of
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig


def test_each_label_is_released_once_and_the_model_learns(blobs, tmp_path) -> None:
    config = RunConfig(
        dataset="csv",
        method="lp-2st-counts",
        epsilon=1.0,
        cell_rows=5,
        train=TrainConfig(epochs=5, batch_size=64),
        insecure_noise_seed=0,
    )
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["stage1", "stage2"]
    first, second = (np.flatnonzero(e.members) for e in ledger.entries)
    assert np.intersect1d(first, second).size == 0 and first.size + second.size == 600
    assert summary["epsilon"] == pytest.approx(1.0, abs=1e-3)
    with np.load(tmp_path / "run" / "noisy_labels" / "stage2.npz") as stage2:
        assert "labels" not in stage2.files  # counts, no label per row
        sizes = np.bincount(stage2["cells"])
        assert stage2["counts"].shape == (sizes.size, 10) and sizes.min() >= 5
    assert summary["stages"][1]["cells"] == sizes.size
    assert summary["test_accuracy"] > 0.6  # well-separated blobs


def test_cells_group_rows_the_model_scores_alike() -> None:
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(400, 3))
    scored_high = inputs[:, 0] > 0
    probabilities = np.where(scored_high[:, None], [0.1, 0.9], [0.8, 0.2])
    cells = cells_of(inputs, probabilities, 20, seed=0)
    assert np.bincount(cells).min() >= 20
    for cell in np.unique(cells):  # one score per cell
        assert np.unique(scored_high[cells == cell]).size == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"cell_rows": 0}, "cell_rows"), ({"consensus": True}, "consensus"), ({"stages": (0.3, 0.3, 0.4)}, "stage")],
)
def test_refused_before_anything_is_written(overrides, message, tmp_path) -> None:
    config = RunConfig(dataset="digits", method="lp-2st-counts", epsilon=1.0, **overrides)
    with pytest.raises(ConfigError, match=message):
        train_run(config, tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()


def test_numeric_labels_are_refused(toy, tmp_path) -> None:
    config = RunConfig(dataset="csv", method="lp-2st-counts", epsilon=1.0, label_range=(0, 20), label_grid=11)
    with pytest.raises(ConfigError, match="numeric"):
        train_run(config, tmp_path / "run", progress=False, dataset=toy)
    assert not (tmp_path / "run").exists()
