"""``vlp`` (vector label privacy, Zhao et al., ICLR 2025): every label released once as a random binary
vector, each coordinate of its one-hot vector flipped by binary RR at epsilon / 2.

As a function of the true class y, Pr[z | y] is proportional to e^(eps z_y): ``vlp`` trains one stage with
the forward loss on that evidence, as ``lp-1st`` does on RR's channel (the paper trains K sigmoid outputs by
binary cross-entropy on z instead). epsilon-label-DP, each label released once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release, release_vector_labels
from labeldp.methods.protocol import MethodContext
from labeldp.methods.registry import Method, register_method


def run_vlp(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Release every label once (``stage1``), then train one stage on the vectors' evidence.

    epsilon-label-DP: :func:`~labeldp.boundary.release.release_vector_labels` over every training example,
    noise from the stream ``label-release`` 1, through :meth:`~labeldp.methods.protocol.MethodContext.spend`;
    training is post-processing.
    """
    config, data = context.config, context.data
    members = np.arange(len(data.y_train))
    epsilon = config.epsilon
    assert epsilon is not None, "a resolved configuration of a private method has its epsilon"

    def draw(ledger: PrivacyLedger) -> Release:
        release = release_vector_labels(
            ledger,
            data.y_train,
            members,
            data.num_classes,
            epsilon,
            config.noise.generator("label-release", 1),
            "stage1",
        )
        assert release.likelihood is not None  # the evidence of each released vector
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
        "vlp",
        "vector label privacy: each label a random binary vector; trains by the forward loss on its evidence",
        run_vlp,
        uses=frozenset({"secure_rng", "insecure_noise_seed"}),
        independent_of={"stage1": ("train", "model")},
        releases=lambda config: ("stage1",),
    )
)
