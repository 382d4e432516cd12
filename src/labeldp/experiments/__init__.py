"""Experiments built on runs: named recipes (profiles), sweeps, result tables and plots."""

from labeldp.experiments.profiles import Profile, get_profile, list_profiles, load_recipes, register
from labeldp.experiments.table import accuracy_table, format_epsilon

__all__ = ["Profile", "accuracy_table", "format_epsilon", "get_profile", "list_profiles", "load_recipes", "register"]
