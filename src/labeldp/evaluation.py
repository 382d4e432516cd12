"""Test metrics of predicted class probabilities on the public test set; no training label is read.

Accuracy hides what matters for rare positives (always predicting the majority of a 1 %-positive
table is 99 % accurate), so binary tasks also get the ROC AUC, log-loss, Brier score and expected
calibration error. A regression is measured by the errors of the expected value over its grid.
"""

from __future__ import annotations

import numpy as np
from sklearn.metrics import log_loss, roc_auc_score

#: equal-width bins of the predicted positive probability for the expected calibration error
CALIBRATION_BINS = 10
#: the metric each kind of task is compared by, and whether larger is better
PRIMARY_METRICS = {
    "test_accuracy": True,
    "test_auc": True,
    "test_log_loss": False,
    "test_rmse": False,
    "test_mse": False,
    "test_mae": False,
}


def expected_calibration_error(
    positive_probability: np.ndarray, labels: np.ndarray, bins: int = CALIBRATION_BINS
) -> float:
    """Mean over equal-width bins of |observed positive rate - mean predicted probability|, weighted by size."""
    which = np.minimum((positive_probability * bins).astype(int), bins - 1)
    error = 0.0
    for b in range(bins):
        inside = which == b
        if inside.any():
            error += inside.mean() * abs(labels[inside].mean() - positive_probability[inside].mean())
    return float(error)


def classification_metrics(probabilities: np.ndarray, labels: np.ndarray) -> dict[str, float | None]:
    """``test_accuracy`` and ``test_log_loss``; with two classes also ``test_auc``, ``test_brier`` and ``test_ece``.

    ``test_auc`` is None for a test set of one class.
    """
    probabilities = np.asarray(probabilities, dtype=np.float64)
    labels = np.asarray(labels)
    num_classes = probabilities.shape[1]
    metrics: dict[str, float | None] = {
        "test_accuracy": float((probabilities.argmax(axis=1) == labels).mean()),
        "test_log_loss": float(log_loss(labels, np.clip(probabilities, 1e-15, 1.0), labels=np.arange(num_classes))),
    }
    if num_classes == 2:
        positive = probabilities[:, 1]
        metrics["test_auc"] = float(roc_auc_score(labels, positive)) if len(np.unique(labels)) == 2 else None
        metrics["test_brier"] = float(np.mean((positive - labels) ** 2))
        metrics["test_ece"] = expected_calibration_error(positive, labels)
    return metrics


def regression_metrics(probabilities: np.ndarray, label_values: np.ndarray, values: np.ndarray) -> dict[str, float]:
    """``test_rmse``, ``test_mse`` and ``test_mae`` of the expected values against the test ``values``."""
    predictions = np.asarray(probabilities, dtype=np.float64) @ np.asarray(label_values, dtype=np.float64)
    errors = predictions - np.asarray(values, dtype=np.float64)
    mse = float(np.mean(errors**2))
    return {"test_rmse": float(np.sqrt(mse)), "test_mse": mse, "test_mae": float(np.mean(np.abs(errors)))}


def primary_metric(summary: dict) -> str:
    """The metric a run is compared by: test RMSE for a regression, else test accuracy."""
    return "test_rmse" if summary.get("test_rmse") is not None else "test_accuracy"


#: what a user can do when the released test labels cannot tell a model from chance
CHANCE_ADVICE = "give a public test table (--test-table) to measure it"


def describe_test_metrics(summary: dict) -> str:
    """A run summary's test metrics in a few words: exact on public labels, or estimated from released
    ones with their 95 % intervals, or that there are none."""
    estimated = str(summary.get("test_labels", "")).startswith("estimated")

    def shown(label: str, name: str, scale: float, digits: int, unit: str = "") -> str:
        value, interval = summary.get(name), summary.get(f"{name}_interval")
        bounds = "" if interval is None else " to ".join(f"{scale * bound:.{digits}f}{unit}" for bound in interval)
        if value is None:  # estimated, and the release cannot measure it: no figure to copy
            return f"{label}: the released test labels cannot measure it at this epsilon (95% interval {bounds})"
        return f"{label} {scale * value:.{digits}f}{unit}" + (
            f" (95% interval {bounds})" if estimated and bounds else ""
        )

    if "test_rmse" in summary and (summary["test_rmse"] is not None or estimated):
        text = shown("test RMSE", "test_rmse", 1.0, 4)
        if summary.get("test_mae") is not None:
            text += f" (MAE {summary['test_mae']:.4g})"
    elif "test_accuracy" in summary and (summary["test_accuracy"] is not None or estimated):
        text = shown("test accuracy", "test_accuracy", 100.0, 2, "%")
        if summary.get("test_auc") is not None or (estimated and "test_auc" in summary):  # two classes: accuracy
            # hides rare positives, these do not
            text += ", " + shown("AUC", "test_auc", 1.0, 4)
            if "test_log_loss" in summary and (summary["test_log_loss"] is not None or estimated):
                text += ", " + shown("log-loss", "test_log_loss", 1.0, 4)
    else:
        return "no test metric (the test labels are private and were not released)"
    return text + (" (estimated from the released test labels)" if estimated else "")


def chance_warning(summary: dict, labels: str = "test labels") -> str | None:
    """The line that says the released ``labels`` cannot tell the model from chance, where they cannot."""
    if summary.get("test_beyond_chance") is not False:
        return None
    chance = summary["test_chance"]
    return f"the released {labels} cannot tell this model from chance at this epsilon ({chance}): {CHANCE_ADVICE}"
