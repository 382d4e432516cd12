"""The checks :meth:`~labeldp.config.run_config.RunConfig.resolved` runs on a run's settings (its stages, its prior,
its choices, its privacy unit, a numeric label's grid), and the choices they check against. Public settings
only: nothing here reads a label.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from labeldp._validation import check_epsilon
from labeldp.data.dataset_registry import get_dataset
from labeldp.data.grid import DEFAULT_GRID_SIZE, label_grid
from labeldp.errors import ConfigError, MissingFileError
from labeldp.priors.encoders import ENCODER_FILE_SUFFIX, ENCODERS, is_encoder_file

if TYPE_CHECKING:
    from labeldp.config.run_config import RunConfig
    from labeldp.methods.registry import Method

#: the share of epsilon a noisy histogram prior buys when none is given (the labels get the rest)
DEFAULT_PRIOR_SHARE = 0.1
LOSSES = ("forward", "ce", "mse")
#: what the first stage of lp-2st and lp-mst releases (``first_release``): RR's labels, VLP's vectors, or
#: "auto": the vectors where one tells more of a label and the run can train on them (docs/methods.md)
FIRST_RELEASES = ("auto", "rr", "vlp")
PRIORS = ("uniform", "histogram", "cluster")
#: where the test metrics of held-out rows of the private label column come from (``test_labels``)
TEST_LABELS = ("released", "public", "none")
#: Options of the noisy-histogram priors (cluster, histogram), refused with prior 'uniform' unless at their defaults.
CLUSTER_PRIOR_OPTIONS = ("prior_epsilon", "prior_temperature", "encoder", "clusters", "combine_priors")
#: Options of the cluster prior only: the histogram prior is one group of all examples.
CLUSTERING_OPTIONS = ("encoder", "clusters")


def stage_fractions(config: RunConfig, method: Method) -> tuple[float, ...]:
    """The stages' fractions of the budget (the method's own where none are given), checked."""
    stages = tuple(float(s) for s in (config.stages or method.default_stages))
    if any(not s > 0 for s in stages) or abs(sum(stages) - 1.0) > 1e-6:
        raise ConfigError(f"stages must be positive fractions summing to 1, got {list(stages)}")
    if method.stages is not None and len(stages) != method.stages:
        raise ConfigError(f"method {config.method!r} has {method.stages} stage(s), got {len(stages)} fractions")
    if method.stages is None and len(stages) < 2:
        raise ConfigError(f"method {config.method!r} needs at least two stages")
    return stages


def check_prior(config: RunConfig, prior: str, epsilon: float | None) -> float | None:
    """The histogram's share of the budget (None without a cluster or histogram prior)."""
    if prior not in PRIORS:
        raise ConfigError(f"prior must be one of {PRIORS}, got {prior!r}")
    if prior == "uniform":
        changed = [name for name in CLUSTER_PRIOR_OPTIONS if getattr(config, name) != getattr(type(config), name)]
        if changed:
            raise ConfigError(
                f"{', '.join(changed)} {'applies' if len(changed) == 1 else 'apply'} only with "
                "prior 'cluster' or 'histogram'"
            )
        return None
    if prior == "histogram":
        changed = [name for name in CLUSTERING_OPTIONS if getattr(config, name) != getattr(type(config), name)]
        if changed:
            raise ConfigError(
                f"{', '.join(changed)} {'applies' if len(changed) == 1 else 'apply'} only with "
                "prior 'cluster' (the histogram prior is one group of all training examples)"
            )
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


def check_choices(config: RunConfig) -> None:
    """Refuse settings outside their choices, or that do not go together."""
    if config.secure_rng and config.insecure_noise_seed is not None:
        raise ConfigError(
            "secure_rng draws the noise from a CSPRNG and insecure_noise_seed makes it reproducible: choose one"
        )
    if config.label_range is not None and config.classes is not None:
        raise ConfigError("a table's labels are classes (classes) or numbers (label_range), not both")
    if config.classes is not None:
        if get_dataset(config.dataset).source != "table":
            raise ConfigError(
                f"classes are declared for a table (dataset 'csv'); dataset {config.dataset!r} defines its own"
            )
        if len(config.classes) < 2 or len(set(config.classes)) != len(config.classes):
            raise ConfigError(f"classes must be at least two distinct values, got {list(config.classes)}")
    if config.test_labels not in TEST_LABELS:
        raise ConfigError(f"test_labels must be one of {TEST_LABELS}, got {config.test_labels!r}")
    if config.test_labels == "none" and not config.test_held_out:
        raise ConfigError(
            "test_labels applies to test rows held out of the private label column (a table without "
            f"--test-table, movielens); the test set of {config.dataset!r} is public and measured "
            "exactly"
        )
    if config.first_release not in FIRST_RELEASES:
        raise ConfigError(f"first_release must be one of {FIRST_RELEASES}, got {config.first_release!r}")
    if config.loss not in LOSSES:
        raise ConfigError(f"loss must be one of {LOSSES}, got {config.loss!r}")
    if not config.temperature > 0 or not math.isfinite(config.temperature):
        raise ConfigError(f"temperature must be a finite number > 0, got {config.temperature}")


def check_units(config: RunConfig, method: Method) -> None:
    """A privacy unit: a table's column, with its bound, under a method whose ledger composes per unit."""
    if config.privacy_unit is None:
        if config.max_rows_per_unit is not None:
            raise ConfigError("max_rows_per_unit bounds the rows of a privacy unit: give privacy_unit COLUMN too")
        return
    if get_dataset(config.dataset).source != "table":
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


def label_grid_of(config: RunConfig) -> tuple[tuple[float, float] | None, int | None]:
    """The declared label range and grid size of a numeric label (None, None for classes)."""
    if config.label_range is None:
        if config.label_grid is not None:
            raise ConfigError("label_grid needs label_range LOW HIGH")
        return None, None
    if get_dataset(config.dataset).source != "table":
        raise ConfigError(
            f"label_range and label_grid declare a table's numeric label (dataset 'csv'); dataset "
            f"{config.dataset!r} defines its own labels"
        )
    if len(config.label_range) != 2:
        raise ConfigError(f"label_range is two numbers LOW HIGH, got {list(config.label_range)}")
    size = DEFAULT_GRID_SIZE if config.label_grid is None else config.label_grid
    label_grid(*config.label_range, size)  # checks them
    return (float(config.label_range[0]), float(config.label_range[1])), int(size)
