"""A run's spend on the dataset ledgers (:mod:`labeldp.accounting.spending`): what its releases read, the most it
may spend, and its reservation before anything is drawn."""

from __future__ import annotations

from pathlib import Path

from labeldp.accounting.datasets import new_release, saved_release
from labeldp.accounting.policy import BudgetPolicy, Guarantee
from labeldp.accounting.spending import Source, Spending, guarantee_of, unit_guarantee
from labeldp.config.run_config import RunConfig
from labeldp.data import LabeledDataset


def run_source(config: RunConfig, data: LabeledDataset) -> Source:
    """What a run's releases read, as the dataset ledgers see it (public facts only)."""
    table = data.table_rows
    return Source(
        name=config.dataset_name,
        table=data.facts,
        dataset=data.name,
        columns=table.columns if table is not None else (),
        keys=table.keys if table is not None else None,
        unit=(data.unit_bound or {}).get("column"),
        id_column=config.id_column if table is not None else None,
    )


def planned_guarantee(config: RunConfig, data: LabeledDataset) -> Guarantee:
    """The most a run of ``config`` may spend, under replace-one-label: its epsilon per unit (each row's own
    its share), or what its method plans (``Method.planned``: DP-SGD's steps, accounted under replace-one)."""
    bound = data.unit_bound or {}
    guarantee = guarantee_of(config.epsilon, config.delta or 0.0, bound.get("column"))
    if bound:
        guarantee = unit_guarantee(guarantee, int(bound["most_rows"]))
    planned = config.method_spec.planned
    return planned(config, len(data.y_train), guarantee) if planned is not None and guarantee.private else guarantee


def reserve_run(
    policy: BudgetPolicy, config: RunConfig, data: LabeledDataset, out_dir, progress: bool, route: str = "train"
) -> Spending:
    """The run's :class:`~labeldp.accounting.spending.Spending`, its whole plan reserved on every ledger of its
    people before anything is drawn or written (refused past the policy's cap); a finished run reserves nothing."""
    source = run_source(config, data)
    # a finished run draws nothing more (or is refused)
    planned = None if (Path(out_dir) / "summary.json").exists() else planned_guarantee(config, data)
    release = saved_release(out_dir) or new_release(out_dir)
    spending = Spending(policy, source, release, route, str(Path(out_dir)))
    if planned is not None:
        spending.reserve(planned, quiet=not progress)
    return spending


def withdraw_unspent(spending: Spending | None, out_dir) -> None:
    """After a failure: withdraw the run's reservation if the run drew nothing (its folder holds no release id)."""
    if spending is not None and saved_release(out_dir) is None:
        spending.cancel()


__all__ = ["planned_guarantee", "reserve_run", "run_source", "withdraw_unspent"]
