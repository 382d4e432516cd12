"""Training after the privacy boundary: one supervised stage, and the multi-stage label-DP run."""

from labeldp.training.run import METHODS, RunConfig, split_stages, train_run
from labeldp.training.rundir import RunDirectory
from labeldp.training.stage import EpochRecord, TrainConfig, accuracy, predict_logits, predict_proba, train_stage

__all__ = ["METHODS", "EpochRecord", "RunConfig", "RunDirectory", "TrainConfig", "accuracy", "predict_logits",
           "predict_proba", "split_stages", "train_run", "train_stage"]
