"""The releases of LP-MST's stages, one copy for every learner that trains on them: ``labeldp train``'s
drivers (:mod:`labeldp.methods.stages`, :mod:`labeldp.methods.cell_counts`) and the scikit-learn
:class:`~labeldp.estimators.LabelDPClassifier`. Free of torch and of a run: the caller says how its model
gives a prior and where the release is kept.

Privacy: each function releases each given member's label once, at ``epsilon``, through a ``release_*``
function of the boundary that records it on the ledger; the prior and the cells it takes must be
public (inputs, and models trained on other members' releases), so the stages compose in parallel.
"""

from __future__ import annotations

import numpy as np

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import (
    Release,
    release_noisy_histogram,
    release_randomized_response,
    release_rr_with_prior,
    release_vector_labels,
)
from labeldp.priors import cell_fractions
from labeldp.randomness import NoiseSource


def release_stage_labels(
    ledger: PrivacyLedger,
    labels,
    members: np.ndarray,
    num_classes: int,
    epsilon: float,
    noise: NoiseSource,
    stage: int,
    prior: np.ndarray | None = None,
    vectors: bool = False,
) -> Release:
    """Stage ``stage``'s release ``stage<stage>`` of ``members``' ``labels``, noise from the stream
    ``label-release`` of ``stage``: RR-with-prior under ``prior`` (m, K), else randomized response (VLP's
    vectors with ``vectors``). epsilon-label-DP for each member."""
    rng, tag = noise.generator("label-release", stage), f"stage{stage}"
    if prior is not None:
        return release_rr_with_prior(ledger, labels, members, prior, epsilon, rng, tag)
    first = release_vector_labels if vectors else release_randomized_response
    return first(ledger, labels, members, num_classes, epsilon, rng, tag)


def release_cell_counts(
    ledger: PrivacyLedger,
    labels,
    members: np.ndarray,
    cells: np.ndarray,
    num_classes: int,
    epsilon: float,
    noise: NoiseSource,
) -> Release:
    """The second stage's release ``stage2``: noisy label counts of ``members`` per cell (``cells``, public,
    kept as ``arrays["cells"]``), noise from the stream ``label-release`` 2. epsilon-label-DP for each member."""
    rng = noise.generator("label-release", 2)
    num_cells = int(cells.max()) + 1
    release = release_noisy_histogram(ledger, labels, members, cells, num_cells, num_classes, epsilon, rng, "stage2")
    return release.with_arrays(cells=cells)


def cell_soft_labels(prior: np.ndarray, likelihood: np.ndarray, counted: Release) -> tuple[np.ndarray, np.ndarray]:
    """The soft labels a counts stage trains on: the first stage's rows' posteriors under the first model's
    ``prior`` given their release's ``likelihood``, and each counted row's cell's noisy label fractions."""
    posterior = prior * likelihood
    posterior /= posterior.sum(axis=1, keepdims=True)
    return posterior, cell_fractions(counted.arrays["counts"], counted.arrays["cells"])
