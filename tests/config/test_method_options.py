"""The options of labeldp's label-DP methods (config/method_options.py): one declaration, one flag, for an option
several methods share; each class refuses the values it cannot run with; a configuration records them beside the
shared settings, and a config.json written when every method's options were recorded reads the same."""

from __future__ import annotations

import dataclasses

import pytest

from labeldp.config.method_options import CellCountsOptions, LabelOptions, MultiStageOptions, StageOptions
from labeldp.config.run_config import RunConfig, as_recorded
from labeldp.errors import ConfigError
from labeldp.options import declaration_of


def _declarations(cls) -> dict:
    return {field.name: declaration_of(field) for field in dataclasses.fields(cls)}


def test_an_option_several_methods_take_is_declared_once() -> None:
    """lp-1st's, lp-2st's and rr-on-bins-mst's options share their declarations (one flag each), while lp-2st and
    rr-on-bins-mst say differently which releases ``combine_priors`` leaves alone."""
    stage, label, multi = _declarations(StageOptions), _declarations(LabelOptions), _declarations(MultiStageOptions)
    assert all(stage[name] is label[name] for name in label) and all(stage[name] is multi[name] for name in multi)
    free = {
        cls: {f.name: f.metadata["free_of"] for f in dataclasses.fields(cls)}
        for cls in (StageOptions, MultiStageOptions)
    }
    assert free[StageOptions]["combine_priors"] == ("stage1", "prior")
    assert free[MultiStageOptions]["combine_priors"] == ("stage1",)  # its histogram's payers depend on it
    assert free[StageOptions]["first_release"] == ()


@pytest.mark.parametrize(
    "options, message",
    [
        (StageOptions(temperature=0.0), "temperature must be a finite number > 0"),
        (MultiStageOptions(temperature=float("nan")), "temperature must be a finite number > 0"),
        (CellCountsOptions(cell_rows=0), "cell_rows must be at least 1"),
    ],
)
def test_options_refuse_what_their_method_cannot_run_with(options, message) -> None:
    with pytest.raises(ConfigError, match=message):
        options.validate()


def test_a_config_json_that_recorded_every_methods_options_reads_the_same() -> None:
    """Before each method owned its options, config.json held every method's (the others at their defaults) and
    DP-SGD's, PATE's and marginals' in sections of their own; such a record reads as the configuration it was,
    and one that set another method's option is refused as it was then."""
    others = {"cell_rows": 10, "dpsgd": {"max_grad_norm": 1.0, "noise_multiplier": None}, "pate": {"teachers": 250}}
    old = {"method": "lp-2st", "epsilon": 1.0, "temperature": 2.0, "first_release": "rr", "marginals": {}, **others}
    assert RunConfig.from_dict(old) == RunConfig(
        method="lp-2st", epsilon=1.0, options={"temperature": 2.0, "first_release": "rr"}
    )
    dpsgd = {"method": "dp-sgd", "epsilon": 1.0, "loss": "forward", "first_release": "rr", "method_options": {}}
    dpsgd["dpsgd"] = {"max_grad_norm": 0.5, "ema_decay": None}
    assert RunConfig.from_dict(dpsgd).options == RunConfig(method="dp-sgd").options.__class__(
        max_grad_norm=0.5, ema_decay=0.0
    )
    assert RunConfig.from_dict({"method": "lp-2st", "epsilon": 1.0}).options.first_release == "rr"  # before "auto"
    with pytest.raises(ConfigError, match="'lp-2st' does not use max_grad_norm"):
        RunConfig.from_dict({**old, "dpsgd": {"max_grad_norm": 0.5}})
    assert "cell_rows" not in RunConfig.from_dict(old).to_dict()  # written again, only its own
    assert as_recorded(old) == RunConfig.from_dict(old).to_dict() and as_recorded({**old, "shiny": 1}) is None
