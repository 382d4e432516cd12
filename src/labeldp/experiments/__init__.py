"""Experiments built on runs: named recipes (profiles), sweeps, result tables and plots."""

from labeldp.experiments.profiles import Profile, get_profile, list_profiles, load_recipes, register
from labeldp.experiments.report import format_epsilon

__all__ = ["Profile", "format_epsilon", "get_profile", "list_profiles", "load_recipes", "register"]
