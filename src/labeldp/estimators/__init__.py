"""scikit-learn estimators that learn from labels released under label differential privacy.

One module per estimator, all fitting on :class:`~labeldp.boundary.PrivateLabels` (the true labels wrapped
once, released through the release boundary) and never on a plain array of true labels (a plain array is
public to labeldp: a fit on it could not tell whether those labels were released before):

- :mod:`~labeldp.estimators.classifier`: :class:`LabelDPClassifier` wraps any scikit-learn classifier (by
  default histogram gradient boosting). It releases the labels by randomized response (or in stages by
  RR-with-prior, the paper's LP-MST), once for every fit, fold and candidate on the same labels, or fits on
  labels released once (:class:`ReleasedLabels`, a :class:`~labeldp.boundary.Release`, or the path of a
  release folder of ``labeldp privatize``) for free, and predicts the *clean* label: the released labels'
  noise channel is public. ``classes_`` and its predictions are in the classes' own dtype, so scikit-learn's
  scorers work on public and released labels (and refuse private ones, loudly).
- :mod:`~labeldp.estimators.regressor`: :class:`LabelDPRegressor` does the same for a numeric label on a
  declared, public range and grid: it releases the values once by RR-on-bins (Ghazi et al. 2023) under a
  noisy histogram prior over the grid (or a prior the user gives, or the Laplace mechanism on the clipped
  value, the baseline) and fits any scikit-learn regressor on the released values. Its release is shared
  like the classifier's; values released once over a grid of numbers fit it for free.
- :mod:`~labeldp.estimators.logistic`: :class:`LabelDPLogisticRegression` releases no labels at all: noisy
  label counts per bin of every public feature (:mod:`~labeldp.estimators.public_bins`:
  :class:`PublicBins`), from which it fits a logistic regression; for rare positives and small budgets.
- :mod:`~labeldp.estimators._common`: the private helpers the estimators share.

All follow scikit-learn's estimator conventions (the test suite runs scikit-learn's own estimator
checks), but one: ``fit`` refuses a plain label array, which labeldp treats as public labels.

Scoring on released labels through their noise channel (:func:`released_labels_for`,
:func:`released_log_likelihood`, :func:`clean_accuracy_terms`, :func:`clean_accuracy_estimate`) is
post-processing that needs no estimator: it lives in :mod:`labeldp.released_metrics` and is re-exported
here, with :class:`ReleasedLabels` from :mod:`labeldp.boundary`.

Privacy: epsilon-label-DP for the rows of the private labels (replace-one-label neighbours), as
``ledger_`` computes; inputs are public. Noise as in runs: fresh OS entropy by default, ChaCha20 with
``secure_rng``, never ``random_state``, which controls only the public parts (the split into stages,
the wrapped estimator's own randomness).
"""

from labeldp.boundary import ReleasedLabels
from labeldp.estimators.classifier import LabelDPClassifier
from labeldp.estimators.logistic import LabelDPLogisticRegression
from labeldp.estimators.public_bins import PublicBins
from labeldp.estimators.regressor import LabelDPRegressor
from labeldp.released_metrics import (
    clean_accuracy_estimate,
    clean_accuracy_terms,
    released_labels_for,
    released_log_likelihood,
)

__all__ = [
    "LabelDPClassifier",
    "LabelDPLogisticRegression",
    "LabelDPRegressor",
    "PublicBins",
    "ReleasedLabels",
    "clean_accuracy_estimate",
    "clean_accuracy_terms",
    "released_labels_for",
    "released_log_likelihood",
]
