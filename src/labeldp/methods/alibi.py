"""``alibi`` (Malek et al. 2021): every label is released once as its one-hot vector plus discrete
Laplace noise of scale 2 / epsilon per coordinate (:mod:`labeldp.mechanisms.laplace`).

ALIBI trains on the soft labels prior(y) Pr[z | y] / Z, with the model's current prediction as the
prior; the forward loss -log sum_y p(y | x) Pr[z | y] has exactly that gradient (the soft label
recomputed at every step), so ``alibi`` trains one stage with the forward loss on the Laplace
likelihoods. Privacy: epsilon-label-DP, each label released once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release, release_laplace_one_hot
from labeldp.methods.protocol import MethodContext
from labeldp.methods.registry import Method, register_method


def run_alibi(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Release every label once by ALIBI's mechanism, then train one stage on the Laplace likelihoods.

    What is released: every training label as its one-hot vector plus discrete Laplace noise of scale
    2 / epsilon per coordinate (:func:`~labeldp.boundary.release.release_laplace_one_hot`, noise from
    the stream ``label-release`` 1); the noisy vectors are saved with their arg-max and likelihoods. It
    is the release ``stage1`` of :meth:`MethodContext.spend <labeldp.methods.protocol.MethodContext.spend>`:
    saved, and recorded as one ledger entry tagged ``stage1`` over every training example. Training on
    it is post-processing.

    Parameters
    ----------
    context : MethodContext
        The run.

    Returns
    -------
    tuple of (torch.nn.Module, dict)
        The model, and the facts for the summary: ``stages`` with the labels released.
    """
    config, data = context.config, context.data
    members = np.arange(len(data.y_train))

    def draw(ledger: PrivacyLedger) -> Release:
        release = release_laplace_one_hot(
            ledger,
            data.y_train,
            members,
            data.num_classes,
            config.epsilon,
            config.noise.generator("label-release", 1),
            "stage1",
        )
        return release.with_arrays(indices=members, evidence=release.likelihood.astype(np.float32))

    released = context.spend("stage1", draw)
    model = context.new_model(1)
    context.train(model, 1, 1, members, released.arrays["evidence"])
    return model, {
        "stages": [
            {"stage": 1, "released": int(members.size), "reused": 0, "mean_k": float(np.mean(released.arrays["k"]))}
        ]
    }


register_method(
    Method(
        "alibi",
        "Laplace noise on the one-hot label; trains on the Bayesian soft labels",
        run_alibi,
        uses=frozenset({"secure_rng", "insecure_noise_seed"}),
        independent_of={"stage1": ("train", "model")},
        releases=lambda config: ("stage1",),
    )
)
