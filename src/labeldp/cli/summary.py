"""How a run's summary is printed."""

from __future__ import annotations

from labeldp.accounting.rounding import format_epsilon
from labeldp.evaluation import chance_warning, describe_test_metrics


def print_summary(summary: dict) -> None:
    """One line of a run's summary: the method, the dataset, the test metrics, the ledger's epsilon, the time;
    NOT PRIVATE where the noise can be regenerated."""
    print(
        f"{summary['method']} on {summary['dataset']}: {describe_test_metrics(summary)}  "
        f"epsilon {format_epsilon(summary['epsilon'])} (delta {summary['delta']:g}, "
        f"{summary['neighboring_relation']})  {summary['seconds']:.1f}s"
    )
    if kept := summary.get("consensus"):
        agreed = f"{kept['kept']} of {kept['released']}"
        print(f"consensus retraining: on the {agreed} released labels the stages' model predicts")
    if warning := chance_warning(summary):
        print(warning)
    if not summary.get("noise_private", True):
        print(f"NOT PRIVATE: the noise is {summary['noise']}")
    if summary.get("dataset_ledger"):
        print_dataset_spend(summary["dataset_ledger"])


def print_dataset_spend(spent: dict) -> None:
    """One line: what the dataset's releases have spent in all, composed, and where its ledger is."""
    releases = spent["releases"]
    print(
        f"dataset {spent['key']}: epsilon {format_epsilon(spent['epsilon'])} per {spent['per']} spent in all "
        f"({releases} release{'s' if releases != 1 else ''}, composed; {spent['ledger']})"
    )
