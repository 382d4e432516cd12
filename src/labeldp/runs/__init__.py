"""Runs: a configuration's folder, the context a method runs in (which releases each thing once) and
:func:`train_run`, which checks it all and starts or resumes it. Start with :mod:`labeldp.runs.run`.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "RunConfig": "labeldp.config.run_config",
        "split_stages": "labeldp.data.splits",
        "RunContext": "labeldp.runs.context",
        "Predictor": "labeldp.runs.predictor",
        "load_predictor": "labeldp.runs.predictor",
        "predict_table": "labeldp.runs.predictor",
        "Recipe": "labeldp.recipes.training",
        "recipe_for": "labeldp.recipes.training",
        "RunDirectory": "labeldp.runs.rundir",
        "check_plan": "labeldp.runs.run",
        "config_dataset": "labeldp.runs.run",
        "load_run_model": "labeldp.runs.run",
        "train_run": "labeldp.runs.run",
    },
)
