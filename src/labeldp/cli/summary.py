"""How a run's summary is printed."""

from __future__ import annotations

from labeldp.accounting.rounding import describe_guarantee, format_epsilon
from labeldp.evaluation import chance_warning, describe_test_metrics


def print_summary(summary: dict) -> None:
    """One line of a run's summary: the method, the dataset, the test metrics, the ledger's epsilon, the time;
    NOT PRIVATE where the noise can be regenerated."""
    guarantee = describe_guarantee(
        summary["epsilon"],
        summary["delta"],
        summary.get("per", "row"),
        summary["neighboring_relation"],
        (summary.get("privacy_units") or {}).get("row_epsilon"),
    )
    print(
        f"{summary['method']} on {summary['dataset']}: {describe_test_metrics(summary)}  {guarantee}  "
        f"{summary['seconds']:.1f}s"
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
    """A line a group of people the release is on: its worst person's epsilon, composed across releases, and
    where its ledger is."""
    for group in [spent, *spent.get("also", ())]:
        releases, people = group["releases"], group.get("people")
        at = "" if people is None else f" by its worst person ({group['people_at_worst']:,} of {people:,} people)"
        references = f", {group['references']} reference run(s) apart" if group.get("references") else ""
        print(
            f"{group['described']}: epsilon {format_epsilon(group['epsilon'])} per "
            f"{group['per']} spent in all{at} ({releases} release{'s' if releases != 1 else ''}, composed, "
            f"delta {group['delta']:g}, {group.get('relation', 'replace-one label')}{references}; ledger "
            f"{group['ledger']})"
        )
