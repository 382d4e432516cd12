"""The one entry point for every spend: which groups' ledgers a release is on (:func:`charges`), and its
:class:`Spending`, reserved on all of them before its first draw and recorded after (``docs/dataset-ledger.md``).

A release is on the ledger of its group (the dataset name given, else the column naming its people), on
its table's own ledger (each row a person), and on every people's group of the budget folder whose column
its table holds. A table's releases made before a group knew it join that group once it does, each person
charged for their rows in them (group privacy).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from labeldp.accounting.datasets import (
    CANCELLED,
    TABLE,
    DatasetLedger,
    Spend,
    Worst,
    compose,
    folder_locked,
    people_groups,
)
from labeldp.accounting.people import People
from labeldp.accounting.policy import BudgetPolicy, Guarantee, group_bound
from labeldp.accounting.rounding import format_epsilon
from labeldp.errors import BudgetError, ConfigError


@dataclass(frozen=True)
class Source:
    """What a release reads, as the ledgers see it (public facts only).

    ``name``: the dataset name the user gave; ``table``: a table's :func:`table_facts`; ``dataset``: a
    dataset's own name where there is no table; ``columns``: the table's columns; ``keys(column)``: each
    released row's key in a public column (``every(column)``: every row's); ``unit`` and ``id_column``: the
    columns the release names.
    """

    name: str | None = None
    table: dict[str, Any] | None = None
    dataset: str | None = None
    columns: Sequence[str] = ()
    keys: Callable[[str], np.ndarray] | None = None
    unit: str | None = None
    id_column: str | None = None
    distinct: Callable[[str], np.ndarray | None] | None = None  # sorted keys of a checked id column, if at hand
    every: Callable[[str], np.ndarray] | None = None  # every row's key in a column, released or not
    people: Callable[[str, bool], People] | None = None  # a column's people (True: every row's), counted on an engine


@dataclass(frozen=True)
class Charge:
    """One ledger a release is on, and the people it holds there (None: it counts for every person)."""

    ledger: DatasetLedger
    people: People | None = None

    def spend(self, release: str, route: str, guarantee: Guarantee, groups: tuple[str, ...], run: str | None) -> Spend:
        """The release's line here: per unit where the people are its units, else each person's rows composed."""
        if self.people is not None and self.people.column == guarantee.unit:
            epsilon, delta = guarantee.epsilon, guarantee.delta
        else:
            epsilon, delta = group_bound(
                guarantee.per_row, guarantee.delta, self.people.most_rows if self.people else 1
            )
        people = None if self.people is None else _people_fields(self.people)
        return Spend(
            release, route, epsilon, delta, guarantee.unit, guarantee.per_row, people, guarantee.private, groups, run
        )


def _people_fields(people: People) -> dict[str, Any]:
    return {"column": people.column, "count": people.count, "most_rows": people.most_rows}


def charges(policy: BudgetPolicy, source: Source) -> list[Charge]:
    """The ledgers a release of ``source`` is on, its group's first; refused (ConfigError) before anything is
    drawn where a group's people cannot be told apart in it."""
    found: dict[str, Charge] = {}
    memo: dict[str, People] = {}

    def people(column: str) -> People | None:
        if column not in source.columns or (source.keys is None and source.people is None):
            return None
        if column not in memo and source.people is not None:
            memo[column] = source.people(column, False)
        if column not in memo and source.keys is not None:
            distinct = source.distinct(column) if source.distinct is not None else None
            memo[column] = (
                People.of_distinct(column, distinct)
                if distinct is not None
                else People.of_rows(column, source.keys(column))
            )
        return memo[column]

    named = source.unit or source.id_column
    if source.name is not None:
        ledger = DatasetLedger.named(source.name, policy.folder)
        column = ledger.people_column()
        if column is None and named is not None and ledger.spends():
            raise ConfigError(
                f"dataset {source.name!r} has releases that named no people, each row counted as a person: a "
                f"release per person of column {named!r} cannot be composed with them. Release it under a dataset "
                "name of its own, or without naming the column"
            )
        if column is not None and named is not None and named != column:
            raise ConfigError(
                f"dataset {source.name!r} follows the people of column {column!r}; this release names {named!r}: "
                "give it another --dataset-name if these are other people"
            )
        column = column or named
        held = None if column is None else people(column)
        if column is not None and held is None:
            raise ConfigError(
                f"dataset {source.name!r} follows the people of column {column!r}, which this release has not: "
                f"labeldp cannot tell how many of its rows each person has. Release a table with column {column!r}"
            )
        found[ledger.key] = Charge(ledger, held)
    elif named is not None:
        ledger = DatasetLedger.of_people(named, policy.folder)
        found[ledger.key] = Charge(ledger, people(named))
    if source.table is not None:  # the table's own ledger: every release of it, whatever group it names
        ledger = DatasetLedger.of_table(source.table, policy.folder)
        found.setdefault(ledger.key, Charge(ledger))
    elif source.dataset is not None:  # a dataset's own ledger, by its name
        ledger = DatasetLedger.named(_plain(source.dataset), policy.folder, f"dataset {source.dataset!r}")
        found.setdefault(ledger.key, Charge(ledger))
    for column, ledger in people_groups(policy.folder):  # every group whose people the release holds
        if ledger.key not in found and (held := people(column)) is not None:
            found[ledger.key] = Charge(ledger, held)
    return list(found.values())


def _plain(name: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).lstrip(".-") or "dataset"


class Spending:
    """One release's spend on the ledgers of :func:`charges` of ``source``: :meth:`reserve` before its first draw
    (refused past the policy's cap), :meth:`record` after, :meth:`cancel` if it drew nothing. ``found``: its
    charges where there is no source (labels in memory)."""

    def __init__(
        self,
        policy: BudgetPolicy,
        source: Source | None,
        release: str,
        route: str,
        run: str | None = None,
        found: Sequence[Charge] = (),
    ):
        self.policy, self.source, self.release, self.route, self.run = policy, source, release, route, run
        self.charges = list(found)

    def renamed(self, release: str) -> Spending:
        """A release of other labels on the same ledgers (labels joined or planted from these)."""
        return Spending(self.policy, self.source, release, self.route, self.run)

    @property
    def groups(self) -> tuple[str, ...]:
        return tuple(charge.ledger.key for charge in self.charges)

    @property
    def primary(self) -> DatasetLedger:
        return self.charges[0].ledger

    def reserve(self, guarantee: Guarantee, quiet: bool = False) -> None:
        """Put ``guarantee`` on every ledger before anything is drawn, in one step under the budget folder's lock
        (the ledgers named, and every check, see every other process's reservation); refused (BudgetError),
        writing nothing, where it would take any person it holds past the cap. A release on every ledger
        already at that spend (a run resuming) adds nothing."""
        said = []
        with folder_locked(self.policy.folder):
            if self.source is not None:
                self.charges = charges(self.policy, self.source)
            planned = {c.ledger.key: self._planned(c, guarantee) for c in self.charges}
            saved = [(c.ledger.lines().get(self.release), planned[c.ledger.key][0][0]) for c in self.charges]
            if all(line and line.route != CANCELLED and line.epsilon >= plan.epsilon for line, plan in saved):
                return
            total = self.policy.total_epsilon
            for charge in self.charges:
                ledger = charge.ledger
                before, after = ledger.worst(), ledger.worst(planned[ledger.key])
                held = ledger.worst(planned[ledger.key], touched=True)
                if guarantee.private and total is not None and held.epsilon > total + 1e-9:
                    whom = "it" if held.people is None else f"{held.at:,} of its people"
                    raise BudgetError(
                        f"{_said(ledger, before)}; this release would take {whom} to epsilon "
                        f"{format_epsilon(held.epsilon)}, past --total-epsilon {total:g}: refused before anything "
                        f"was drawn (its ledger: {ledger.path})"
                    )
                absorbed = planned[ledger.key][1:]  # the table's earlier releases, new to this ledger
                earlier = ledger.worst(absorbed) if absorbed else None
                said.append(
                    _said(ledger, before)
                    + ("" if earlier is None else f"; the table's earlier releases, put on it now, take "
                       f"{_whom(earlier)} to {_figure(earlier)}")
                    + f"; this release takes {_whom(after)} to {_figure(after)}"
                )  # fmt: skip
            for charge in self.charges:
                release, *absorbed = planned[charge.ledger.key]
                charge.ledger.append([release], reserved=True)
                if absorbed:
                    charge.ledger.append(absorbed)
        if not quiet:
            for line in said:
                print(line, file=sys.stderr)

    def _planned(self, charge: Charge, guarantee: Guarantee) -> list[tuple[Spend, People | None]]:
        """This release's line on ``charge``'s ledger and, where its table's releases are not on that ledger
        yet, one line for them, each person charged for their rows in the whole table."""
        planned = [(charge.spend(self.release, self.route, guarantee, self.groups, self.run), charge.people)]
        table = next((c.ledger for c in self.charges if c.ledger.key.startswith(TABLE)), None)
        if table is None or charge.ledger is table:
            return planned
        pending = [s for s in table.spends() if charge.ledger.key not in s.groups and s.release != self.release]
        if pending:
            people = charge.people
            if people is not None and self.source is not None and self.source.people is not None:
                people = self.source.people(people.column, True)  # their earlier rows
            elif people is not None and self.source is not None and self.source.every is not None:
                people = People.of_rows(people.column, self.source.every(people.column))
            epsilon, delta = group_bound(*compose(pending), people.most_rows if people is not None else 1)
            fields = None if people is None else _people_fields(people)
            line = Spend(f"absorbed:{table.key}", "earlier releases of the table", epsilon, delta, None, None, fields,
                         True, (charge.ledger.key,), table.described)  # fmt: skip
            saved = charge.ledger.lines().get(line.release)
            if saved is None or saved.epsilon < epsilon or saved.delta < delta:
                planned.append((line, people))
        return planned

    def _resolved(self) -> list[Charge]:
        """The charges, named now where no reservation named them (an import, a finished run)."""
        if not self.charges and self.source is not None:
            self.charges = charges(self.policy, self.source)
        return self.charges

    def record(self, guarantee: Guarantee, final: bool = True) -> None:
        """Put what the release spent on every ledger (not ``final``: between its releases, the reservation kept)."""
        with folder_locked(self.policy.folder):
            for charge in self._resolved():
                spend = charge.spend(self.release, self.route, guarantee, self.groups, self.run)
                charge.ledger.record(spend, final, charge.people)

    def cancel(self) -> None:
        """Withdraw the reservation: the release drew nothing."""
        with folder_locked(self.policy.folder):
            for charge in self._resolved():
                charge.ledger.cancel(self.release)

    def summary(self) -> dict[str, Any] | None:
        """The primary group's figure, the other groups' beside it (None: on no ledger)."""
        with folder_locked(self.policy.folder):
            if not self._resolved():
                return None
        summary = self.primary.summary()
        if len(self.charges) > 1:
            summary["also"] = [charge.ledger.summary() for charge in self.charges[1:]]
        return summary


def _whom(worst: Worst) -> str:
    return "it" if worst.people is None else "its worst person"


def _said(ledger: DatasetLedger, before: Worst) -> str:
    if before.epsilon == 0 and not ledger.spends():
        return f"{ledger.described} (ledger {ledger.key}): nothing spent on it before"
    who = "" if before.people is None else f" by its worst person ({before.at:,} of {before.people:,} people)"
    return f"{ledger.described} (ledger {ledger.key}): epsilon {format_epsilon(before.epsilon)} spent already{who}"


def _figure(worst: Worst) -> str:
    return f"epsilon {format_epsilon(worst.epsilon)}" + (f" (delta {worst.delta:.3g})" if worst.delta else "")


def guarantee_of(epsilon: float | None, delta: float = 0.0, unit: str | None = None) -> Guarantee:
    """A planned release's guarantee from its settings (None or infinite epsilon: a reference without privacy)."""
    if epsilon is None or epsilon == float("inf"):
        return Guarantee(float("inf"), 0.0, None, float("inf"), private=False)
    return Guarantee(float(epsilon), float(delta or 0.0), unit, float(epsilon) if unit is None else None)


def unit_guarantee(guarantee: Guarantee, most_rows: int) -> Guarantee:
    """``guarantee`` per unit with each row's own epsilon, a unit holding at most ``most_rows`` rows."""
    return replace(guarantee, row_epsilon=guarantee.epsilon / max(most_rows, 1))


__all__ = ["Charge", "Source", "Spending", "charges", "guarantee_of", "unit_guarantee"]
