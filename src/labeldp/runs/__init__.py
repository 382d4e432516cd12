"""Runs: a configuration (:mod:`~labeldp.runs.config`), its folder (:mod:`~labeldp.runs.rundir`), the
context a method runs in, which releases each thing once (:mod:`~labeldp.runs.context`), and
:func:`train_run`, which checks it all and starts or resumes it (:mod:`~labeldp.runs.run`)."""

from labeldp.runs.config import RunConfig, split_stages
from labeldp.runs.context import RunContext
from labeldp.runs.predict import Predictor, load_predictor, predict_table
from labeldp.runs.recipes import Recipe, recipe_for
from labeldp.runs.rundir import RunDirectory
from labeldp.runs.run import check_plan, config_dataset, load_run_model, train_run

__all__ = ["Predictor", "Recipe", "RunConfig", "RunContext", "RunDirectory", "check_plan", "config_dataset",
           "load_predictor", "load_run_model", "predict_table", "recipe_for", "split_stages", "train_run"]
