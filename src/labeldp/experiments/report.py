"""Summaries of a sweep: mean/std table by method and epsilon, and the privacy-utility plot.

Each dataset is compared by its task's metric (test accuracy for classes, test RMSE for numeric
labels), or by one named with ``metric``; accuracy is shown in %, errors in the label's units."""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path
from statistics import mean, stdev

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402
from labeldp.errors import ConfigError, MissingFileError

#: the metrics of results.csv a report can show: title, factor for the table, and whether larger is better
METRICS = {"test_accuracy": ("test accuracy %", 100.0, True), "test_rmse": ("test RMSE", 1.0, False),
           "test_mse": ("test MSE", 1.0, False), "test_mae": ("test MAE", 1.0, False)}


def read_results(path: str | Path) -> list[dict[str, str]]:
    path = Path(path)
    if path.is_dir():
        path = path / "results.csv"
    if not path.exists():
        raise MissingFileError(f"{path} does not exist (run `labeldp sweep` first)")
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def variant(row: dict[str, str]) -> tuple[str, ...]:
    """What a result row ran: the parts of its key between the dataset and the seed, without the
    epsilon (``("lp-2st-cluster",)`` for ``mnist/e1/lp-2st-cluster/run0``, ``("lp-2st",
    "temperature2.0")`` for a grid run); the method alone for a key of another form."""
    parts = (row.get("key") or "").split("/")
    if len(parts) >= 3 and parts[0] == row["dataset"] and re.fullmatch(r"run\d+", parts[-1]):
        middle = parts[1:-1]
        if re.fullmatch(r"e[0-9.]+(e[+-]?\d+)?", middle[0]):
            middle = middle[1:]
        if middle:
            return tuple(middle)
    return (row["method"],)


def dataset_metric(rows: list[dict[str, str]], dataset: str) -> str:
    """The metric ``dataset``'s runs are compared by: test RMSE if they report it (numeric labels),
    else test accuracy."""
    return "test_rmse" if any(row.get("test_rmse") not in (None, "") for row in rows
                              if row["dataset"] == dataset and row["status"] == "done") else "test_accuracy"


def aggregate(rows: list[dict[str, str]], metric: str | None = None) -> list[dict]:
    """Mean and standard deviation of ``metric`` (default: each dataset's own, :func:`dataset_metric`)
    per dataset, :func:`variant` and target epsilon, done runs only: only runs that differ in nothing
    but their seed are averaged together. A variant is named by its parts, less those that every run
    of the dataset shares after the first (a grid value that did not vary). A run whose noise was
    reproducible (``--insecure-noise-seed``) is its own variant, marked NOT PRIVATE."""
    if metric is not None and metric not in METRICS:
        raise ConfigError(f"unknown metric {metric!r}; choose one of {', '.join(METRICS)}")
    chosen = {dataset: metric or dataset_metric(rows, dataset) for dataset in {row["dataset"] for row in rows}}
    done = [row for row in rows if row["status"] == "done" and row.get(chosen[row["dataset"]]) not in (None, "")]
    shared = {}
    for dataset in {row["dataset"] for row in done}:
        shared[dataset] = set.intersection(*(set(variant(row)[1:]) for row in done if row["dataset"] == dataset))
    groups: dict[tuple, list[float]] = defaultdict(list)
    for row in done:
        first, *rest = variant(row)
        name = "/".join([first, *(part for part in rest if part not in shared[row["dataset"]])])
        if row.get("noise_private") == "False":
            name += " (NOT PRIVATE)"
        epsilon = float(row["target_epsilon"]) if row["target_epsilon"] else None
        groups[(row["dataset"], name, epsilon)].append(float(row[chosen[row["dataset"]]]))
    return [{"dataset": d, "method": m, "epsilon": e, "mean": mean(v), "std": stdev(v) if len(v) > 1 else 0.0,
             "runs": len(v), "metric": chosen[d]}
            for (d, m, e), v in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0))]


def format_epsilon(epsilon: float | None) -> str:
    return "inf" if epsilon is None else f"{epsilon:.3g}"


def _cell(stat: dict, spread: bool) -> str:
    _, factor, _ = METRICS[stat.get("metric", "test_accuracy")]
    if factor == 100.0:
        return (f"{100 * stat['mean']:.2f} ± {100 * stat['std']:.2f} ({stat['runs']})" if spread
                else f"{100 * stat['mean']:.1f}")
    return f"{stat['mean']:.4g} ± {stat['std']:.2g} ({stat['runs']})" if spread else f"{stat['mean']:.4g}"


def format_report(stats: list[dict], failed: int = 0, spread: bool = True) -> str:
    """A table per dataset: methods as rows, epsilons as columns, cells 'mean ± std (runs)' of the
    dataset's metric, accuracy in % (just the mean with ``spread=False``)."""
    lines = []
    for dataset in dict.fromkeys(s["dataset"] for s in stats):
        part = [s for s in stats if s["dataset"] == dataset]
        title, _, larger_is_better = METRICS[part[0].get("metric", "test_accuracy")]
        epsilons = sorted({s["epsilon"] for s in part if s["epsilon"] is not None})
        has_reference = any(s["epsilon"] is None for s in part)
        header = ["method"] + [f"eps={e:g}" for e in epsilons] + (["non-private"] if has_reference else [])
        cells = {(s["method"], s["epsilon"]): _cell(s, spread) for s in part}
        table = [header] + [[m] + [cells.get((m, e), "") for e in epsilons] + ([cells.get((m, None), "")] if has_reference else [])
                            for m in dict.fromkeys(s["method"] for s in part)]
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        lines.append(f"{dataset}: {title}" + ("" if larger_is_better else " (lower is better)")
                     + (", mean ± std (runs)" if spread else ""))
        for index, row in enumerate(table):
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines.append("")
    if failed:
        lines.append(f"{failed} run(s) failed; see error.txt in their run directories.")
    return "\n".join(lines).rstrip() + "\n"


def plot_privacy_utility(stats: list[dict], path: str | Path) -> Path:
    """The metric against epsilon (log scale), one line with error bars per method, one panel per
    dataset; the non-private reference is a dashed horizontal line with its std as a band."""
    datasets = list(dict.fromkeys(s["dataset"] for s in stats))
    figure, axes = plt.subplots(1, len(datasets), figsize=(6 * len(datasets), 4.5), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = [s for s in stats if s["dataset"] == dataset]
        title, factor, larger_is_better = METRICS[part[0].get("metric", "test_accuracy")]
        for method in dict.fromkeys(s["method"] for s in part if s["epsilon"] is not None):
            points = sorted((s for s in part if s["method"] == method and s["epsilon"] is not None), key=lambda s: s["epsilon"])
            ax.errorbar([p["epsilon"] for p in points], [factor * p["mean"] for p in points],
                        yerr=[factor * p["std"] for p in points], marker="o", capsize=4, label=method)
        for reference in (s for s in part if s["epsilon"] is None):
            ax.axhline(factor * reference["mean"], color="black", linestyle="--",
                       label=f"{reference['method']} (no privacy)")
            ax.axhspan(factor * (reference["mean"] - reference["std"]), factor * (reference["mean"] + reference["std"]),
                       color="black", alpha=0.08)
        ax.set_xscale("log", base=2)
        ticks = sorted({s["epsilon"] for s in part if s["epsilon"] is not None})
        ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("label-DP epsilon (log scale)")
        name = title.replace(" %", " (%)")
        ax.set_ylabel(name + ("" if larger_is_better else ", lower is better"))
        runs = max(s["runs"] for s in part)
        ax.set_title(f"{dataset}: {name.removeprefix('test ')} vs privacy (mean ± std, up to {runs} "
                     f"run{'s' if runs > 1 else ''} per point)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right" if larger_is_better else "upper right")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def report(sweep_dir: str | Path, metric: str | None = None) -> tuple[str, Path]:
    """Table text and plot path for a sweep folder (its ``results.csv``), by ``metric`` (default: each
    dataset's own)."""
    rows = read_results(sweep_dir)
    stats = aggregate(rows, metric)
    if not stats:
        raise ConfigError(f"{sweep_dir} has no finished runs to report" + (f" with {metric}" if metric else ""))
    failed = sum(1 for r in rows if r["status"] == "failed")
    return format_report(stats, failed), plot_privacy_utility(stats, Path(sweep_dir) / "privacy_utility.png")
