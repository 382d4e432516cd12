"""The options of labeldp's label-DP methods, each method's a frozen dataclass (``Method.options``): their
defaults, their help and the releases each never changes (``free_of``, named as labeldp's staged drivers name
them: ``prior``, then ``stage1``, ``stage2``...) stated once. DP-SGD's, PATE's and marginals' are
:class:`~labeldp.config.dpsgd.DPSGDConfig`, :class:`~labeldp.config.pate_config.PATEConfig` and
:class:`~labeldp.config.marginals_config.MarginalsConfig`. No torch."""

from __future__ import annotations

import math
from dataclasses import dataclass

from labeldp.errors import ConfigError
from labeldp.options import Option, declared, option

LOSSES = ("forward", "ce", "mse")
#: what the first stage of lp-2st and lp-mst releases (``first_release``): RR's labels, VLP's vectors, or
#: "auto": the vectors where one tells more of a label and the run can train on them (docs/methods.md)
FIRST_RELEASES = ("auto", "rr", "vlp")
#: the releases drawn before any model trains: an option of the training never changes them
BEFORE_TRAINING = ("stage1", "prior")
COMBINE_PRIORS = Option("with --prior cluster or histogram: later stages' prior is the model prior times it", False)


@dataclass(frozen=True)
class NoOptions:
    """A method with no options of its own."""


@dataclass(frozen=True)
class LossOptions:
    """The options of a method that trains on released labels."""

    loss: str = option(
        "forward",
        choices=LOSSES,
        help="forward: likelihood of each noisy label through its known noise channel (the model "
        "learns clean posteriors); ce: plain cross-entropy on noisy labels; mse (numeric labels): "
        "squared error of the predicted mean against the released values",
        free_of=BEFORE_TRAINING,
    )


@dataclass(frozen=True)
class LabelOptions(LossOptions):
    """The options of a method whose last model may be retrained on the labels it agrees with."""

    consensus: bool = option(
        False,
        help="after the last stage, train a new model on the released examples whose released label the last "
        "model predicts (consensus retraining; post-processing, no epsilon)",
        free_of=BEFORE_TRAINING,
    )


@dataclass(frozen=True)
class MultiStageOptions(LossOptions):
    """The options of a method in stages whose later priors come from the model so far."""

    temperature: float = option(1.0, help="later stages' prior = softmax(logits / T)", free_of=BEFORE_TRAINING)
    # a numeric label's histogram prior is paid by stage 1's examples, or by all of them with combine_priors
    combine_priors: bool = declared(COMBINE_PRIORS, free_of=("stage1",))
    reuse_labels: bool = option(
        True,
        help="train each stage on its own noisy labels only (default: earlier stages' labels too; with --loss ce "
        "only those inside the new prior's top k)",
        free_of=BEFORE_TRAINING,
    )
    warm_start: bool = option(True, help="train each stage's model from scratch", free_of=BEFORE_TRAINING)

    def validate(self) -> None:
        """Refuse (:class:`~labeldp.errors.ConfigError`) a temperature no softmax takes."""
        if not self.temperature > 0 or not math.isfinite(self.temperature):
            raise ConfigError(f"temperature must be a finite number > 0, got {self.temperature}")


@dataclass(frozen=True)
class StageOptions(LabelOptions, MultiStageOptions):
    """The options of LP-2ST and LP-MST."""

    combine_priors: bool = declared(COMBINE_PRIORS, free_of=BEFORE_TRAINING)
    first_release: str = option(
        "auto",
        choices=FIRST_RELEASES,
        help="stage 1's release: randomized response, VLP's vectors (the forward loss, no prior, no consensus), or "
        "auto: the vectors where one tells more of a label than RR's (with 10 classes below epsilon 2, with 2 to 4 "
        "never) and the run trains on them",
    )


@dataclass(frozen=True)
class CellCountsOptions(LossOptions):
    """The options of LP-2ST with noisy label counts per cell."""

    cell_rows: int = option(
        10, help="the fewest second-stage rows in a cell whose label counts are released", free_of=("stage1",)
    )

    def validate(self) -> None:
        """Refuse (:class:`~labeldp.errors.ConfigError`) a cell of no rows."""
        if self.cell_rows < 1:
            raise ConfigError(f"cell_rows must be at least 1, got {self.cell_rows}")


__all__ = [
    "BEFORE_TRAINING",
    "CellCountsOptions",
    "FIRST_RELEASES",
    "LOSSES",
    "LabelOptions",
    "LossOptions",
    "MultiStageOptions",
    "NoOptions",
    "StageOptions",
]
