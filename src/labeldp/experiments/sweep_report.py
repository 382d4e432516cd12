"""Summaries of a sweep: mean/std table by method and epsilon, and the privacy-utility plot.

Each dataset is compared by its task's metric (test AUC for two classes, test accuracy for more, test
RMSE for numeric labels), or by one named with ``metric``; accuracy is shown in %, errors in the label's units."""

from __future__ import annotations

import csv
import re
from collections import defaultdict
from pathlib import Path
from statistics import mean, stdev

import matplotlib

matplotlib.use("Agg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402

from labeldp.accounting.rounding import format_epsilon  # noqa: F401  (re-exported)
from labeldp.errors import ConfigError, MissingFileError


def read_results(path: str | Path) -> list[dict[str, str]]:
    """A sweep's rows (its folder or its ``results.csv``; a folder of runs without one read run by run), every
    value as text."""
    path = Path(path)
    if path.is_dir() and not (path / "results.csv").exists():  # a run's folder, or a demo's
        from labeldp.experiments.sweep_runner import folder_rows

        rows = [{k: "" if v is None else str(v) for k, v in row.items()} for row in folder_rows(path)]
        if rows:
            return rows
    if path.is_dir():
        path = path / "results.csv"
    if not path.exists():
        raise MissingFileError(f"{path} does not exist: no sweep wrote it, and no run of labeldp is under it")
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def variant(row: dict[str, str]) -> tuple[str, ...]:
    """What a result row ran: the parts of its key between the dataset and the seed, less the epsilon
    (``("lp-2st-cluster",)`` for ``mnist/e1/lp-2st-cluster/run0``); the method alone for a key of another
    form."""
    parts = (row.get("key") or "").split("/")
    if len(parts) >= 3 and parts[0] == row["dataset"] and re.fullmatch(r"run\d+", parts[-1]):
        middle = parts[1:-1]
        if re.fullmatch(r"e[0-9.]+(e[+-]?\d+)?", middle[0]):
            middle = middle[1:]
        if middle:
            return tuple(middle)
    return (row["method"],)


#: what a report can show: name -> (results.csv column, heading, scale of the printed numbers, larger is better)
METRICS = {
    "accuracy": ("test_accuracy", "test accuracy %", 100.0, True),
    "auc": ("test_auc", "test AUC", 1.0, True),
    "log-loss": ("test_log_loss", "test log-loss", 1.0, False),
    "rmse": ("test_rmse", "test RMSE", 1.0, False),
    "mse": ("test_mse", "test MSE", 1.0, False),
    "mae": ("test_mae", "test MAE", 1.0, False),
}


def dataset_metric(rows: list[dict[str, str]], dataset: str) -> str:
    """The metric ``dataset``'s runs are compared by unless one is named: ``rmse`` where they report it,
    ``auc`` where every one reports it (two classes: accuracy hides rare positives, a majority-class model of
    a 1 %-positive table being 99 % accurate), else ``accuracy``."""
    done = [row for row in rows if row["dataset"] == dataset and row["status"] == "done"]
    if any(row.get("test_rmse") not in (None, "") for row in done):
        return "rmse"
    return "auc" if done and all(row.get("test_auc") not in (None, "") for row in done) else "accuracy"


def aggregate(rows: list[dict[str, str]], metric: str | None = None) -> list[dict]:
    """Mean, standard deviation and number of finished runs of a test ``metric`` (None: each dataset's own,
    :func:`dataset_metric`) per dataset, :func:`variant` and target epsilon, sorted so.

    Only runs that differ in nothing but their seed are averaged together. A variant is named by its parts
    less those every run of the dataset shares after the first (a grid value that did not vary); a run whose
    noise was reproducible is its own variant, marked NOT PRIVATE. A table's runs are titled by the table's
    name."""
    if metric is not None:
        _metric(metric)
    chosen = {dataset: metric or dataset_metric(rows, dataset) for dataset in {row["dataset"] for row in rows}}
    column = {dataset: METRICS[name][0] for dataset, name in chosen.items()}
    done = [row for row in rows if row["status"] == "done"]
    if metric is not None:  # a dataset none of whose runs has the metric asked for: not its metric
        measured = {row["dataset"] for row in done if row.get(column[row["dataset"]]) not in (None, "")}
        done = [row for row in done if row["dataset"] in measured]
    shared = {}
    for dataset in {row["dataset"] for row in done}:
        shared[dataset] = set.intersection(*(set(variant(row)[1:]) for row in done if row["dataset"] == dataset))
    groups: dict[tuple, list[float | None]] = defaultdict(list)
    metric_of = {}
    for row in done:
        first, *rest = variant(row)
        parts = [_readable(p) for p in rest if p not in shared[row["dataset"]] or not p.startswith(_DATA_OPTIONS)]
        name = "/".join([first, *parts])
        if row.get("noise_private") == "False":
            name += " (NOT PRIVATE)"
        epsilon = float(row["target_epsilon"]) if row["target_epsilon"] else None
        title = (row.get("table") or "csv") if row["dataset"] == "csv" else row["dataset"]  # a grid: the table
        metric_of[title] = chosen[row["dataset"]]
        value = row.get(column[row["dataset"]])
        groups[(title, name, epsilon)].append(None if value in (None, "") else float(value))  # None: unmeasured
    stats = []
    for (d, m, e), found in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] or 0)):
        v = [value for value in found if value is not None]
        stats.append({
            "dataset": d,
            "method": m,
            "epsilon": e,
            "mean": mean(v) if v else None,
            "std": stdev(v) if len(v) > 1 else 0.0,
            "runs": len(v),
            "unmeasured": len(found) - len(v),
            "metric": metric_of[d],
        })  # fmt: skip
    return stats


#: grid options that name the data rather than how it was trained: a variant's name leaves them out where every
#: run of the dataset shares them (every other option given is named)
_DATA_OPTIONS = ("table", "test_table", "label_column", "classes", "data_dir", "id_column", "features", "drop",
                 "one_row_per_person", "dataset_name")  # fmt: skip


def _readable(part: str) -> str:
    """A grid part of a run's key as ``name=value`` (``epochs6`` -> ``epochs=6``)."""
    from labeldp.config.overrides import override_names

    name = next((n for n in override_names() if part.startswith(n) and len(part) > len(n)), None)
    return part if name is None else f"{name}={part[len(name) :]}"


def _metric(name: str) -> tuple[str, str, float, bool]:
    if name not in METRICS:
        raise ConfigError(f"metric must be one of {', '.join(METRICS)}, got {name!r}")
    return METRICS[name]


def _cell(stat: dict, spread: bool) -> str:
    _, _, scale, _ = METRICS[stat["metric"]]
    digits = 2 if scale == 100.0 else 4
    if stat["mean"] is None:  # every run's released test labels could not measure it
        return f"unmeasured ({stat['unmeasured']})"
    if stat["unmeasured"]:
        return f"{scale * stat['mean']:.{digits}f} ({stat['runs']}; {stat['unmeasured']} unmeasured)"
    if not spread:
        return f"{scale * stat['mean']:.{digits - 1}f}"
    if stat["runs"] == 1:  # one run has no spread to show
        return f"{scale * stat['mean']:.{digits}f} (1)"
    return f"{scale * stat['mean']:.{digits}f} ± {scale * stat['std']:.{digits}f} ({stat['runs']})"


def format_report(stats: list[dict], failed: int = 0, spread: bool = True) -> str:
    """A table per dataset: methods as rows, epsilons as columns, cells 'mean ± std (runs)' of the dataset's
    metric ('mean (1)' for one run; the mean alone without ``spread``), accuracy in %."""
    lines = []
    for dataset in dict.fromkeys(s["dataset"] for s in stats):
        part = [s for s in stats if s["dataset"] == dataset]
        _, heading, _, larger_is_better = METRICS[part[0]["metric"]]
        epsilons = sorted({s["epsilon"] for s in part if s["epsilon"] is not None})
        has_reference = any(s["epsilon"] is None for s in part)
        header = ["method"] + [f"eps={e:g}" for e in epsilons] + (["non-private"] if has_reference else [])
        cells = {(s["method"], s["epsilon"]): _cell(s, spread) for s in part}
        table = [header] + [
            [m] + [cells.get((m, e), "") for e in epsilons] + ([cells.get((m, None), "")] if has_reference else [])
            for m in dict.fromkeys(s["method"] for s in part)
        ]
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        lines.append(
            f"{dataset}: {heading}"
            + ("" if larger_is_better else " (lower is better)")
            + (", mean ± std (runs)" if spread else "")
        )
        for index, row in enumerate(table):
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
            if index == 0:
                lines.append("  ".join("-" * w for w in widths))
        lines.append("")
    if failed:
        lines.append(f"{failed} run(s) failed; see error.txt in their run directories.")
    return "\n".join(lines).rstrip() + "\n"


def privacy_utility_figure(stats: list[dict], chance: dict[str, float] | None = None):
    """Each dataset's metric against epsilon (log scale), a panel per dataset: a line with error bars per
    method (every override named), and the references where they exist: the paper's figure (dotted, its
    methods), the model without privacy (dashed, its std a band) and ``chance[dataset]`` (grey)."""
    from labeldp.recipes.builtin_profiles import PAPER_ACCURACY

    datasets = list(dict.fromkeys(s["dataset"] for s in stats))
    figure, axes = plt.subplots(1, len(datasets), figsize=(6.5 * len(datasets), 5.0), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        part = [s for s in stats if s["dataset"] == dataset and s["mean"] is not None]
        _, heading, scale, larger_is_better = METRICS[next(s for s in stats if s["dataset"] == dataset)["metric"]]
        for method in dict.fromkeys(s["method"] for s in part if s["epsilon"] is not None):
            points = sorted(
                (s for s in part if s["method"] == method and s["epsilon"] is not None), key=lambda s: s["epsilon"]
            )
            ax.errorbar(
                [p["epsilon"] for p in points],
                [scale * p["mean"] for p in points],
                yerr=[scale * p["std"] for p in points],
                marker="o",
                capsize=4,
                label=method,
            )
            paper = PAPER_ACCURACY.get((dataset, method.split("/")[0])) if heading == "test accuracy %" else None
            if paper:
                ax.plot(list(paper), list(paper.values()), ":", marker="x", color=ax.lines[-1].get_color(),
                        label=f"{method.split('/')[0]}: the paper (Ghazi et al. 2021)")  # fmt: skip
        for reference in (s for s in part if s["epsilon"] is None):
            ax.axhline(
                scale * reference["mean"], color="black", linestyle="--", label=f"{reference['method']} (no privacy)"
            )
            ax.axhspan(
                scale * (reference["mean"] - reference["std"]),
                scale * (reference["mean"] + reference["std"]),
                color="black",
                alpha=0.08,
            )
        if (level := (chance or {}).get(dataset)) is not None:
            ax.axhline(scale * level, color="grey", linestyle="-.", label="chance")
        ticks = sorted({s["epsilon"] for s in part if s["epsilon"] is not None})
        if ticks:
            ax.set_xscale("log", base=2)
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
        ax.minorticks_off()
        ax.set_xlabel("label-DP epsilon (log scale)")
        name = heading.replace(" %", " (%)")
        ax.set_ylabel(name + ("" if larger_is_better else ", lower is better"))
        runs = max((s["runs"] for s in part), default=0)
        ax.set_title(
            f"{dataset}: {name.removeprefix('test ')} vs privacy\n(mean ± std, up to {runs} "
            f"run{'s' if runs != 1 else ''} a point)",
            fontsize=11,
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(loc="lower right" if larger_is_better else "upper right", fontsize=8)
    figure.tight_layout()
    return figure


def plot_privacy_utility(stats: list[dict], path: str | Path, chance: dict[str, float] | None = None) -> Path:
    """:func:`privacy_utility_figure` written to ``path``."""
    figure = privacy_utility_figure(stats, chance)
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path


def chance_levels(rows: list[dict[str, str]], metric: str | None = None) -> dict[str, float]:
    """What a guess scores on each dataset's metric, where it is known: an AUC of 1/2, an accuracy of 1/K over
    the K classes the runs declare (a uniform guess)."""
    found = {}
    for row in (r for r in rows if r["status"] == "done"):
        title = (row.get("table") or "csv") if row["dataset"] == "csv" else row["dataset"]
        name = metric or dataset_metric(rows, row["dataset"])
        if name == "auc":
            found[title] = 0.5
        elif name == "accuracy" and row.get("num_classes"):
            found[title] = 1.0 / float(row["num_classes"])
    return found


def report(sweep_dir: str | Path, metric: str | None = None, budget_dir: Path | None = None) -> tuple[str, Path]:
    """The tables (:func:`format_report`) and the plot's path for a sweep folder, by ``metric`` (None: each
    dataset's own), with each dataset's spend on the ledgers of ``budget_dir`` (None: not said); the plot is
    ``privacy_utility.png``, or ``privacy_utility_<metric>.png``.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``metric`` is unknown, or no finished run reports it.
    """
    rows = read_results(sweep_dir)
    stats = aggregate(rows, metric)
    if not stats:
        raise ConfigError(f"{sweep_dir} has no finished runs to report")
    failed = sum(1 for r in rows if r["status"] == "failed")
    name = "privacy_utility.png" if metric is None else f"privacy_utility_{metric}.png"
    folder = Path(sweep_dir) if Path(sweep_dir).is_dir() else Path(sweep_dir).parent  # a results.csv given
    spend = "" if budget_dir is None else _dataset_spend(rows, Path(budget_dir))
    return format_report(stats, failed) + spend, plot_privacy_utility(stats, folder / name, chance_levels(rows, metric))


def _dataset_spend(rows: list[dict[str, str]], budget_dir: Path) -> str:
    """What every release of each dataset of the sweep has spent, composed per person (its ledger, read now):
    the table's epsilons are each run's."""
    from labeldp.accounting.datasets import DatasetLedger

    lines = []
    for key in sorted({row.get("dataset_key") or "" for row in rows} - {""}):
        summary = DatasetLedger(key, key, budget_dir).summary()
        releases = summary["releases"]
        epsilon = float("inf") if summary["epsilon"] == "inf" else summary["epsilon"]
        lines.append(
            f"dataset {key}: epsilon {format_epsilon(epsilon)} per {summary['per']} spent in all by {releases} "
            f"release{'s' if releases != 1 else ''}, composed (the table's epsilons are each run's; "
            f"{summary['ledger']})"
        )
    return "".join("\n" + line for line in lines)
