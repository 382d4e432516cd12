"""The report of a sweep (experiments/sweep_report.py): only runs that differ in their seed are averaged,
AUC and log loss, and regression metrics (evaluation.py's) with their own direction."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.evaluation import regression_metrics
from labeldp.experiments.sweep_report import aggregate, format_report


def test_report_averages_only_runs_that_differ_in_their_seed() -> None:
    def row(key, dataset, method, epsilon, accuracy):
        return {
            "key": key,
            "status": "done",
            "dataset": dataset,
            "method": method,
            "target_epsilon": epsilon,
            "test_accuracy": accuracy,
        }

    rows = [
        row("mnist/e1/lp-2st/run0", "mnist", "lp-2st", "1.0", "0.90"),
        row("mnist/e1/lp-2st/run1", "mnist", "lp-2st", "1.0", "0.92"),
        row("mnist/e1/lp-2st-cluster/run0", "mnist", "lp-2st", "1.0", "0.97"),
        row("mnist/non-private-fit/run0", "mnist", "non-private", "", "0.99"),
        row("digits/e1/lp-2st/epochs6/temperature1.0/run0", "digits", "lp-2st", "1", "0.80"),
        row("digits/e1/lp-2st/epochs6/temperature2.0/run0", "digits", "lp-2st", "1", "0.70"),
        row("digits/e1e-05/lp-1st/epochs6/run0", "digits", "lp-1st", "1e-05", "0.10"),
        {**row("t/custom", "digits", "alibi", "1", "0.5"), "status": "failed"},
        {"status": "done", "dataset": "csv", "method": "rr", "target_epsilon": "2", "test_accuracy": "0.6"},
    ]
    stats = {(s["dataset"], s["method"], s["epsilon"]): (round(s["mean"], 4), s["runs"]) for s in aggregate(rows)}
    assert stats == {
        ("mnist", "lp-2st", 1.0): (0.91, 2),
        ("mnist", "lp-2st-cluster", 1.0): (0.97, 1),
        ("mnist", "non-private-fit", None): (0.99, 1),
        ("digits", "lp-2st/epochs=6/temperature=1.0", 1.0): (0.8, 1),  # a one-value override is named too
        ("digits", "lp-2st/epochs=6/temperature=2.0", 1.0): (0.7, 1),
        ("digits", "lp-1st/epochs=6", 1e-05): (0.1, 1),
        ("csv", "rr", 2.0): (0.6, 1),
    }


def test_reports_show_auc_and_log_loss() -> None:
    rows = [
        {
            "key": f"t/e1/lp-1st/run{s}",
            "status": "done",
            "dataset": "t",
            "method": "lp-1st",
            "target_epsilon": "1",
            "test_accuracy": "0.9",
            "test_auc": str(0.8 + 0.02 * s),
            "test_log_loss": "0.3",
        }
        for s in range(2)
    ]
    text = format_report(aggregate(rows, "auc"))
    assert "t: test AUC" in text and "0.8100 ± 0.0141 (2)" in text
    with pytest.raises(ValueError, match="metric must be one of"):
        aggregate(rows, "f1")


def test_regression_metrics_and_the_report() -> None:
    metrics = regression_metrics(
        np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]]), np.array([1.0, 2.0, 4.0]), np.array([2.5, 2.0])
    )  # predictions 1.5 and 4
    assert metrics == pytest.approx({"test_rmse": np.sqrt(2.5), "test_mse": 2.5, "test_mae": 1.5})

    def row(key, method, epsilon, rmse):
        return {
            "key": key,
            "status": "done",
            "dataset": "movielens",
            "method": method,
            "target_epsilon": epsilon,
            "test_accuracy": "",
            "test_rmse": rmse,
            "test_mse": str(float(rmse) ** 2),
            "test_mae": "0.7",
        }

    rows = [
        row("movielens/e1/rr-on-bins/run0", "rr-on-bins", "1.0", "1.00"),
        row("movielens/e1/rr-on-bins/run1", "rr-on-bins", "1.0", "0.98"),
        row("movielens/non-private/run0", "non-private", "", "0.91"),
        {
            "key": "digits/e1/lp-1st/run0",
            "status": "done",
            "dataset": "digits",
            "method": "lp-1st",
            "target_epsilon": "1",
            "test_accuracy": "0.8",
        },
    ]
    stats = aggregate(rows)
    assert {(s["dataset"], s["metric"]) for s in stats} == {("movielens", "rmse"), ("digits", "accuracy")}
    text = format_report(stats)
    assert "movielens: test RMSE (lower is better)" in text and "0.9900 ± 0.0141 (2)" in text
    assert "digits: test accuracy %" in text and "80.00" in text
    assert {s["mean"] for s in aggregate(rows, "mae")} == {0.7}


def test_a_report_of_a_results_file_plots_beside_it(tmp_path) -> None:
    """``report`` takes the sweep folder or its results.csv; the plot goes in the folder either way."""
    import csv

    from labeldp.experiments.sweep_report import report
    from labeldp.experiments.sweep_runner import RESULT_COLUMNS

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


def test_a_report_is_titled_by_the_tables_name_and_shows_no_spread_for_one_run() -> None:
    from labeldp.experiments.sweep_report import aggregate, format_report

    rows = [
        {"status": "done", "dataset": "csv", "table": "adult-train", "key": f"csv/e1/lp-1st/run{seed}",
         "method": "lp-1st", "target_epsilon": "1", "test_accuracy": accuracy}
        for seed, accuracy in ((0, "0.8"), (1, "0.82"))
    ] + [{"status": "done", "dataset": "csv", "table": "adult-train", "key": "csv/e2/lp-1st/run0",
          "method": "lp-1st", "target_epsilon": "2", "test_accuracy": "0.84"}]  # fmt: skip
    text = format_report(aggregate(rows))
    assert text.startswith("adult-train: test accuracy %") and "csv" not in text
    assert "81.00 ± 1.41 (2)" in text and "84.00 (1)" in text and "± 0.00" not in text


def test_the_sweep_plot_says_what_to_compare_with_and_shows_its_whole_title(tmp_path) -> None:
    """The runs guide's sweep (digits, a one-value override) beside MNIST's profiles: every title within the
    figure, each override in the legend, the paper's figure where it has one, the model without privacy and
    chance as lines (the title was clipped, the override hidden, no reference drawn)."""
    import matplotlib

    matplotlib.use("Agg")
    from labeldp.experiments.sweep_report import chance_levels, privacy_utility_figure

    rows = [
        {"key": f"digits/e{e}/{m}/epochs1/run{s}", "status": "done", "dataset": "digits", "method": m,
         "target_epsilon": str(e), "test_accuracy": str(0.7 + 0.05 * e + 0.01 * s), "num_classes": "10"}
        for m in ("lp-1st", "lp-2st") for e in (1, 2, 4) for s in (0, 1)
    ] + [
        {"key": "digits/non-private/epochs1/run0", "status": "done", "dataset": "digits", "method": "non-private",
         "target_epsilon": "", "test_accuracy": "0.97", "num_classes": "10"},
        {"key": "mnist/e2/lp-2st/run0", "status": "done", "dataset": "mnist", "method": "lp-2st",
         "target_epsilon": "2", "test_accuracy": "0.993", "num_classes": "10"},
    ]  # fmt: skip
    figure = privacy_utility_figure(aggregate(rows), chance_levels(rows))
    figure.savefig(tmp_path / "plot.png")  # rendered, as a report writes it
    renderer = figure.canvas.get_renderer()
    whole = figure.bbox
    digits, mnist = figure.axes
    for ax in (digits, mnist):
        box = ax.title.get_window_extent(renderer)
        assert whole.x0 <= box.x0 and box.x1 <= whole.x1 and box.y1 <= whole.y1, ax.title.get_text()
    assert digits.get_title().startswith("digits: accuracy (%) vs privacy")
    legend = [text.get_text() for text in digits.get_legend().get_texts()]
    assert sorted(legend) == ["chance", "lp-1st/epochs=1", "lp-2st/epochs=1", "non-private/epochs=1 (no privacy)"]
    levels = [line.get_ydata()[0] for line in digits.lines if line.get_linestyle() in ("--", "-.")]
    assert levels == [pytest.approx(97.0), pytest.approx(10.0)]
    mnist_legend = [text.get_text() for text in mnist.get_legend().get_texts()]
    assert "lp-2st: the paper (Ghazi et al. 2021)" in mnist_legend
    paper = next(line for line in mnist.lines if line.get_linestyle() == ":")
    assert list(paper.get_ydata()) == [95.82, 98.78, 99.14, 99.24]
