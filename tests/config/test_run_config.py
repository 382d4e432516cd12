"""The configuration of a run (config/run_config.py): RunConfig.resolved() refuses what cannot run before
anything is written or released (an option the method does not use left off its default, a missing
or spare epsilon, a prior's options, conflicting noise options, test labels of a public test set,
numeric labels declared for a dataset with its own), fills in what depends on the method, and a
configuration survives its dictionary round trip."""

from __future__ import annotations

import dataclasses
import json

import pytest

from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.marginals_config import MarginalsConfig
from labeldp.config.method_registry import BUILTIN_METHODS, Method, option_fields
from labeldp.config.pate_config import PATEConfig
from labeldp.config.run_settings import DEFAULT_DELTA
from labeldp.errors import ConfigError
from labeldp.options import option
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig

#: a value other than the default for each method's option, and for the shared settings only some methods use
CHANGED = {
    "temperature": 2.0,
    "combine_priors": True,
    "loss": "mse",
    "reuse_labels": False,
    "warm_start": False,
    "consensus": True,
    "cell_rows": 20,
    "first_release": "rr",
    "max_grad_norm": 2.0,
    "noise_multiplier": 2.0,
    "augmult": 2,
    "ema_decay": 0.5,
    "physical_batch_size": 64,
    "clipping": "vmap",
    "teachers": 7,
    "queries": 10,
    "aggregator": "confident",
    "noise_std": 3.0,
    "threshold": 0.5,
    "threshold_noise_ratio": 1.0,
    "teacher_epochs": 2,
    "teacher_batch_size": 8,
    "bins": 8,
    "l2": 1.0,
}
SHARED = {"delta": 1e-3, "prior": "cluster", "secure_rng": True, "insecure_noise_seed": 1}


def _valid(method: str) -> RunConfig:
    """The smallest configuration of a built-in method that resolves: an epsilon for a private method,
    and a table with a numeric label for the regression methods."""
    fields = {} if method == "non-private" else {"epsilon": 1.0}
    if method in ("rr-on-bins", "rr-on-bins-mst", "laplace-regression"):
        fields.update(dataset="csv", label_range=(0.0, 10.0))
    return RunConfig(method=method, **fields)


def _run(context):
    raise AssertionError("a method registered by these tests is never run")


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(prior="cluster", method="non-private", epsilon=None), "needs a private method"),
        (dict(prior="cluster", epsilon=1.0, prior_epsilon=1.0), "must be smaller than epsilon"),
        (dict(prior="uniform", epsilon=1.0, prior_epsilon=0.1), "only with prior 'cluster'"),
        (dict(prior="knn", epsilon=1.0), "prior must be one of"),
        (dict(prior="uniform", epsilon=1.0, prior_temperature=2.0), "only with prior 'cluster'"),
        (dict(prior="uniform", epsilon=1.0, encoder="autoencoder"), "only with prior 'cluster'"),
        (dict(method="lp-2st", prior="uniform", epsilon=1.0, options={"combine_priors": True}), "only with prior"),
        (dict(prior="uniform", epsilon=1.0, clusters=50), "clusters applies only with prior 'cluster'"),
        (
            dict(prior="cluster", method="lp-1st", epsilon=1.0, options={"combine_priors": True}),
            "'lp-1st' does not use combine_priors",
        ),
        (dict(prior="cluster", epsilon=1.0, encoder="vae"), "encoder must be one of"),
        (dict(prior="cluster", epsilon=1.0, prior_temperature=0.0), "prior_temperature must be > 0"),
    ],
)
def test_bad_prior_configuration(changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        RunConfig(**{"method": "lp-1st", **changes}).resolved()


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(method="lp-2st"), "needs --epsilon"),
        (dict(method="lp-2st", epsilon=0.0), "epsilon must be a finite number > 0"),
        (dict(method="lp-2st", epsilon=float("nan")), "epsilon must be a finite number > 0"),
        (dict(method="lp-mst", epsilon=1.0, stages=(0.5, 0.6)), "summing to 1"),
        (dict(method="lp-2st", epsilon=1.0, stages=(0.2, 0.3, 0.5)), "has 2 stage"),
        (dict(method="non-private", epsilon=1.0), "takes no epsilon"),
        (dict(method="dp-magic", epsilon=1.0), "unknown method"),
        (dict(dataset="imagenet", epsilon=1.0), "unknown dataset"),
        (dict(epsilon=1.0, options={"temperature": 0.0}), "temperature"),
        (dict(epsilon=1.0, train=TrainConfig(epochs=0)), "epochs"),
        (dict(method="dp-sgd", epsilon=1.0, options={"temperature": 2.0}), "'dp-sgd' does not use temperature; leave"),
        (
            dict(method="lp-1st", epsilon=1.0, options={"reuse_labels": False, "warm_start": False}),
            "'lp-1st' does not use reuse_labels, warm_start; leave them",
        ),
        (dict(method="pate", epsilon=1.0, options={"loss": "ce"}), "'pate' does not use loss"),
        (dict(method="non-private", secure_rng=True), "'non-private' does not use secure_rng"),
        (dict(method="lp-2st", epsilon=1.0, options=DPSGDConfig(max_grad_norm=0.1)), "does not use max_grad_norm;"),
        (
            dict(method="dp-sgd", epsilon=1.0, options=PATEConfig(teachers=10, queries=5)),
            "does not use teachers, queries;",
        ),
    ],
)
def test_bad_configuration_is_refused_before_anything_is_written(blobs, tmp_path, changes, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        train_run(RunConfig(**{"dataset": "csv", **changes}), tmp_path / "run", progress=False, dataset=blobs)
    assert not (tmp_path / "run").exists()


def test_every_option_a_method_does_not_use_is_refused_off_its_default() -> None:
    """For every built-in method, each other method's option and each shared setting it does not use, set to a
    value other than its default, is refused (a user who sets one expects it to act); its own are accepted."""
    assert set(CHANGED) == set(option_fields())
    for method in BUILTIN_METHODS:
        own = {f.name for f in dataclasses.fields(_valid(method).options)}
        for name in set(CHANGED) - own:
            with pytest.raises(ConfigError, match=f"does not use {name}"):
                dataclasses.replace(_valid(method), options={name: CHANGED[name]}).resolved()
        for name in own:  # (combining priors needs a prior of public features)
            prior = {"prior": "histogram"} if name == "combine_priors" else {}
            dataclasses.replace(_valid(method), options={name: CHANGED[name]}, **prior).resolved()
        spec = _valid(method).method_spec
        used = {"delta": spec.gaussian, "prior": spec.takes_prior, "secure_rng": spec.private}
        for name in [name for name in SHARED if not used.get(name, spec.private)]:
            with pytest.raises(ConfigError):
                dataclasses.replace(_valid(method), **{name: SHARED[name]}).resolved()


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(secure_rng=True, insecure_noise_seed=3), "secure_rng draws the noise from a CSPRNG .*: choose one"),
        (dict(label_grid=5), "label_grid needs label_range LOW HIGH"),
        (dict(classes=("a", "b")), "classes are declared for a table \\(dataset 'csv'\\); dataset 'digits'"),
        (dict(dataset="csv", classes=("a",)), "classes must be at least two distinct values"),
        (dict(dataset="csv", classes=("a", "b", "a")), "classes must be at least two distinct values"),
        (dict(dataset="csv", label_range=(0.0, 1.0, 2.0)), "label_range is two numbers LOW HIGH"),
        (dict(dataset="csv", test_labels="secret"), "test_labels must be one of"),
        (dict(test_labels="none"), "the test set of 'digits' is public and measured exactly"),
        (dict(dataset="csv", test_table="t.csv", test_labels="none"), "the test set of 'csv' is public"),
        (dict(options={"loss": "hinge"}), "loss must be one of"),
        (dict(model="vit"), "unknown model 'vit'"),
        (dict(method="lp-2st", options={"temperature": float("inf")}), "temperature must be a finite number > 0"),
        (dict(method="lp-mst", stages=(1.0,)), "'lp-mst' needs at least two stages"),
        (dict(method="pate", delta=1.5), "delta must lie in \\(0, 1\\)"),
        (dict(prior="cluster", clusters=0), "clusters must be at least 1"),
        (dict(prior="cluster", prior_epsilon=-0.1), "prior_epsilon must be a finite number > 0"),
        (dict(prior="histogram", clusters=5), "clusters applies only with prior 'cluster' \\(the histogram prior"),
        (dict(train=TrainConfig(augment=False, flip=True)), "flip adds to the dataset's augmentation"),
    ],
)
def test_resolved_refuses_conflicting_and_undeclared_choices(fields, message) -> None:
    """Choices that contradict each other or the dataset are refused by resolved(), with a message that
    names them: the two noise options, classes and numeric labels where the dataset defines its own
    labels, test labels of a public test set, and values outside an option's range."""
    with pytest.raises(ConfigError, match=message):
        RunConfig(**{"method": "lp-1st", "epsilon": 1.0, **fields}).resolved()


def test_test_labels_apply_to_test_rows_held_out_of_the_private_column() -> None:
    """A table without a test file and MovieLens hold their test rows out of the private label column:
    there their labels may be public or left out."""
    for dataset in ("csv", "movielens"):
        for choice in ("released", "public", "none"):
            config = RunConfig(dataset=dataset, method="lp-1st", epsilon=1.0, test_labels=choice)
            assert config.test_held_out and config.resolved().test_labels == choice
    assert not RunConfig().test_held_out and not RunConfig(dataset="csv", test_table="t.csv").test_held_out


def test_a_method_of_ones_own_declares_its_options_as_a_frozen_dataclass_of_options(register_for_test) -> None:
    """A method whose options are no frozen dataclass, or are not declared as options, is refused when it is
    registered; one whose option names a setting every run shares (or a section config.json once held) when a
    configuration names it, before anything is written: config.json records the options beside the settings."""

    @dataclasses.dataclass
    class Loose:
        share: float = 0.5

    with pytest.raises(ConfigError, match="frozen dataclass"):
        Method("test-config-loose", "loose", _run, options=Loose)

    @dataclasses.dataclass(frozen=True)
    class Clash:
        seed: int = option(1, help="a seed of its own")
        pate: float = option(1.0, help="a name config.json once gave PATE's section")

    @dataclasses.dataclass(frozen=True)
    class Bare:
        share: float = 0.5

    with pytest.raises(ConfigError, match="must be declared with option"):
        register_for_test(Method("test-config-bare", "bare", _run, options=Bare))
    register_for_test(Method("test-config-clash", "clash", _run, options=Clash))
    with pytest.raises(ConfigError, match="its option pate, seed names a setting every run has"):
        RunConfig(method="test-config-clash", epsilon=1.0)
    with pytest.raises(ConfigError, match="its option pate, seed names"):
        RunConfig.from_dict({"method": "test-config-clash", "pate": 2.0})


def test_changing_the_method_keeps_only_the_options_the_new_one_takes() -> None:
    """Another method's options, a subclass of the new one's among them (lp-2st's of lp-1st's), are re-homed: what
    the new method takes is kept, another's left at its default dropped, another's changed refused."""
    lp2st = RunConfig(method="lp-2st", epsilon=1.0, options={"consensus": True})
    lp1st = dataclasses.replace(lp2st, method="lp-1st")
    assert type(lp1st.options).__name__ == "LabelOptions" and lp1st.options.consensus is True
    vlp = RunConfig(method="lp-2st", epsilon=1.0, options={"first_release": "vlp"})
    with pytest.raises(ConfigError, match="'lp-1st' does not use first_release"):
        dataclasses.replace(vlp, method="lp-1st")
    with pytest.raises(ConfigError, match="'non-private' does not use temperature"):
        dataclasses.replace(RunConfig(options={"temperature": 5.0}), method="non-private")
    # a config.json records the first release only for the methods that choose it: any other value is refused
    with pytest.raises(ConfigError, match="'alibi' does not use first_release"):
        RunConfig.from_dict({"method": "alibi", "epsilon": 1.0, "first_release": "vlp"})
    with pytest.raises(ConfigError, match="unknown method 'rr-ce'"):  # its --recipes file not loaded
        RunConfig.from_dict({"method": "rr-ce", "train_share": 0.5})


def test_resolved_fills_in_what_depends_on_the_method() -> None:
    """The defaults that depend on the method are filled in: its stages, its prior (a noisy histogram for
    RR-on-bins, bought with a tenth of epsilon), delta for the Gaussian methods, the grid of a numeric
    label; classes become text. The configuration resolved from is left as it was."""
    two_stages = RunConfig(method="lp-2st", epsilon=2.0)
    resolved = two_stages.resolved()
    assert resolved.stages == (0.4, 0.6) and resolved.prior == "uniform" and resolved.prior_epsilon is None
    assert resolved.delta is None and resolved.label_epsilon == 2.0
    assert two_stages.stages is None and two_stages.prior is None
    cluster = RunConfig(method="lp-2st", epsilon=2.0, prior="cluster").resolved()
    assert cluster.prior_epsilon == pytest.approx(0.2) and cluster.label_epsilon == pytest.approx(1.8)
    assert RunConfig(method="pate", epsilon=1.0).resolved().delta == DEFAULT_DELTA
    assert RunConfig(method="dp-sgd", epsilon=1.0, delta=1e-6).resolved().delta == 1e-6
    bins = RunConfig(dataset="csv", method="rr-on-bins", epsilon=1.0, label_range=(0, 10)).resolved()
    assert bins.prior == "histogram" and bins.prior_epsilon == pytest.approx(0.1)
    assert bins.label_range == (0.0, 10.0) and bins.label_grid == 50 and len(bins.label_values) == 50
    assert RunConfig(dataset="csv", method="lp-1st", epsilon=1.0, classes=(0, 1)).resolved().classes == ("0", "1")


def test_a_resolved_configuration_resolves_to_itself() -> None:
    """Resolving twice changes nothing, for every built-in method: a configuration read back from a run
    folder (already resolved) is accepted as it was written."""
    for method in BUILTIN_METHODS:
        resolved = _valid(method).resolved()
        assert resolved.resolved() == resolved, method


def test_a_configuration_survives_its_dictionary_round_trip() -> None:
    """to_dict gives what config.json holds (tuples as lists, the settings as dictionaries) and from_dict
    gives the same configuration back, resolved or not."""
    config = RunConfig(
        dataset="csv",
        table="t.csv",
        method="lp-2st",
        epsilon=1.0,
        stages=(0.3, 0.7),
        classes=("no", "yes"),
        features=("a", "b"),
        drop=("c",),
        train=TrainConfig(lr=0.2, epochs=3),
        insecure_noise_seed=4,
    )
    written = config.to_dict()
    assert written["stages"] == [0.3, 0.7] and written["classes"] == ["no", "yes"] and written["train"]["lr"] == 0.2
    for original in (config, config.resolved()):
        assert RunConfig.from_dict(json.loads(json.dumps(original.to_dict()))) == original
    assert RunConfig.from_dict({"method": "alibi"}) == RunConfig(method="alibi")


@pytest.mark.parametrize("kind", [RunConfig, TrainConfig, DPSGDConfig, PATEConfig, MarginalsConfig])
def test_every_configuration_is_frozen(kind) -> None:
    """A configuration is changed by replacing it, never in place: what a run recorded stays what it ran."""
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(kind(), dataclasses.fields(kind)[0].name, None)


def test_an_older_configuration_still_loads_frozen() -> None:
    """DP-SGD's "no EMA", written as None by earlier versions, reads as 0."""
    data = RunConfig(method="dp-sgd", epsilon=1.0).to_dict()
    loaded = RunConfig.from_dict({**data, "ema_decay": None})
    assert loaded.options.ema_decay == 0.0 and loaded == RunConfig(
        method="dp-sgd", epsilon=1.0, options=DPSGDConfig(ema_decay=0.0)
    )


def test_a_configuration_with_unknown_options_is_refused_with_a_sentence() -> None:
    """A config.json written by another version names what this one does not know."""
    import pytest

    from labeldp.errors import ConfigError

    data = RunConfig(method="lp-1st", epsilon=1.0).to_dict()
    assert RunConfig.from_dict(data) == RunConfig(method="lp-1st", epsilon=1.0)
    with pytest.raises(ConfigError, match="does not know: shiny, train.turbo"):
        RunConfig.from_dict({**data, "shiny": 1, "train": {**data["train"], "turbo": True}})


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(privacy_unit="user", max_rows_per_unit=2), "privacy_unit names a column of a table"),
        (dict(dataset="csv", privacy_unit="user"), "needs max_rows_per_unit M .*largest unit's row count"),
        (dict(dataset="csv", max_rows_per_unit=2), "give privacy_unit COLUMN too"),
        (dict(dataset="csv", privacy_unit="user", max_rows_per_unit=0), "at least 1"),
        (dict(dataset="csv", privacy_unit="user", max_rows_per_unit=1.5), "whole number"),
        (dict(dataset="csv", privacy_unit="label", max_rows_per_unit=2), "never a feature"),
        (dict(dataset="csv", privacy_unit="user", max_rows_per_unit=2, features=("user",)), "never a feature"),
        (dict(dataset="csv", privacy_unit="user", max_rows_per_unit=2, method="dp-sgd"), "protects examples"),
        (dict(dataset="csv", privacy_unit="user", max_rows_per_unit=2, method="pate"), "max_rows_per_unit 1"),
    ],
)
def test_a_privacy_unit_is_a_tables_column_with_its_bound_under_a_method_that_composes_per_unit(
    fields, message
) -> None:
    """Refused before anything is read: a unit without its bound (or the reverse), a bound that is no
    positive whole number, the unit as the label or a feature, DP-SGD (add-or-remove neighbours do not
    compose per unit), PATE with units of several rows; the two options survive config.json."""
    with pytest.raises(ConfigError, match=message):
        RunConfig(**{"method": "lp-1st", "epsilon": 1.0, **fields}).resolved()
    config = RunConfig(dataset="csv", method="lp-2st", epsilon=1.0, privacy_unit="user", max_rows_per_unit=4)
    assert RunConfig.from_dict(json.loads(json.dumps(config.resolved().to_dict()))) == config.resolved()
    RunConfig(dataset="csv", method="pate", epsilon=1.0, privacy_unit="user", max_rows_per_unit=1).resolved()
