"""``alibi`` (Malek et al. 2021): every label released once as its one-hot vector plus discrete Laplace
noise of scale 2 / epsilon per coordinate.

ALIBI trains on soft labels prior(y) Pr[z | y] / Z with the model's prediction as the prior; the
forward loss has exactly that gradient, so ``alibi`` trains one stage with it on the Laplace
likelihoods. epsilon-label-DP, each label released once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release, release_laplace_one_hot
from labeldp.config.method_registry import BUILTIN_HELP, Method, register_method
from labeldp.methods.protocol import MethodContext


def one_release(release: Callable[..., Release]) -> Callable[[MethodContext], tuple[nn.Module, dict[str, Any]]]:
    """The driver of a method that releases every label once (``stage1``) by ``release`` (a ``release_*``
    function of :mod:`labeldp.boundary` whose ``likelihood`` is each member's channel, noise from the stream
    ``label-release`` 1, through :meth:`~labeldp.methods.protocol.MethodContext.spend`) and trains one stage
    on that evidence. epsilon-label-DP as ``release`` is; training is post-processing."""

    def run(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
        config, data = context.config, context.data
        members = np.arange(len(data.y_train))
        epsilon = config.epsilon
        assert epsilon is not None, "a resolved configuration of a private method has its epsilon"

        def draw(ledger: PrivacyLedger) -> Release:
            generator = config.noise.generator("label-release", 1)
            released = release(ledger, data.y_train, members, data.num_classes, epsilon, generator, "stage1")
            assert released.likelihood is not None  # the channel of each member's release
            return released.with_arrays(indices=members, evidence=released.likelihood.astype(np.float32))

        released = context.spend("stage1", draw)
        model = context.new_model(1)
        context.train(model, 1, 1, members, released.arrays["evidence"])
        mean_k = float(np.mean(released.arrays["k"]))
        return model, {"stages": [{"stage": 1, "released": int(members.size), "reused": 0, "mean_k": mean_k}]}

    return run


register_method(
    Method(
        "alibi",
        BUILTIN_HELP["alibi"],
        one_release(release_laplace_one_hot),
        independent_of={"stage1": ("train", "model")},
        releases=lambda config: ("stage1",),
    )
)
