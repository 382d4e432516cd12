"""The defaults of ``labeldp tune`` (the share held out to score candidates, DP-SGD's private selection) and
of the tuning ``labeldp train`` does on a run's own release (:class:`AutoTuneConfig`), stated once."""

from __future__ import annotations

from dataclasses import dataclass

from labeldp.options import option

#: the share of the training examples (of the first stage's, where options are chosen on it) whose
#: released labels score the candidates; DP-SGD's selection holds each example out with this probability
DEFAULT_HOLDOUT = 0.2
#: DP-SGD's private selection: a geometric number of trials (shape 1) with mean 3, and the noise of the
#: held-out count of correct predictions that scores each trial
SELECTION_DEFAULTS = {"mean": 3.0, "shape": 1.0, "score_noise": 10.0}
#: the candidates' training work (examples x epochs) at most twice one untuned run's: with the final
#: run, whose epochs are the untuned run's, the whole run does at most 3 times an untuned run's work
DEFAULT_TUNE_BUDGET = 2.0
#: the learning rates an auto-tuned run tries, as multiples of its base learning rate, in the order
#: they are added while the budget allows (the base first, so the untuned choice is always a candidate)
LR_FACTORS = (1.0, 2.0, 0.5, 4.0, 0.25)
#: where the best of the grid is its largest (smallest) rate, ahead of the next one inward by more than
#: the standard error of their difference, the optimum may lie beyond it: up to this many more
#: candidates, each twice (half) the last, while the budget allows and each new edge wins again
LR_EDGE_STEPS = 3


@dataclass(frozen=True)
class AutoTuneConfig:
    """The tuning of ``labeldp train`` on a run's own release (:mod:`labeldp.experiments.auto_tune`); its
    field's meaning is its option's help."""

    tune_budget: float = option(
        DEFAULT_TUNE_BUDGET,
        help="where the dataset has no recipe of its own, choose the learning rate on this run's own release "
        "(no extra epsilon): candidates train on most released labels and are scored on the held-out rest's, "
        "their training work (examples x epochs) at most this multiple of one untuned run's, so the whole "
        "run takes about 1 + this times as long; 0 turns it off",
    )


__all__ = [
    "DEFAULT_HOLDOUT",
    "DEFAULT_TUNE_BUDGET",
    "LR_EDGE_STEPS",
    "LR_FACTORS",
    "SELECTION_DEFAULTS",
    "AutoTuneConfig",
]
