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


def test_a_configuration_with_unknown_options_is_refused_with_a_sentence() -> None:
    """A config.json written by another version names what this one does not know."""
    import pytest

    from labeldp.errors import ConfigError

    data = RunConfig(method="lp-1st", epsilon=1.0).to_dict()
    assert RunConfig.from_dict(data) == RunConfig(method="lp-1st", epsilon=1.0)
    with pytest.raises(ConfigError, match="does not know: shiny, train.turbo"):
        RunConfig.from_dict({**data, "shiny": 1, "train": {**data["train"], "turbo": True}})


def test_a_method_registered_under_a_taken_alias_registers_nothing() -> None:
    """An alias that collides leaves neither the method's name nor its other aliases registered."""
    import pytest

    from labeldp.errors import ConfigError
    from labeldp.methods import registry

    method = registry.Method("fresh-method", "a test method", lambda context: None)
    with pytest.raises(ConfigError, match="already registered"):
        registry.register_method(method, "other-alias", "lp-1st")
    assert "fresh-method" not in registry.method_names() and "other-alias" not in registry.method_names()


def test_labeldps_own_names_are_taken_before_their_modules_are_imported() -> None:
    """A fresh process registering a method or a dataset under a built-in name is refused at once."""
    import subprocess
    import sys

    script = (
        "import pytest\n"
        "from labeldp.errors import ConfigError\n"
        "from labeldp.methods.registry import Method, register_method, get_method\n"
        "from labeldp.data.registry import Dataset, register_dataset\n"
        "with pytest.raises(ConfigError):\n"
        "    register_method(Method('lp-2st', 'mine', lambda context: None))\n"
        "assert get_method('lp-2st').help.startswith('two stages')\n"
        "with pytest.raises(ConfigError):\n"
        "    register_dataset(Dataset('digits', 'embedded', lambda request: None))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_a_report_of_a_results_file_plots_beside_it(tmp_path) -> None:
    """``report`` takes the sweep folder or its results.csv; the plot goes in the folder either way."""
    import csv

    from labeldp.experiments.report import report
    from labeldp.experiments.sweep import RESULT_COLUMNS

    rows = [
        {
            "key": f"digits/e{e}/lp-1st/run0",
            "status": "done",
            "dataset": "digits",
            "method": "lp-1st",
            "target_epsilon": e,
            "epsilon": e,
            "delta": 0,
            "seed": 0,
            "test_accuracy": 0.5 + e / 10,
        }
        for e in (1, 2)
    ]
    with open(tmp_path / "results.csv", "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=RESULT_COLUMNS, restval="")
        writer.writeheader()
        writer.writerows(rows)
    _, plot = report(tmp_path / "results.csv")
    assert plot == tmp_path / "privacy_utility.png" and plot.exists()


def test_prior_rows_are_checked_before_anything_is_drawn(tmp_path, monkeypatch) -> None:
    """A table's prior columns are public: a missing value or a row that is not a distribution is
    refused in the first pass over the table, before the first block is drawn."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    import pytest

    from labeldp.boundary import column, privatize_table
    from labeldp.errors import ConfigError, DataError

    drawn = []
    monkeypatch.setattr(column.Draws, "draw", lambda self, *args: drawn.append(1))
    labels = np.arange(300) % 2
    priors = np.full((300, 2), 0.5)
    for damaged, error in ((np.where(np.arange(300)[:, None] == 299, 0.9, priors), ConfigError), (None, DataError)):
        p0 = pa.array(
            priors[:, 0] if damaged is None else damaged[:, 0], mask=np.arange(300) == 299 if damaged is None else None
        )
        table = pa.table({"id": np.arange(300), "y": labels, "p0": p0, "p1": priors[:, 1]})
        pq.write_table(table, tmp_path / "t.parquet")
        with pytest.raises(error):
            privatize_table(
                tmp_path / "t.parquet",
                tmp_path / "out",
                label_column="y",
                id_column="id",
                classes=[0, 1],
                epsilon=1.0,
                prior_columns=["p0", "p1"],
                batch_rows=100,
            )
    assert drawn == [] and not (tmp_path / "out").exists()
