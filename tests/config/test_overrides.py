"""``NAME=VALUE`` overrides (config/overrides.py): names resolved to their section and field (with
``-`` or ``_``, or a field's own flag), values typed by their field, overrides applied at their level,
and ``NAME=V1,V2`` grid items parsed; bad names and values are refused."""

from __future__ import annotations

import pytest

from labeldp.config.overrides import apply_overrides, parse_assignments, parse_value, resolve_name
from labeldp.errors import ConfigError
from labeldp.runs import RunConfig
from labeldp.training import TrainConfig


@pytest.mark.parametrize(
    "name, expected",
    [
        ("epsilon", (None, "epsilon")),
        ("insecure-noise-seed", (None, "insecure_noise_seed")),
        ("lr", ("train", "lr")),
        ("weight_decay", ("train", "weight_decay")),
        ("mixup", ("train", "mixup_alpha")),  # the field's own flag, --mixup
        ("mixup_alpha", ("train", "mixup_alpha")),
        ("max-grad-norm", ("options", "max_grad_norm")),
        ("vote-noise", ("options", "noise_std")),  # --vote-noise
        ("teachers", ("options", "teachers")),
    ],
)
def test_a_name_resolves_to_its_section_and_field(name, expected) -> None:
    """A name, with ``-`` or ``_``, or a field's own flag, resolves to its settings section and field."""
    assert resolve_name(name) == expected


@pytest.mark.parametrize("name", ["learning_rate", "train", "options", "dpsgd", "lr_", ""])
def test_a_name_that_is_no_option_is_refused(name) -> None:
    """The sections themselves (train, a method's options) are no option: their fields are."""
    with pytest.raises(ConfigError, match=f"unknown option {name!r}; use a setting of the run"):
        resolve_name(name)


@pytest.mark.parametrize(
    "name, text, value",
    [
        ("epochs", "3", 3),
        ("lr", "0.1", 0.1),
        ("epsilon", "2", 2.0),
        ("warm_start", "false", False),
        ("warm-start", "YES", True),
        ("augment", "1", True),
        ("insecure_noise_seed", "none", None),
        ("delta", "None", None),
        ("stages", "0.3:0.7", (0.3, 0.7)),
        ("classes", "no:yes", ("no", "yes")),
        ("method", "dp-sgd", "dp-sgd"),
        ("vote-noise", "40", 40.0),
    ],
)
def test_a_value_is_typed_by_its_field(name, text, value) -> None:
    """Text becomes a value of its field's type: numbers, switches, none for an optional field, tuples."""
    parsed = parse_value(name, text)
    assert parsed == value and type(parsed) is type(value)


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("augment", "maybe", "augment='maybe' is not a boolean"),
        ("epsilon", "one", "epsilon='one' is not of type float"),
        ("epochs", "2.5", "epochs='2.5' is not of type int"),
        ("epochs", "none", "epochs='none' is not of type int"),  # only an optional field takes none
        ("stages", "0.3:x", "stages='0.3:x' is not of type float"),
        ("speed", "1", "unknown option 'speed'"),
    ],
)
def test_a_value_not_of_its_fields_type_is_refused(name, text, message) -> None:
    """Text that is not a value of its field's type is refused, naming the option and the text."""
    with pytest.raises(ConfigError, match=message):
        parse_value(name, text)


def test_overrides_are_applied_at_their_level_and_left_unresolved() -> None:
    """Strings are parsed, other values taken as they are; each lands in its section (the method's options
    for the method the overrides name), the rest of the configuration (and the configuration overridden) stays
    as it was; the result is not resolved, but an option the method does not use is refused at once."""
    base = RunConfig(method="lp-2st", epsilon=1.0, train=TrainConfig(epochs=7, lr=0.5), options={"temperature": 3.0})
    config = apply_overrides(base, {"lr": "0.2", "epsilon": 2.0, "warm-start": "false"})
    assert config.train.lr == 0.2 and config.train.epochs == 7 and config.epsilon == 2.0
    assert config.options.warm_start is False and config.options.temperature == 3.0 and config.method == "lp-2st"
    assert base.train.lr == 0.5 and base.epsilon == 1.0 and base.options.warm_start is True
    dpsgd = apply_overrides(base, {"method": "dp-sgd", "max-grad-norm": "3", "temperature": 1.0})
    assert dpsgd.options.max_grad_norm == 3.0 and dpsgd.options.noise_multiplier is None
    pate = apply_overrides(RunConfig(method="pate", epsilon=1.0), {"vote-noise": 40.0})
    assert pate.options.noise_std == 40.0 and pate.options.teachers == 250
    assert apply_overrides(base, {}) == base
    with pytest.raises(ConfigError, match="'alibi' does not use temperature"):
        apply_overrides(RunConfig(method="alibi", epsilon=1.0), {"temperature": "2"})
    with pytest.raises(ConfigError, match="'dp-sgd' does not use temperature"):
        apply_overrides(base, {"method": "dp-sgd"})
    with pytest.raises(ConfigError, match="is not of type float"):
        apply_overrides(base, {"lr": "fast"})
    with pytest.raises(ConfigError, match="unknown option"):
        apply_overrides(base, {"learning_rate": 0.1})


def test_grid_items_are_parsed_into_names_and_values() -> None:
    """``NAME=V1,V2`` items become ``{name: [values]}`` (values kept as text, names with ``_``)."""
    assert parse_assignments(["lr=0.1,0.2", "max-grad-norm=1", "stages=0.3:0.7,0.5:0.5"]) == {
        "lr": ["0.1", "0.2"],
        "max_grad_norm": ["1"],
        "stages": ["0.3:0.7", "0.5:0.5"],
    }
    assert parse_assignments([]) == {}
    for item in ("lr", "lr="):
        with pytest.raises(ConfigError, match="must look like name=value1,value2"):
            parse_assignments([item])
    with pytest.raises(ConfigError, match="unknown option 'speed'"):
        parse_assignments(["lr=0.1", "speed=1,2"])
    with pytest.raises(ConfigError, match="unknown option ''"):
        parse_assignments(["=0.1"])


def test_an_empty_value_in_a_grid_is_refused_at_once() -> None:
    """``lr=0.1,,0.2`` names an empty value: refused where the grid is read, not by a run later."""
    with pytest.raises(ConfigError, match="no empty value"):
        parse_assignments(["lr=0.1,,0.2"])
