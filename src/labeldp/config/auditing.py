"""The defaults of ``labeldp audit``, stated once."""

from __future__ import annotations

#: confidence of an audit's lower bound (Clopper-Pearson intervals)
DEFAULT_CONFIDENCE = 0.95
#: the kinds of canaries a label-inference audit plants, the first the default
CANARY_KINDS = ("mislabeled", "noise")
#: shadow models of a membership audit's offline LiRA
DEFAULT_SHADOWS = 4

__all__ = ["CANARY_KINDS", "DEFAULT_CONFIDENCE", "DEFAULT_SHADOWS"]
