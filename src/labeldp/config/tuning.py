"""The defaults of ``labeldp tune``, stated once: the share of examples held out to score candidates,
and DP-SGD's private selection."""

from __future__ import annotations

#: the share of the training examples (of the first stage's, where options are chosen on it) whose
#: released labels score the candidates; DP-SGD's selection holds each example out with this probability
DEFAULT_HOLDOUT = 0.2
#: DP-SGD's private selection: a geometric number of trials (shape 1) with mean 3, and the noise of the
#: held-out count of correct predictions that scores each trial
SELECTION_DEFAULTS = {"mean": 3.0, "shape": 1.0, "score_noise": 10.0}

__all__ = ["DEFAULT_HOLDOUT", "SELECTION_DEFAULTS"]
