"""Experiments built on runs: tables (and, later, recipes, sweeps and plots)."""

from labeldp.experiments.table import accuracy_table, format_epsilon

__all__ = ["accuracy_table", "format_epsilon"]
