"""``vlp`` (vector label privacy, :mod:`labeldp.mechanisms.label_vectors`): every label released once as a
random binary vector, epsilon-label-DP; one stage trains by the forward loss on its evidence, as ``lp-1st``
does on RR's channel (docs/methods.md)."""

from __future__ import annotations

from labeldp.boundary import release_vector_labels
from labeldp.config.method_registry import BUILTIN_HELP, Method, register_method
from labeldp.methods.alibi import one_release

register_method(
    Method(
        "vlp",
        BUILTIN_HELP["vlp"],
        one_release(release_vector_labels),
        independent_of={"stage1": ("train", "model")},
        releases=lambda config: ("stage1",),
    )
)
