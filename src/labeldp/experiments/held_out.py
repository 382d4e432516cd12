"""The held-out examples that score a tune's candidates, and the estimate of a candidate's clean accuracy
from their released labels (never their true ones)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from labeldp.boundary import Release
from labeldp.errors import ConfigError
from labeldp.randomness import public_rng
from labeldp.released_metrics import clean_accuracy_terms, released_log_likelihood_terms
from labeldp.training.predictions import predict_proba

#: the share of held-out releases that do not depend on their label above which a tune warns
UNINFORMATIVE_WARNING = 0.5


def holdout_split(num_examples: int, fraction: float, seed: int) -> np.ndarray:
    """The held-out positions, sorted: ``round(fraction * num_examples)`` of them from the public stream
    ``tune-holdout`` of ``seed`` (positions only, never labels).

    Raises
    ------
    labeldp.errors.ConfigError
        If ``fraction`` is not in (0, 1), or leaves fewer than two examples held out or none to train on.
    """
    if isinstance(fraction, bool) or not 0 < fraction < 1:
        raise ConfigError(f"holdout must lie in (0, 1), got {fraction!r}")
    size = int(round(fraction * num_examples))
    if not 2 <= size < num_examples:
        raise ConfigError(
            f"holdout {fraction:g} of {num_examples} training examples leaves "
            f"{'fewer than two to score on' if size < 2 else 'none to train on'}"
        )
    return np.sort(public_rng(seed, "tune-holdout").permutation(num_examples)[:size])


class HeldOutScorer:
    """Estimates a model's clean accuracy on the held-out examples from their releases alone: it reads no true
    label and spends nothing.

    Releases that neither label their members with a noise channel nor carry a noisy one-hot vector (a
    histogram) are skipped; a later release of an example replaces an earlier one. A held-out example
    without a released label is a :class:`~labeldp.errors.ConfigError`.

    Attributes
    ----------
    labels, likelihood, vectors : numpy.ndarray
        Per held-out example, its released label (-1 for a vector release), its noise channel (K,) and,
        for ALIBI and VLP, its noisy one-hot vector, unbiased for the one-hot label (NaN otherwise).
    alibi : numpy.ndarray
        Per held-out example, whether it was released as a vector, ALIBI's or VLP's (scored by its noisy
        one-hot vector).
    """

    def __init__(self, releases: Mapping[str, Release], held_out: np.ndarray, num_examples: int, num_classes: int):
        labels = np.full(num_examples, -1, dtype=np.int64)
        likelihood = np.full((num_examples, num_classes), np.nan)
        vectors = np.full((num_examples, num_classes), np.nan)
        released = np.zeros(num_examples, dtype=bool)
        for release in releases.values():
            if not labels_each(release) or release.likelihood is None:
                continue  # a histogram, not a label release
            members = np.asarray(release.members)
            released[members] = True
            labels[members] = -1 if release.labels is None else release.labels
            likelihood[members] = release.likelihood
            vectors[members] = release.arrays.get("noisy_one_hot", np.nan)  # ALIBI's, VLP's: the vector itself
        missing = held_out[~released[held_out]]
        if missing.size:
            raise ConfigError(f"{missing.size} held-out examples have no released label to be scored on")
        self.held_out = held_out
        self.labels, self.likelihood, self.vectors = labels[held_out], likelihood[held_out], vectors[held_out]
        self.alibi = ~np.isnan(self.vectors[:, 0])
        #: the share of held-out examples whose release does not depend on their label (RR-with-prior with
        #: k = 1: the prior's top class whatever the label); their terms measure agreement with the prior
        rows = self.likelihood[~self.alibi]
        self.uninformative = float(np.mean(np.ptp(rows, axis=1) < 1e-12)) if rows.size else 0.0

    def terms(self, predictions: np.ndarray) -> np.ndarray:
        """Per held-out example, a term whose expectation is 1[y = prediction]
        (:func:`~labeldp.released_metrics.clean_accuracy_terms`, which holds for RR-with-prior when y lies in
        the top-k set; ALIBI: the noisy vector's entry at the prediction)."""
        rows = np.arange(predictions.size)
        terms = np.zeros(predictions.size)
        channel = ~self.alibi
        if channel.any():
            terms[channel] = clean_accuracy_terms(predictions[channel], self.labels[channel], self.likelihood[channel])
        terms[self.alibi] = self.vectors[rows[self.alibi], predictions[self.alibi]]
        return terms

    def log_likelihood_terms(self, probabilities: np.ndarray) -> np.ndarray:
        """Per held-out example, the log-probability ``probabilities`` give its release through its channel
        (:func:`~labeldp.released_metrics.released_log_likelihood_terms`, a proper score; a vector's, ALIBI's or
        VLP's, up to a constant of the example, which a paired difference cancels)."""
        return released_log_likelihood_terms(probabilities, self.likelihood)

    def score(self, model, inputs: np.ndarray, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """The :meth:`terms` of ``model``'s predictions (their mean estimates its clean accuracy), and its
        :meth:`log_likelihood_terms`."""
        probabilities = predict_proba(model, inputs, batch_size=batch_size)
        return self.terms(probabilities.argmax(axis=1)), self.log_likelihood_terms(probabilities)


def uninformative_message(share: float) -> str:
    """The warning that a ``share`` of the held-out releases did not depend on their label (k = 1)."""
    return (
        f"warning: {100 * share:.0f}% of the held-out examples were released with k = 1 (the prior's top "
        "class, whatever their label): their estimate measures how well a candidate agrees with the prior, "
        "not its clean accuracy"
    )


def labelled(releases: Mapping[str, Release], num_examples: int) -> np.ndarray:
    """The sorted positions of the training examples ``releases`` released a label of."""
    labelled = np.zeros(num_examples, dtype=bool)
    for release in releases.values():
        if labels_each(release):
            labelled[np.asarray(release.members)] = True
    return np.flatnonzero(labelled)


def labels_each(release: Release) -> bool:
    """Whether a release says something of each member's label: a released label, or a noisy one-hot vector
    (VLP releases vectors only)."""
    return release.labels is not None or "noisy_one_hot" in release.arrays
