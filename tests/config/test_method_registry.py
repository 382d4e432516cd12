"""The method registry (config/method_registry.py): a name registered twice is refused, a Method refuses
inconsistent declarations, a built-in is imported on first look-up and an unknown name lists the
choices, the built-ins come first, and a method's relation says what it protects."""

from __future__ import annotations

import dataclasses
import sys

import dp_accounting
import pytest

from labeldp.config import method_registry as registry
from labeldp.config.method_registry import (
    BUILTIN_METHODS,
    BUILTIN_OPTIONS,
    Method,
    get_method,
    method_names,
    option_fields,
    options_class,
)
from labeldp.errors import ConfigError
from labeldp.options import option


def _run(context):
    raise AssertionError("a method registered by these tests is never run")


def test_a_name_registered_twice_is_refused(register_for_test) -> None:
    """The second registration of a name, as a method's name or as an alias, is an error, and the first
    method keeps the name."""
    first = register_for_test(Method("test-registry-twice", "the first", _run), "test-registry-alias")
    with pytest.raises(ConfigError, match="'test-registry-twice' is already registered"):
        register_for_test(Method("test-registry-twice", "the second", _run))
    with pytest.raises(ConfigError, match="'test-registry-alias' is already registered"):
        register_for_test(Method("test-registry-alias", "the third", _run))
    builtin = get_method("lp-1st")  # registered by its module on this first look-up
    with pytest.raises(ConfigError, match="'lp-1st' is already registered"):
        register_for_test(Method("lp-1st", "a built-in's name", _run))
    assert get_method("test-registry-twice") is first and get_method("test-registry-alias") is first
    assert get_method("lp-1st") is builtin


@pytest.mark.parametrize(
    "declared, message",
    [
        ({"options": dict}, "its options must be a frozen dataclass"),
        ({"relation": "REPLACE_TWO"}, "the relation must be one of"),
        ({"tuning": "grid"}, "tuning must be one of"),
    ],
)
def test_a_method_refuses_inconsistent_declarations(declared, message) -> None:
    """A Method is checked when it is made: its options are a frozen dataclass, and the relation and the
    tuning are among those labeldp knows."""
    with pytest.raises(ConfigError, match=message):
        Method("test-registry-inconsistent", "inconsistent", _run, **declared)
    Method("test-registry-consistent", "consistent", _run, gaussian=True, tuning=None)


def test_a_builtin_is_imported_on_its_first_look_up(monkeypatch) -> None:
    """get_method imports the module BUILTIN_METHODS names for a built-in when the name is first looked
    up (the registry imports no method itself), and not again once the method is registered."""
    monkeypatch.setattr(registry, "_REGISTRY", {})  # as in a process that has imported no method yet
    imported = []

    def import_module(name):
        if name in imported:  # a module being imported: Python's import hands back the one in progress
            return
        imported.append(name)
        registry.register_method(Method("alibi", "registered by its module", _run))

    monkeypatch.setattr(registry.importlib, "import_module", import_module)
    first = get_method("alibi")
    assert imported == ["labeldp.methods.alibi"] and first.help == "registered by its module"
    assert get_method("alibi") is first and imported == ["labeldp.methods.alibi"]


def test_every_builtin_is_registered_by_the_module_it_names() -> None:
    """Looking up each built-in finds it, registered by the module of labeldp.methods that
    BUILTIN_METHODS names; an alias stands for its method."""
    for name, module in BUILTIN_METHODS.items():
        method = get_method(name)
        assert f"labeldp.methods.{module}" in sys.modules
        assert method.name == name or get_method(method.name) is method
    assert get_method("rr") is get_method("lp-1st")


def test_an_unknown_name_lists_the_choices(register_for_test) -> None:
    """An unknown name is an error that lists every method's name, a registered one of one's own included."""
    register_for_test(Method("test-registry-listed", "a method of the test's own", _run))
    with pytest.raises(ConfigError, match="unknown method 'lp-9st'; choose one of") as refused:
        get_method("lp-9st")
    assert str(refused.value).endswith(", ".join(method_names()))
    assert "dp-sgd" in str(refused.value) and "test-registry-listed" in str(refused.value)


def test_method_names_list_the_builtins_first_then_the_methods_registered_since(register_for_test) -> None:
    """method_names lists labeldp's own first, once each, then the names registered since, in their order."""
    for name in BUILTIN_METHODS:  # registered built-ins are listed once, in their place
        get_method(name)
    register_for_test(Method("test-registry-later", "registered after the built-ins", _run), "test-registry-later-2")
    names = method_names()
    assert names[: len(BUILTIN_METHODS)] == tuple(BUILTIN_METHODS)
    assert names.count("lp-1st") == 1 and names.index("test-registry-later") > names.index("dp-sgd")
    assert names[-2:] == ("test-registry-later", "test-registry-later-2")


@dataclasses.dataclass(frozen=True)
class _WarmOptions:
    temperature: float = option(1.0, help="a temperature of its own")


@dataclasses.dataclass(frozen=True)
class _ShareOptions:
    share: float = option(0.5, help="a share", free_of=("stage1",))


def test_each_option_is_known_with_the_methods_that_take_it(register_for_test) -> None:
    """option_fields names each method's option with the methods whose options hold it, labeldp's own known
    without importing them (BUILTIN_OPTIONS is what they register with); a method of one's own counts as
    labeldp's do, and may not declare an option of another method's name anew."""
    fields = option_fields()
    assert fields["temperature"][0] == ("lp-2st", "lp-mst", "rr-on-bins-mst") and fields["loss"][0][0] == "non-private"
    assert fields["noise_multiplier"][0] == ("dp-sgd",) and "delta" not in fields
    for name in BUILTIN_METHODS:
        assert get_method(name).options is BUILTIN_OPTIONS[name] is options_class(name)
    register_for_test(Method("test-registry-share", "a share of its own", _run, options=_ShareOptions))
    assert option_fields()["share"][0] == ("test-registry-share",)
    assert get_method("test-registry-share").independent("stage1") == ("share",)
    with pytest.raises(ConfigError, match="option 'temperature' is another method's"):
        register_for_test(Method("test-registry-warm", "a temperature anew", _run, options=_WarmOptions))


def test_a_release_is_independent_of_the_settings_its_method_names_and_of_its_options_free_of_it() -> None:
    """Method.independent joins the settings a method names (train, model) and its options' own ``free_of``."""
    lp2st = get_method("lp-2st")
    assert set(lp2st.independent("stage1")) == {
        "train", "model", "loss", "temperature", "combine_priors", "reuse_labels", "warm_start", "consensus"
    }  # fmt: skip
    assert "first_release" not in lp2st.independent("stage1")
    assert set(lp2st.independent("stage2")) == {"reuse_labels", "warm_start", "consensus"}
    assert "combine_priors" not in get_method("rr-on-bins-mst").independent("prior")
    assert set(get_method("dp-sgd").independent("dp-sgd")) == {
        "train.eval_batch_size",
        "physical_batch_size",
        "clipping",
    }


def test_the_relation_says_what_a_method_protects() -> None:
    """A method's relation is dp_accounting's NeighboringRelation: replacing one label (label DP, the
    default) protects labels, adding or removing one example (DP-SGD) whole examples."""
    label = Method("test-registry-label", "label DP", _run)
    example = Method("test-registry-example", "full DP", _run, relation="ADD_OR_REMOVE_ONE", planned=lambda *_: None)
    assert label.neighboring_relation == dp_accounting.NeighboringRelation.REPLACE_ONE and not label.protects_examples
    assert example.neighboring_relation == dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    assert example.protects_examples
    assert get_method("dp-sgd").protects_examples and not get_method("lp-2st").protects_examples


def test_a_method_registered_under_a_taken_alias_registers_nothing() -> None:
    """An alias that collides leaves neither the method's name nor its other aliases registered."""
    import pytest

    from labeldp.config import method_registry as registry
    from labeldp.errors import ConfigError

    method = registry.Method("fresh-method", "a test method", lambda context: None)
    with pytest.raises(ConfigError, match="already registered"):
        registry.register_method(method, "other-alias", "lp-1st")
    assert "fresh-method" not in registry.method_names() and "other-alias" not in registry.method_names()


def test_labeldps_own_names_are_taken_before_their_modules_are_imported() -> None:
    """A fresh process registering a method or a dataset under a built-in name is refused at once."""
    import subprocess
    import sys

    script = (
        "import pytest\n"
        "from labeldp.errors import ConfigError\n"
        "from labeldp.config.method_registry import Method, register_method, get_method\n"
        "from labeldp.data import Dataset, register_dataset\n"
        "with pytest.raises(ConfigError):\n"
        "    register_method(Method('lp-2st', 'mine', lambda context: None))\n"
        "assert get_method('lp-2st').help.startswith('two stages')\n"
        "with pytest.raises(ConfigError):\n"
        "    register_dataset(Dataset('digits', 'embedded', lambda request: None))\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)


def test_the_method_flags_help_is_each_builtins_own_line() -> None:
    """--method's help is made of the lines the built-in methods register with, one for each method (an alias
    is named in its method's line), so that it cannot drift from them."""
    from labeldp.config.method_registry import BUILTIN_HELP, methods_help
    from labeldp.config.run_settings import RunSettings
    from labeldp.options import declaration_of

    methods = {get_method(name).name: get_method(name) for name in BUILTIN_METHODS}
    assert set(methods) == set(BUILTIN_HELP)
    assert all(method.help == BUILTIN_HELP[name] for name, method in methods.items())
    field = next(field for field in dataclasses.fields(RunSettings) if field.name == "method")
    assert declaration_of(field).help.startswith(methods_help())
    assert all(f"{name}: {line}" in methods_help() for name, line in BUILTIN_HELP.items())


def test_a_method_protecting_examples_says_what_it_spends_under_replace_one() -> None:
    """The people's ledgers keep replace-one: a method whose guarantee is for examples added or removed is
    refused without ``planned``, so that its reservation is never its add-or-remove epsilon."""
    with pytest.raises(ConfigError, match="needs `planned`"):
        Method("test-registry-unplanned", "full DP", _run, relation="ADD_OR_REMOVE_ONE")
    assert get_method("dp-sgd").planned is not None
