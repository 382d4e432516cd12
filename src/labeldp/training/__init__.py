"""Training after the privacy boundary: one supervised stage, and the multi-stage label-DP run."""

from labeldp.training.run import METHODS, RunConfig, config_dataset, load_run_model, split_stages, train_run
from labeldp.errors import RunLockedError
from labeldp.training.rundir import RunDirectory
from labeldp.training.stage import (
    EpochRecord,
    TrainConfig,
    accuracy,
    predict_logits,
    predict_proba,
    resolve_device,
    train_stage,
)

__all__ = ["METHODS", "config_dataset", "load_run_model", "EpochRecord", "RunConfig", "RunDirectory", "RunLockedError", "TrainConfig", "accuracy", "predict_logits",
           "predict_proba", "resolve_device", "split_stages", "train_run", "train_stage"]
