"""Runs: a configuration's folder, the context a method runs in (which releases each thing once) and
:func:`train_run`, which checks it all and starts or resumes it. Start with :mod:`labeldp.runs.run`.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.config.run_config import RunConfig as RunConfig
    from labeldp.data.splits import split_stages as split_stages
    from labeldp.recipes.training import Recipe as Recipe
    from labeldp.recipes.training import recipe_for as recipe_for
    from labeldp.runs.context import RunContext as RunContext
    from labeldp.runs.plan import check_plan as check_plan
    from labeldp.runs.plan import config_dataset as config_dataset
    from labeldp.runs.predictor import Predictor as Predictor
    from labeldp.runs.predictor import load_predictor as load_predictor
    from labeldp.runs.predictor import predict_table as predict_table
    from labeldp.runs.run import load_run_model as load_run_model
    from labeldp.runs.run import train_run as train_run
    from labeldp.runs.rundir import RunDirectory as RunDirectory

__getattr__, __dir__, __all__ = lazy_exports(__name__)
