"""The configuration of a run: everything needed to repeat it, written to its ``config.json``.

Each field's default and help are stated once, in its :func:`~labeldp.options.option`; ``labeldp train``'s
flags are generated from them. :meth:`RunConfig.resolved` checks every field and fills in what depends on the
method, before anything is written or released."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from labeldp._validation import check_epsilon
from labeldp.accounting.datasets import check_name
from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.marginals_config import MarginalsConfig
from labeldp.config.pate_config import PATEConfig
from labeldp.config.run_checks import (
    FIRST_RELEASES,
    LOSSES,
    TEST_LABELS,
    check_choices,
    check_prior,
    check_units,
    label_grid_of,
    stage_fractions,
)
from labeldp.config.shared_options import (
    CLASSES,
    DATA_DIR,
    DATASET_NAME,
    EPSILON,
    ID_COLUMN,
    INSECURE_NOISE_SEED,
    LABEL_COLUMN,
    MAX_ROWS_PER_UNIT,
    MODEL,
    ONE_ROW_PER_PERSON,
    PRIOR,
    PRIVACY_UNIT,
    SECURE_RNG,
    SEED,
    TABLE,
    TEST_TABLE,
)
from labeldp.config.train_config import TrainConfig
from labeldp.data.dataset_registry import dataset_names, get_dataset
from labeldp.data.grid import DEFAULT_GRID_SIZE, label_grid
from labeldp.errors import ConfigError
from labeldp.methods.registry import Method, get_method, method_names, methods_using
from labeldp.models.names import MODELS, default_model_name
from labeldp.options import declaration_of, declared, option
from labeldp.priors.encoders import is_encoder_file
from labeldp.randomness import NoiseSource

DEFAULT_DELTA = 1e-5
#: the largest delta accepted: above it a mechanism may publish a label outright with a probability no guarantee allows
MAX_DELTA = 1e-2
#: the nested settings of a configuration, by field name
_SECTIONS = {"train": TrainConfig, "dpsgd": DPSGDConfig, "pate": PATEConfig, "marginals": MarginalsConfig}


@dataclass(frozen=True)
class RunConfig:
    """Everything needed to repeat a run; written to ``config.json``.

    Each field's meaning is the help of its :func:`~labeldp.options.option` (``labeldp train --help``); the
    method-specific ones are listed in :data:`METHOD_OPTIONS`. What the help, written for the flags, does not
    say:

    Attributes
    ----------
    reuse_labels, warm_start : bool
        True by default; their flags are ``--no-reuse-labels`` and ``--no-warm-start``, which the help
        describes.
    test_labels : str
        On a dataset whose test set is public, ``"public"`` is accepted back from a ``config.json`` and
        resolves to the default (nothing is held out or released).
    epsilon, delta : float or None
        Refused by the methods that do not take them (``epsilon`` by a non-private method, ``delta`` by a
        pure epsilon-DP one).
    """

    dataset: str = option(
        "digits",
        choices=dataset_names,
        help="digits is embedded; the MNIST family and CIFAR read --data-dir; csv reads --table",
    )
    data_dir: str | None = declared(DATA_DIR)
    table: str | None = declared(TABLE)
    label_column: str = declared(LABEL_COLUMN)
    test_table: str | None = declared(TEST_TABLE)
    features: tuple[str, ...] | None = option(
        None,
        metavar="COLUMN",
        help="dataset csv: the feature columns (default: every column but the label, --drop and --id-column)",
    )
    drop: tuple[str, ...] | None = option(
        None, metavar="COLUMN", help="dataset csv: columns that are not features (another outcome, a leak of the label)"
    )
    id_column: str | None = declared(ID_COLUMN)
    one_row_per_person: bool = declared(ONE_ROW_PER_PERSON)
    privacy_unit: str | None = declared(PRIVACY_UNIT)
    dataset_name: str | None = declared(DATASET_NAME)
    max_rows_per_unit: int | None = declared(MAX_ROWS_PER_UNIT)
    classes: tuple[str, ...] | None = declared(CLASSES)
    label_range: tuple[float, ...] | None = option(
        None,
        metavar="BOUND",
        help="dataset csv with a numeric label: LOW HIGH, the public "
        "range it is clipped to (declared, never read off the "
        "labels); makes the task a regression",
    )
    label_grid: int | None = option(
        None, help=f"grid points over --label-range that the labels are snapped to (default {DEFAULT_GRID_SIZE})"
    )
    test_labels: str = option(
        "released",
        choices=TEST_LABELS,
        help="test rows held out of the private label column (a table without --test-table, "
        "MovieLens's split): released (their labels are released once at --epsilon, as "
        "the training labels are, and the test metrics are estimated from that release, "
        "with standard errors), public (exact metrics on their true labels, which the "
        "epsilon does NOT cover: for comparisons with published figures; the summary "
        "says so) or none (no test metrics). A public test set (--test-table, MNIST's) "
        "is measured exactly (config.json then says public)",
    )
    method: str = option(
        "lp-2st",
        choices=method_names,
        help="non-private: true labels (reference); rr / lp-1st: randomized response on all labels; "
        "lp-2st: two stages, the second uses RR-with-prior; lp-mst: any number of stages; "
        "lp-2st-counts: two stages, the second releases noisy label counts per cell of rows the first model "
        "scores alike (tables); "
        "alibi: Laplace noise on the one-hot label; vlp: each label a random binary vector (vector label "
        "privacy); marginals: a logistic regression on public feature bins "
        "fitted from noisy label counts (rare positives); pate: teachers on disjoint parts of the data vote, "
        "noisily, on a student's queries; dp-sgd: the full-DP baseline (inputs and labels "
        "private); for numeric labels also rr-on-bins (RR over the optimal bins of a noisy "
        "histogram prior), rr-on-bins-mst (later stages' prior from the model) and "
        "laplace-regression (Laplace noise on the clipped value)",
    )
    epsilon: float | None = declared(EPSILON)
    delta: float | None = option(
        None,
        help=f"delta of --method pate or dp-sgd (default {DEFAULT_DELTA:g}); the other methods are pure epsilon-DP",
        method_specific=True,
    )
    stages: tuple[float, ...] | None = option(
        None,
        metavar="FRACTION",
        help="fractions of the training set per stage, summing to 1 (default: "
        "0.4 0.6 for lp-2st, 0.3 0.3 0.4 for lp-mst)",
    )
    model: str | None = declared(MODEL)
    temperature: float = option(
        1.0, help="lp-2st, lp-mst: later stages' prior = softmax(logits / T)", method_specific=True
    )
    prior: str | None = declared(PRIOR)
    prior_epsilon: float | None = option(
        None,
        help="part of --epsilon spent on the histogram of --prior cluster or "
        "histogram (default: a tenth); the label releases use the rest, "
        "so every label's total is --epsilon",
    )
    prior_temperature: float = option(
        1.0, help="cluster prior ^ (1 / T), renormalised: above 1 flatter, so RR-with-prior keeps more candidate labels"
    )
    clusters: int = option(100, help="k-means clusters for --prior cluster")
    encoder: str = option(
        "pca",
        metavar="{pca,spectral,autoencoder,raw,FILE.pt2}",
        help="public features clustered for --prior cluster: PCA-whitened inputs, a neighbour-graph "
        "(spectral) embedding of them (purer clusters; its exact nearest-neighbour graph "
        "costs time quadratic in the examples), the codes of an autoencoder trained on the public inputs, the raw "
        "inputs, or your own encoder saved "
        "with torch.export.save (fitted without the private labels)",
    )
    combine_priors: bool = option(
        False,
        help="lp-2st, lp-mst with --prior cluster: later stages' prior is the model prior times the cluster prior",
        method_specific=True,
    )
    loss: str = option(
        "forward",
        choices=LOSSES,
        help="forward: likelihood of each noisy label through its known noise channel (the model "
        "learns clean posteriors); ce: plain cross-entropy on noisy labels; mse (numeric labels): "
        "squared error of the predicted mean against the released values; not for alibi, vlp, "
        "pate or dp-sgd",
        method_specific=True,
    )
    reuse_labels: bool = option(
        True,
        help="lp-2st, lp-mst: train each stage on its own noisy labels only (default: "
        "earlier stages' labels too; with --loss ce only those inside the new "
        "prior's top k)",
        method_specific=True,
    )
    warm_start: bool = option(True, help="lp-2st, lp-mst: train each stage's model from scratch", method_specific=True)
    first_release: str = option(
        "auto",
        choices=FIRST_RELEASES,
        help="lp-2st, lp-mst: stage 1's release: randomized response, VLP's vectors (the forward loss, no "
        "prior, no consensus), or auto: the vectors where one tells more of a label than RR's (with 10 "
        "classes below epsilon 2, with 2 to 4 never) and the run trains on them",
        method_specific=True,
    )
    consensus: bool = option(
        False,
        help="lp-1st, lp-2st, lp-mst: after the last stage, train a new model on the released examples whose "
        "released label the last model predicts (consensus retraining; post-processing, no epsilon)",
        method_specific=True,
    )
    cell_rows: int = option(
        10,
        help="lp-2st-counts: the fewest second-stage rows in a cell whose label counts are released",
        method_specific=True,
    )
    seed: int = declared(SEED)
    secure_rng: bool = declared(SECURE_RNG)
    insecure_noise_seed: int | None = declared(INSECURE_NOISE_SEED)
    train: TrainConfig = option(default_factory=TrainConfig, help="training of each stage")
    dpsgd: DPSGDConfig = option(default_factory=DPSGDConfig, help="DP-SGD's settings", method_specific=True)
    pate: PATEConfig = option(default_factory=PATEConfig, help="PATE's settings", method_specific=True)
    marginals: MarginalsConfig = option(default_factory=MarginalsConfig, help="its settings", method_specific=True)
    method_options: dict[str, Any] = option(
        default_factory=dict, help="the values of the options the method declares of its own (Method.options)"
    )

    @property
    def method_spec(self) -> Method:
        """The registered :class:`~labeldp.methods.registry.Method` named by ``method``."""
        return get_method(self.method)

    def model_name(self, input_shape: tuple[int, ...], categorical: tuple[int, ...] = ()) -> str:
        """The network a run trains on inputs of ``input_shape``: ``model``, else the rule's choice for the
        shape and method (:func:`~labeldp.models.names.default_model_name`; BatchNorm-free for DP-SGD)."""
        return self.model or default_model_name(input_shape, categorical, per_example=self.method_spec.per_example)

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
        get_dataset(self.dataset)  # refuses an unknown name
        if self.dataset_name is not None:
            check_name(self.dataset_name)
        method = self.method_spec
        if self.model is not None and self.model not in MODELS:
            raise ConfigError(f"unknown model {self.model!r}; choose one of {', '.join(MODELS)}")
        epsilon, delta = self._budget(method)
        stages = stage_fractions(self, method)
        prior = self.prior if self.prior is not None else method.default_prior
        prior_epsilon = check_prior(self, prior, epsilon)
        self._check_method_options(method)
        check_choices(self)
        check_units(self, method)
        label_range, grid_size = label_grid_of(self)
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
            test_labels=self.test_labels if self.test_held_out else "released",
            classes=tuple(map(str, self.classes)) if self.classes is not None else None,
            method_options=self._own_options(method),
            **self._absolute_paths(),
        )
        if method.check is not None:
            method.check(resolved)
        return resolved

    def _own_options(self, method: Method) -> dict[str, Any]:
        """``method_options`` checked against the options the method declares, their defaults filled in."""
        unknown = sorted(set(self.method_options) - set(method.options))
        if unknown:
            own = f"; its own are {', '.join(method.options)}" if method.options else ""
            raise ConfigError(f"method {self.method!r} has no option {', '.join(unknown)}{own}")
        values = {name: self.method_options.get(name, spec.default) for name, spec in method.options.items()}
        for name, spec in method.options.items():
            choices = spec.choices() if callable(spec.choices) else spec.choices
            if choices is not None and values[name] not in choices:
                raise ConfigError(f"{name} must be one of {', '.join(map(str, choices))}, got {values[name]!r}")
        return values

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

    def _check_method_options(self, method: Method) -> None:
        """Refuse options the method does not use that were changed from their defaults: a user who
        sets one expects it to act."""
        unknown = sorted(set(method.uses) - set(METHOD_OPTIONS))
        if unknown:
            raise ConfigError(
                f"method {self.method!r} uses unknown options {unknown}; the method-specific options "
                f"are {METHOD_OPTIONS}"
            )
        defaults, unused = RunConfig(), []
        for name in options_unused_by(self.method):
            value, default = getattr(self, name), getattr(defaults, name)
            if value == default or (name == "prior" and value == method.default_prior):  # a resolved configuration
                continue
            if dataclasses.is_dataclass(value):  # a method's own settings: name those that were changed
                unused += [
                    f"{name}.{f.name}"
                    for f in dataclasses.fields(value)
                    if getattr(value, f.name) != getattr(default, f.name)
                ]
            else:
                unused.append(name)
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
        dataset = get_dataset(self.dataset)
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
        """The configuration as JSON-ready data (``config.json``): nested settings as dicts, tuples as lists."""
        data = asdict(self)
        for name in ("stages", "classes", "features", "drop", "label_range"):
            data[name] = list(data[name]) if data[name] is not None else None
        own = data.pop("method_options")
        if own:  # a method with no options of its own is recorded as earlier versions recorded it
            data["method_options"] = {name: list(v) if isinstance(v, tuple) else v for name, v in own.items()}
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunConfig:
        """A configuration, unresolved, from :meth:`to_dict`'s data; options left out take their defaults.

        Raises
        ------
        labeldp.errors.ConfigError
            For options this version of labeldp does not know.
        """
        data = dict(data)
        unknown = sorted(set(data) - {field.name for field in dataclasses.fields(cls)})
        for section, settings in _SECTIONS.items():
            known = {field.name for field in dataclasses.fields(settings)}
            unknown += sorted(f"{section}.{name}" for name in set(data.get(section) or {}) - known)
        if unknown:
            raise ConfigError(
                f"the configuration has options this version of labeldp does not know: {', '.join(unknown)} "
                "(written by another version?)"
            )
        for section, settings in _SECTIONS.items():
            data[section] = settings(**data.get(section, {}))
        for name in ("stages", "classes", "features", "drop", "label_range"):
            if data.get(name) is not None:
                data[name] = tuple(data[name])
        # before "auto", stage 1 was RR, and every method's config.json said so
        if data.get("first_release", "rr") == "rr":
            uses = data.get("method", cls.method) in methods_using("first_release")
            data["first_release"] = "rr" if uses else cls.first_release
        return cls(**data)


def options_unused_by(method: str) -> tuple[str, ...]:
    """The method-specific fields (:data:`METHOD_OPTIONS`) that ``method`` does not use, in their order."""
    return tuple(name for name in METHOD_OPTIONS if method not in methods_using(name))


#: The RunConfig options that only some methods use (declared ``method_specific`` with the options):
#: with a method that does not use one, a value other than the default is refused, and a sweep's grid
#: resets it.
METHOD_OPTIONS = tuple(
    f.name
    for f in dataclasses.fields(RunConfig)
    if (option_of := declaration_of(f)) is not None and option_of.method_specific
)
