"""The settings of a run, declared once: each field's default and help are its :func:`~labeldp.options.option`,
from which ``labeldp train``'s flags are generated. :class:`~labeldp.config.run_config.RunConfig` adds what
resolves and checks them."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from labeldp.config.method_registry import method_names, methods_help, options_of
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
    TEST_LABELS,
    TEST_TABLE,
)
from labeldp.config.train_config import TrainConfig
from labeldp.data.dataset_registry import dataset_names, get_dataset
from labeldp.data.grid import DEFAULT_GRID_SIZE
from labeldp.errors import ConfigError
from labeldp.options import declared, option

DEFAULT_DELTA = 1e-5
#: the method a run takes where none is named, by its dataset's source: one stage on a table of yours (two lost
#: to one on every table measured: docs/results.md, "Which default for tables reaches 0.912"), else two
DEFAULT_METHODS = {"table": "lp-1st"}
DEFAULT_METHOD = "lp-2st"


def default_method(dataset: str) -> str:
    """The method of :data:`DEFAULT_METHODS` for ``dataset`` (an unknown name is refused when resolved)."""
    source = get_dataset(dataset).source if dataset in dataset_names() else ""
    return DEFAULT_METHODS.get(source, DEFAULT_METHOD)


@dataclass(frozen=True)
class RunSettings:
    """The settings every run shares: each field's meaning is the help of its :func:`~labeldp.options.option`
    (``labeldp train --help``). What the help, written for the flags, does not say:

    Attributes
    ----------
    options : object
        The method's own options (``Method.options``, e.g. :class:`~labeldp.config.method_options.StageOptions`
        of lp-2st): given as that object, a mapping of their names to values, or None for their defaults
        (:func:`~labeldp.config.method_registry.options_of`).
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
    method: str = option(  # None: default_method(dataset), set when the settings are made
        None,
        choices=method_names,
        help=f"{methods_help()} (default: {DEFAULT_METHODS['table']} on a table of yours, --dataset csv; "
        f"else {DEFAULT_METHOD})",
    )
    epsilon: float | None = declared(EPSILON)
    delta: float | None = option(
        None,
        help=f"delta of --method pate or dp-sgd (default {DEFAULT_DELTA:g}); the other methods are pure epsilon-DP",
    )
    stages: tuple[float, ...] | None = option(
        None,
        metavar="FRACTION",
        help="fractions of the training set per stage, summing to 1 (default: "
        "0.4 0.6 for lp-2st, 0.3 0.3 0.4 for lp-mst)",
    )
    model: str | None = declared(MODEL)
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
    seed: int = declared(SEED)
    secure_rng: bool = declared(SECURE_RNG)
    insecure_noise_seed: int | None = declared(INSECURE_NOISE_SEED)
    train: TrainConfig = option(default_factory=TrainConfig, help="training of each stage")
    options: Any = field(default=None, metadata={"help": "the method's own options (Method.options)"})

    def __post_init__(self) -> None:
        if self.method is None:
            object.__setattr__(self, "method", default_method(self.dataset))
        object.__setattr__(self, "options", options_of(self.method, self.options))
        clash = sorted(f.name for f in fields(self.options) if f.name in RESERVED) if is_dataclass(self.options) else []
        if clash:  # config.json records the options beside the shared settings
            raise ConfigError(f"method {self.method!r}: its option {', '.join(clash)} names a setting every run has")


#: the sections in which a config.json written before the methods had options of their own kept DP-SGD's,
#: PATE's, marginals' and user methods' options (:meth:`~labeldp.config.run_config.RunConfig.from_dict` reads
#: them as the method's)
OLD_SECTIONS = ("dpsgd", "pate", "marginals", "method_options")
#: the names a method's option may not take: the shared settings' and the old sections'
RESERVED = frozenset(f.name for f in fields(RunSettings)) | frozenset(OLD_SECTIONS)
