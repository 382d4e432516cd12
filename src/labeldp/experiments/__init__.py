"""Experiments built on runs: sweeps (:mod:`~labeldp.experiments.sweep`), result tables and plots
(:mod:`~labeldp.experiments.report`), tuning on one release (:mod:`~labeldp.experiments.tune`).
Recipes and profiles are in :mod:`labeldp.recipes`."""
