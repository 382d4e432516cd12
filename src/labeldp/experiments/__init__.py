"""Experiments built on runs: sweeps (:mod:`labeldp.experiments.sweep_runner`, read first), result tables and
plots, and tuning on one release (:mod:`labeldp.experiments.release_tuning`).
"""
