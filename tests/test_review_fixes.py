"""Defects found by reading the code, each fixed with a test that failed before the fix."""

from __future__ import annotations

import numpy as np
import pandas as pd

from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig


def test_dp_sgd_on_a_table_without_a_test_file_reads_no_private_test_label(tmp_path) -> None:
    """The held-out rows of a table's private label column are not measured by DP-SGD (it releases no
    label): the run finishes and says so, where it used to stop after its spend, reading them."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3))
    frame = pd.DataFrame(x, columns=["a", "b", "c"]).assign(y=(x[:, 0] > 0).astype(int))
    frame.to_csv(tmp_path / "t.csv", index=False)
    config = RunConfig(
        dataset="csv",
        table=str(tmp_path / "t.csv"),
        label_column="y",
        classes=("0", "1"),
        method="dp-sgd",
        epsilon=4.0,
        train=TrainConfig(epochs=1, batch_size=32),
    )
    summary = train_run(config, tmp_path / "run", progress=False)
    assert "test_accuracy" not in summary
    assert "not measured" in summary["test_labels"]


def test_the_histogram_prior_of_several_stages_depends_on_who_pays_for_it(tmp_path, monkeypatch) -> None:
    """rr-on-bins-mst's histogram is paid by stage 1's examples, or by all of them with combine_priors:
    an unfinished run whose histogram was drawn one way does not continue the other way (its ledger
    would charge the histogram to examples that then spend all of epsilon on their labels)."""
    import pytest

    from labeldp.data import label_grid, regression_dataset
    from labeldp.errors import RunDirectoryError

    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3))
    values = 10 + 3 * x[:, 0] + rng.normal(size=300)
    toy = regression_dataset("toy", x[:240], values[:240], x[240:], values[240:], label_grid(0, 20, 11))

    def config(combine: bool) -> RunConfig:
        return RunConfig(
            dataset="csv",
            method="rr-on-bins-mst",
            epsilon=2.0,
            prior_epsilon=0.5,
            label_range=(0, 20),
            label_grid=11,
            model="mlp",
            combine_priors=combine,
            insecure_noise_seed=1,
            train=TrainConfig(epochs=1, batch_size=64),
        )

    from labeldp.runs.context import RunContext

    def stop_before_stage_2(self, model, stage, *args, **kwargs):
        train(self, model, stage, *args, **kwargs)
        raise KeyboardInterrupt  # interrupted after stage 1's training, before stage 2's release

    train = RunContext.train
    monkeypatch.setattr(RunContext, "train", stop_before_stage_2)
    with pytest.raises(KeyboardInterrupt):
        train_run(config(False), tmp_path / "run", dataset=toy, progress=False)
    monkeypatch.undo()
    with pytest.raises(RunDirectoryError, match="whose releases prior depend"):
        train_run(config(True), tmp_path / "run", dataset=toy, progress=False)
