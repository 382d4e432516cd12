"""scikit-learn estimators that learn from labels released under label differential privacy.

:class:`LabelDPClassifier` wraps any scikit-learn classifier (by default histogram gradient boosting).
It fits on one of two things, never on a plain array of true labels (a plain array is public to
labeldp: a fit on it could not tell whether those labels were released before):

- :class:`~labeldp.boundary.PrivateLabels`, the true labels wrapped once
  (``PrivateLabels(y, classes=[...])``). The fit releases them by randomized response through the
  release boundary, recording the spend in ``ledger_``. Every fit, fold and candidate on the same
  labels shares that one release (``labels[rows]``, as scikit-learn's cross-validation takes them, are
  views of the same labels): a grid search or cross-validation on them spends epsilon once, and each
  fold's model trains on the released labels of its rows. With ``stages`` > 1 (the paper's LP-MST:
  stage t releases its labels by RR-with-prior under the model trained on the earlier stages) the
  release depends on the model, so it is the fit's own: a second one on the same rows needs a
  :class:`~labeldp.boundary.LabelBudget`.
- labels released once (:class:`ReleasedLabels`, or a release of :func:`labeldp.privatize`): the
  fit spends nothing.

``score(X, y)`` and :func:`~labeldp.released_metrics.released_scorer` score on released labels
through their noise channel (an unbiased estimate of the accuracy on the clean labels); given
private labels, they use the release the fit made of them, and never the private labels. A plain
array given to ``score`` is taken as public test labels.

What the estimator predicts is the *clean* label: the released labels' noise channel is public. With
randomized response the wrapped classifier learns the released labels and ``predict_proba`` inverts
the channel (exact in expectation); with per-example channels (RR-with-prior) each example enters the
fit once per class, weighted by the posterior of that class given what was released, the prior being
the model's own estimate (expectation-maximisation). ``predict_proba`` is an estimate of
Pr[clean label | x].

:class:`LabelDPRegressor` does the same for a numeric label on a declared, public range and grid: it
releases the values once by RR-on-bins (Ghazi et al. 2023) under a noisy histogram prior over the
grid (or a prior the user gives, or the Laplace mechanism on the clipped value, the baseline) and
fits any scikit-learn regressor on the released values. Its release is shared like the classifier's.

:class:`~labeldp.estimators.logistic.LabelDPLogisticRegression` (importable from here too) releases no labels
at all: noisy label counts per bin of every public feature, from which it fits a logistic
regression; for rare positives and small budgets.

Privacy: epsilon-label-DP for the rows of the private labels (replace-one-label neighbours), as
``ledger_`` computes; inputs are public. Noise as in runs: fresh OS entropy by default, ChaCha20 with
``secure_rng``, never ``random_state``, which controls only the public parts (the split into stages,
the wrapped estimator's own randomness).
"""

from labeldp.boundary import ReleasedLabels
from labeldp.estimators.classifier import LabelDPClassifier
from labeldp.estimators.logistic import LabelDPLogisticRegression, PublicBins
from labeldp.estimators.regressor import LabelDPRegressor
from labeldp.released_metrics import (clean_accuracy_estimate, clean_accuracy_terms, released_labels_for,
                                      released_log_likelihood)

__all__ = ["LabelDPClassifier", "LabelDPLogisticRegression", "LabelDPRegressor", "PublicBins", "ReleasedLabels",
           "clean_accuracy_estimate", "clean_accuracy_terms", "released_labels_for", "released_log_likelihood"]
