"""The configuration of a run: everything needed to repeat it, written to its ``config.json``.

:class:`RunConfig` is the settings (:class:`~labeldp.config.run_settings.RunSettings`) with what resolves them:
:meth:`RunConfig.resolved` checks every field and fills in what depends on the method, before anything is
written or released. Public settings only: nothing here reads a label."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labeldp._validation import check_epsilon
from labeldp.accounting.datasets import check_name
from labeldp.config.method_registry import (
    Method,
    check_options,
    get_method,
    method_names,
    option_fields,
    options_class,
)
from labeldp.config.run_settings import DEFAULT_DELTA, OLD_SECTIONS, RunSettings, default_method
from labeldp.config.shared_options import PRIORS, TEST_LABELS
from labeldp.config.train_config import TrainConfig
from labeldp.data.dataset_registry import get_dataset
from labeldp.data.dataset_spec import Dataset
from labeldp.data.grid import DEFAULT_GRID_SIZE, label_grid
from labeldp.errors import ConfigError, MissingFileError
from labeldp.models.names import MODELS, default_model_name
from labeldp.priors.encoders import ENCODER_FILE_SUFFIX, ENCODERS, is_encoder_file
from labeldp.randomness import NoiseSource

#: the largest delta accepted: above it a mechanism may publish a label outright with a probability no guarantee allows
MAX_DELTA = 1e-2
#: the share of epsilon a noisy histogram prior buys when none is given (the labels get the rest)
DEFAULT_PRIOR_SHARE = 0.1
#: Options of the noisy-histogram priors (cluster, histogram), refused with prior 'uniform' unless at their defaults.
CLUSTER_PRIOR_OPTIONS = ("prior_epsilon", "prior_temperature", "encoder", "clusters")
#: Options of the cluster prior only: the histogram prior is one group of all examples.
CLUSTERING_OPTIONS = ("encoder", "clusters")


@dataclass(frozen=True)
class RunConfig(RunSettings):
    """Everything needed to repeat a run, written to ``config.json``: its settings and what resolves them."""

    @property
    def method_spec(self) -> Method:
        """The registered :class:`~labeldp.config.method_registry.Method` named by ``method``."""
        return get_method(self.method)

    def model_name(self, input_shape: tuple[int, ...], categorical: tuple[int, ...] = ()) -> str:
        """The network a run trains on inputs of ``input_shape``: ``model``, else the rule's choice for the
        shape and method (:func:`~labeldp.models.names.default_model_name`; BatchNorm-free for DP-SGD)."""
        return self.model or default_model_name(input_shape, categorical, per_example=self.method_spec.per_example)

    def on_data(self, num_classes: int) -> tuple[RunConfig, str | None]:
        """This configuration as a run takes it on data of ``num_classes`` classes (``Method.on_data``), and the
        line saying what the method chose (None: nothing to say)."""
        hook = self.method_spec.on_data
        if hook is None:
            return self, None
        options, line = hook(self, num_classes)
        return dataclasses.replace(self, options=dataclasses.replace(self.options, **options)), line

    def resolved(self) -> RunConfig:
        """A copy with every field checked and what depends on the method filled in (budget, stages, prior,
        label grid), ``classes`` as text and the data paths made absolute.

        Public settings only: it is called before anything is written or released.

        Raises
        ------
        labeldp.errors.ConfigError
            For any setting that does not fit, options the method does not use set away from their defaults,
            or what the method's own check refuses.
        labeldp.errors.MissingFileError
            If ``encoder`` names a file that does not exist.
        """
        dataset = get_dataset(self.dataset)  # refuses an unknown name
        table, held_out = dataset.source == "table", self._held_out(dataset)
        if self.dataset_name is not None:
            check_name(self.dataset_name)
        method = self.method_spec
        if self.model is not None and self.model not in MODELS:
            raise ConfigError(f"unknown model {self.model!r}; choose one of {', '.join(MODELS)}")
        epsilon, delta = self._budget(method)
        stages = _stage_fractions(self, method)
        prior = self.prior if self.prior is not None else method.default_prior
        prior_epsilon = _check_prior(self, prior, epsilon)
        self._check_shared(method)
        check_options(self.options)
        _check_choices(self, table, held_out)
        _check_units(self, method, table)
        label_range, grid_size = _label_grid_of(self, table)
        self.train.validate()
        resolved = dataclasses.replace(
            self,
            epsilon=epsilon,
            delta=delta,
            stages=stages,
            prior=prior,
            prior_epsilon=prior_epsilon,
            label_range=label_range,
            label_grid=grid_size,
            # config.json's "public" where the test set is public: nothing of it is held out or released
            test_labels=self.test_labels if held_out else "released",
            classes=tuple(map(str, self.classes)) if self.classes is not None else None,
            **self._absolute_paths(),
        )
        if method.check is not None:
            method.check(resolved)
        return resolved

    def _absolute_paths(self) -> dict[str, Any]:
        """The data paths made absolute, so that config.json names the same files from any folder (a table's
        relative paths under ``data_dir``, as a profile names them)."""
        folder = Path(self.data_dir).expanduser() if self.data_dir is not None else Path()
        paths = {  # an absolute path stays as it is
            name: str(((folder if name != "data_dir" else Path()) / Path(value).expanduser()).resolve())
            for name in ("data_dir", "table", "test_table")
            if (value := getattr(self, name)) is not None
        }
        if is_encoder_file(self.encoder):
            paths["encoder"] = str(Path(self.encoder).expanduser().resolve())
        return paths

    def _budget(self, method: Method) -> tuple[float | None, float | None]:
        epsilon = delta = None
        if method.private:
            if self.epsilon is None:
                raise ConfigError(f"method {self.method!r} needs --epsilon")
            epsilon = check_epsilon(self.epsilon)
        elif self.epsilon is not None:
            raise ConfigError(f"method {self.method!r} takes no epsilon")
        if method.gaussian:
            delta = DEFAULT_DELTA if self.delta is None else float(self.delta)
            if not 0.0 < delta < 1.0:
                raise ConfigError(f"delta must lie in (0, 1), got {delta}")
            if delta > MAX_DELTA:  # a mechanism may then publish a whole row's label with that probability
                raise ConfigError(
                    f"delta {delta:g} gives no meaningful guarantee: at most {MAX_DELTA:g}, and well below 1 / the "
                    f"number of rows (the default is {DEFAULT_DELTA:g})"
                )
        elif self.delta is not None:
            gaussian = " and ".join(name for name in method_names() if get_method(name).gaussian)
            raise ConfigError(
                f"delta applies only to methods {gaussian} (the other label-DP methods are pure epsilon-DP)"
            )
        return epsilon, delta

    def _check_shared(self, method: Method) -> None:
        """Refuse the shared settings a method does not use, changed from their defaults: a user who sets one
        expects it to act. (Its own options are refused by :func:`~labeldp.config.method_registry.options_of`.)"""
        unused = [
            name
            for name, used, default in (
                ("secure_rng", method.private, False),
                ("insecure_noise_seed", method.private, None),
                ("prior", method.takes_prior, method.default_prior),
            )
            if not used and getattr(self, name) not in (default, None)
        ]
        if unused:
            raise ConfigError(
                f"method {self.method!r} does not use {', '.join(unused)}; leave "
                f"{'it' if len(unused) == 1 else 'them'} at the default"
            )

    @property
    def label_values(self) -> np.ndarray | None:
        """The declared grid of a numeric label over ``label_range`` (None without a range)."""
        if self.label_range is None:
            return None
        low, high = self.label_range
        return label_grid(low, high, self.label_grid or DEFAULT_GRID_SIZE)

    @property
    def test_held_out(self) -> bool:
        """Whether the test rows are held out of the private label column (a table without a test table,
        MovieLens's split), so that their labels are private too."""
        return self._held_out(get_dataset(self.dataset))

    def _held_out(self, dataset: Dataset) -> bool:
        return dataset.held_out_test or (dataset.source == "table" and self.test_table is None)

    @property
    def label_epsilon(self) -> float | None:
        """The epsilon of each stage's label release: ``epsilon`` less the prior's share (None without epsilon)."""
        if self.epsilon is None:
            return None
        return self.epsilon - (self.prior_epsilon or 0.0)

    @property
    def noise(self) -> NoiseSource:
        """Where the run's noise comes from (:class:`~labeldp.randomness.NoiseSource`)."""
        return NoiseSource(secure=self.secure_rng, insecure_seed=self.insecure_noise_seed)

    def with_overrides(self, **fields: Any) -> RunConfig:
        """This configuration, unresolved, with the fields given replaced (None leaves a field alone)."""
        return dataclasses.replace(self, **{k: v for k, v in fields.items() if v is not None})

    def to_dict(self) -> dict[str, Any]:
        """The configuration as JSON-ready data (``config.json``): the method's options beside the shared settings,
        nested settings as dicts, tuples as lists."""
        data = asdict(self)
        data.update(data.pop("options"))  # a method's option is never a shared setting's name (RunSettings)
        return {name: list(value) if isinstance(value, tuple) else value for name, value in data.items()}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """A configuration, unresolved, from :meth:`to_dict`'s data; options left out take their defaults. Also
        reads a ``config.json`` that recorded every method's options (those the method does not use at their
        defaults) and DP-SGD's, PATE's and marginals' in sections of their own.

        Raises
        ------
        labeldp.errors.ConfigError
            For options this version of labeldp does not know, or a method's options it does not use changed.
        """
        shared = {field.name for field in dataclasses.fields(cls)} - {"options"}
        method = data.get("method") or default_method(data.get("dataset", cls.dataset))
        if options_class(method) is None:
            get_method(method)  # an unknown name: the error says which methods there are
        old = {name: value for name, value in data.items() if name in OLD_SECTIONS and isinstance(value, dict)}
        options = {name: value for name, value in data.items() if name not in shared and name not in old}
        for section in old.values():
            options.update(section)
        # before "auto", stage 1 was RR, and every method's config.json said so
        if "first_release" in _options_of(method):
            options.setdefault("first_release", "rr")
        elif options.get("first_release") in ("rr", "auto"):
            del options["first_release"]
        unknown = sorted(set(options) - set(option_fields()))
        unknown += sorted(f"train.{name}" for name in set(data.get("train") or {}) - set(_fields(TrainConfig)))
        if unknown:
            raise ConfigError(
                f"the configuration has options this version of labeldp does not know: {', '.join(unknown)} "
                "(written by another version?)"
            )
        settings = {name: data[name] for name in shared if name in data}
        settings["train"] = TrainConfig(**data.get("train", {}))
        for name in ("stages", "classes", "features", "drop", "label_range"):
            if settings.get(name) is not None:
                settings[name] = tuple(settings[name])
        return cls(**settings, options=options)


def as_recorded(data: dict[str, Any]) -> dict[str, Any] | None:
    """A configuration saved by any version (``config.json``, a tune's base) as this one records it; None where
    it cannot be read (options it does not know, a method not registered)."""
    try:
        return RunConfig.from_dict(data).to_dict()
    except ConfigError:
        return None


def recorded_test_labels(config: RunConfig, public_test: bool | None = None) -> str:
    """The test labels as a run of ``config`` measures them, as its ``config.json`` records them: ``"public"``
    for a public test set (the dataset's own, or held-out rows treated as public), ``"none"`` where nothing is
    measured (``test_labels`` none, or DP-SGD, which releases no label), else ``"released"``. A configuration
    naming a dataset or method this process does not know keeps its own.

    ``public_test``: whether the run's test labels are public; None: as the configuration's dataset loads
    them."""
    try:
        if public_test is None:
            public_test = not config.test_held_out or config.test_labels == "public"
        if public_test:
            return "public"
        return "none" if config.method_spec.training_releases else config.test_labels
    except ConfigError:  # another version's dataset or method: compared as written
        return config.test_labels


def recorded_config(
    config: RunConfig, network: str | None, num_classes: int | None, public_test: bool | None = None
) -> dict[str, Any]:
    """What a run's ``config.json`` holds: ``config`` as taken on data of ``num_classes`` classes (None: as
    given), with the ``network`` trained (:func:`~labeldp.runs.plan.run_network`) and the test labels as
    measured (:func:`recorded_test_labels`), so that it reads as the summary does and a rerun compares it as
    the same run.

    Naming the network trained makes a network the rule chose and the same network named the same run, and
    one rule's choice before and after the rule changed different runs; the test labels as measured make a
    folder saved before ``config.json`` recorded them (MNIST's ``"released"``) the same run as one that
    does (``"public"``)."""
    taken = config.on_data(num_classes)[0] if num_classes is not None else config
    return {
        **taken.to_dict(),
        "model": network,
        "test_labels": recorded_test_labels(config, public_test),
    }


def release_inputs(config: RunConfig, name: str, num_classes: int | None = None) -> dict[str, Any]:
    """The configuration release ``name`` depends on: all of it but what its method declares it independent of
    (:meth:`~labeldp.config.method_registry.Method.independent`), or for the test rows' release ``test``, the
    training and the network; with ``num_classes``, the options as the run takes them on its data
    (:meth:`~labeldp.config.run_config.RunConfig.on_data`).

    Saved with each release, it lets a run resume under a changed configuration only when the release would be
    the same, and lets ``labeldp tune`` check that its candidates share a release."""
    inputs = (config if num_classes is None else config.on_data(num_classes)[0]).to_dict()
    # the test rows' release (RR at the run's epsilon, :meth:`RunContext.test_release`) reads no model
    independent = ("train", "model") if name == "test" else config.method_spec.independent(name)
    for option in independent:
        outer, _, inner = option.partition(".")
        if inner:
            inputs[outer] = {key: value for key, value in inputs[outer].items() if key != inner}
        else:
            inputs.pop(outer)
    return inputs


def release_holds(saved: dict[str, Any] | None, config: RunConfig, name: str, num_classes: int) -> bool:
    """Whether a release saved with the inputs ``saved`` (:func:`release_inputs`, as any version recorded them) is
    the one ``config`` would draw as ``name`` on data of ``num_classes`` classes."""
    try:  # read as this version reads a config.json: a version's layout, or an option added since, is no change
        recorded = release_inputs(RunConfig.from_dict(saved), name) if saved is not None else None
    except ConfigError:  # options this version does not know, or another method's set: another configuration's
        return False
    return recorded == release_inputs(config, name, num_classes)


def _options_of(method: str) -> tuple[str, ...]:
    cls = options_class(method)
    return _fields(cls) if cls is not None else ()


def _fields(cls: type) -> tuple[str, ...]:
    return tuple(field.name for field in dataclasses.fields(cls))


def _stage_fractions(config: RunConfig, method: Method) -> tuple[float, ...]:
    """The stages' fractions of the budget (the method's own where none are given), checked."""
    stages = tuple(float(s) for s in (config.stages or method.default_stages))
    if any(not s > 0 for s in stages) or abs(sum(stages) - 1.0) > 1e-6:
        raise ConfigError(f"stages must be positive fractions summing to 1, got {list(stages)}")
    if method.stages is not None and len(stages) != method.stages:
        raise ConfigError(f"method {config.method!r} has {method.stages} stage(s), got {len(stages)} fractions")
    if method.stages is None and len(stages) < 2:
        raise ConfigError(f"method {config.method!r} needs at least two stages")
    return stages


def _check_prior(config: RunConfig, prior: str, epsilon: float | None) -> float | None:
    """The histogram's share of the budget (None without a cluster or histogram prior)."""
    if prior not in PRIORS:
        raise ConfigError(f"prior must be one of {PRIORS}, got {prior!r}")
    if prior in ("uniform", "histogram"):  # the cluster prior's options, or all the histogram's, left at their defaults
        options, only = (
            (CLUSTER_PRIOR_OPTIONS, "prior 'cluster' or 'histogram'")
            if prior == "uniform"
            else (CLUSTERING_OPTIONS, "prior 'cluster' (the histogram prior is one group of all training examples)")
        )
        changed = [name for name in options if getattr(config, name) != getattr(type(config), name)]
        if changed:
            raise ConfigError(f"{', '.join(changed)} {'applies' if len(changed) == 1 else 'apply'} only with {only}")
    if prior == "uniform":
        return None
    if epsilon is None:
        raise ConfigError(f"prior {prior!r} spends privacy budget: it needs a private method and --epsilon")
    prior_epsilon = check_epsilon(
        config.prior_epsilon if config.prior_epsilon is not None else epsilon * DEFAULT_PRIOR_SHARE, "prior_epsilon"
    )
    if prior_epsilon >= epsilon:
        raise ConfigError(f"prior_epsilon ({prior_epsilon:g}) must be smaller than epsilon ({epsilon:g})")
    if config.clusters < 1:
        raise ConfigError(f"clusters must be at least 1, got {config.clusters}")
    if is_encoder_file(config.encoder):
        if not Path(config.encoder).expanduser().is_file():
            raise MissingFileError(f"encoder file {config.encoder} does not exist")
    elif config.encoder not in ENCODERS:
        raise ConfigError(
            f"encoder must be one of {ENCODERS} or a {ENCODER_FILE_SUFFIX} file saved with "
            f"torch.export.save, got {config.encoder!r}"
        )
    if not config.prior_temperature > 0:
        raise ConfigError(f"prior_temperature must be > 0, got {config.prior_temperature}")
    return prior_epsilon


def _check_choices(config: RunConfig, table: bool, held_out: bool) -> None:
    """Refuse settings outside their choices, or that do not go together."""
    if config.secure_rng and config.insecure_noise_seed is not None:
        raise ConfigError(
            "secure_rng draws the noise from a CSPRNG and insecure_noise_seed makes it reproducible: choose one"
        )
    if config.label_range is not None and config.classes is not None:
        raise ConfigError("a table's labels are classes (classes) or numbers (label_range), not both")
    if config.classes is not None:
        if not table:
            raise ConfigError(
                f"classes are declared for a table (dataset 'csv'); dataset {config.dataset!r} defines its own"
            )
        if len(config.classes) < 2 or len(set(config.classes)) != len(config.classes):
            raise ConfigError(f"classes must be at least two distinct values, got {list(config.classes)}")
    if config.test_labels not in TEST_LABELS:
        raise ConfigError(f"test_labels must be one of {TEST_LABELS}, got {config.test_labels!r}")
    if config.test_labels == "none" and not held_out:
        raise ConfigError(
            "test_labels applies to test rows held out of the private label column (a table without "
            f"--test-table, movielens); the test set of {config.dataset!r} is public and measured "
            "exactly"
        )


def _check_units(config: RunConfig, method: Method, table: bool) -> None:
    """A privacy unit: a table's column, with its bound, under a method whose ledger composes per unit."""
    if config.privacy_unit is None:
        if config.max_rows_per_unit is not None:
            raise ConfigError("max_rows_per_unit bounds the rows of a privacy unit: give privacy_unit COLUMN too")
        return
    if not table:
        raise ConfigError(
            f"privacy_unit names a column of a table (dataset 'csv'); dataset {config.dataset!r} has no such column"
        )
    if config.max_rows_per_unit is None:
        raise ConfigError(
            "privacy_unit needs max_rows_per_unit M (--max-rows-per-unit), the most rows of one unit the run "
            "uses: each row then gets epsilon / c, c = M or the largest unit's rows if fewer. It is yours to "
            "choose (a few heavy users would otherwise set every row's share); to keep every row, give the "
            "largest unit's row count"
        )
    if isinstance(config.max_rows_per_unit, bool) or int(config.max_rows_per_unit) != config.max_rows_per_unit:
        raise ConfigError(f"max_rows_per_unit must be a whole number, got {config.max_rows_per_unit!r}")
    if config.max_rows_per_unit < 1:
        raise ConfigError(f"max_rows_per_unit must be at least 1, got {config.max_rows_per_unit}")
    if method.protects_examples:
        raise ConfigError(
            f"method {config.method!r} protects examples added or removed, not labels replaced: its guarantee "
            "does not compose per privacy unit (and the rows a unit keeps depend on the table's rows). Use a "
            "label-DP method with privacy_unit"
        )
    if config.privacy_unit in (config.label_column, config.id_column) or config.privacy_unit in (config.features or ()):
        raise ConfigError(
            f"the privacy unit column {config.privacy_unit!r} is public and never a feature: it cannot be the "
            "label column, the id column or a feature"
        )


def _label_grid_of(config: RunConfig, table: bool) -> tuple[tuple[float, float] | None, int | None]:
    """The declared label range and grid size of a numeric label (None, None for classes)."""
    if config.label_range is None:
        if config.label_grid is not None:
            raise ConfigError("label_grid needs label_range LOW HIGH")
        return None, None
    if not table:
        raise ConfigError(
            f"label_range and label_grid declare a table's numeric label (dataset 'csv'); dataset "
            f"{config.dataset!r} defines its own labels"
        )
    if len(config.label_range) != 2:
        raise ConfigError(f"label_range is two numbers LOW HIGH, got {list(config.label_range)}")
    size = DEFAULT_GRID_SIZE if config.label_grid is None else config.label_grid
    label_grid(*config.label_range, size)  # checks them
    return (float(config.label_range[0]), float(config.label_range[1])), int(size)
