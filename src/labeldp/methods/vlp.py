"""``vlp`` (vector label privacy, Zhao et al., ICLR 2025): every label released once as a random binary
vector, each coordinate of its one-hot vector flipped by binary RR at epsilon / 2.

As a function of the true class y, Pr[z | y] is proportional to e^(eps z_y): ``vlp`` trains one stage with
the forward loss on that evidence, as ``lp-1st`` does on RR's channel (the paper trains K sigmoid outputs by
binary cross-entropy on z instead). epsilon-label-DP, each label released once.
"""

from __future__ import annotations

from labeldp.boundary import release_vector_labels
from labeldp.methods.alibi import one_release
from labeldp.methods.registry import Method, register_method

register_method(
    Method(
        "vlp",
        "vector label privacy: each label a random binary vector; trains by the forward loss on its evidence",
        one_release(release_vector_labels),
        uses=frozenset({"secure_rng", "insecure_noise_seed"}),
        independent_of={"stage1": ("train", "model")},
        releases=lambda config: ("stage1",),
    )
)
