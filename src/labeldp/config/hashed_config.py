"""The settings of the ads route (``labeldp hashed train``, :func:`labeldp.ads.fit_hashed`), each default
stated once. No torch.

The training settings left at None take the route's own (:data:`ROUTE_TRAINING`), chosen on the non-private
models of ``benchmarks/ads_scale.py`` and kept for every epsilon: what depends on the release (the penalty
grown as randomized response thins each label's information, the intercept calibrated to the released base
rate) the route applies itself."""

from __future__ import annotations

from dataclasses import dataclass

from labeldp.config.shared_options import (
    BATCH_ROWS,
    BLOCK_ROWS,
    DATASET_NAME,
    DEFAULT_BLOCK_ROWS,
    EPOCHS,
    L2,
    LR,
    MAX_ROWS_PER_UNIT,
    MODEL,
    ONE_ROW_PER_PERSON,
    PRIVACY_UNIT,
    ROUTE_TRAINING,
    SEED,
    TEST_TABLE,
)
from labeldp.config.shared_options import HASHED_MODELS as MODELS
from labeldp.errors import ConfigError
from labeldp.options import declared, option

_COMMAND = "hashed train"

#: the routes: labeldp's own release (noisy label counts over every hashed bucket, or randomized response
#: on every label), or labels a source randomized before labeldp saw them (event-level reports with
#: their channel, or aggregate reports: noisy counts per key with their Laplace scale)
ROUTES = ("counts", "rr", "source", "reports")
#: buckets of a slot, as a power of two, where ``--slot-bits`` does not name it
DEFAULT_SLOT_BITS = 18
#: the training rows the intercept is calibrated on (the first blocks' released rows)
CALIBRATION_ROWS = 1 << 20


@dataclass(frozen=True)
class HashedConfig:
    """How a hashed model is released for and trained (everything but the table, its columns and epsilon);
    each field's meaning is its option's help (``labeldp hashed train --help``).

    ``unit_column``'s flag is ``--privacy-unit``. The ``"counts"`` and ``"reports"`` routes fit a logistic
    regression only (``model="lr"``).

    Raises
    ------
    labeldp.errors.ConfigError
        On construction, for settings that are out of range or do not fit together.
    """

    route: str = option(
        "counts",
        choices=ROUTES,
        help="counts: one release of noisy label counts over every hashed bucket (noise that does not grow "
        "with the rows), fitted by post-processing; rr: randomized response on every label, trained with the "
        "forward loss; source: labels a source randomized (--source-channel); reports: a source's noisy "
        "counts per key (--reports)",
    )
    model: str = declared(MODEL, _COMMAND)
    unit_column: str | None = declared(PRIVACY_UNIT, _COMMAND)
    max_rows_per_unit: int | None = declared(MAX_ROWS_PER_UNIT, _COMMAND)
    one_row_per_person: bool = declared(ONE_ROW_PER_PERSON, _COMMAND)
    dataset_name: str | None = declared(DATASET_NAME, _COMMAND)
    seed: int = declared(SEED, _COMMAND)
    block_rows: int = declared(BLOCK_ROWS, _COMMAND)
    epochs: int | None = declared(EPOCHS, _COMMAND)
    lr: float | None = declared(LR, _COMMAND)
    l2: float = declared(L2, _COMMAND)
    batch_rows: int = declared(BATCH_ROWS, _COMMAND)
    dim: int = option(8, help="the factorization machine's factors per bucket")
    test_table: str | None = declared(TEST_TABLE, _COMMAND)

    def __post_init__(self) -> None:
        if self.route not in ROUTES or self.model not in MODELS:
            raise ConfigError(f"route must be one of {ROUTES} and model one of {MODELS}")
        if self.route in ("counts", "reports") and self.model != "lr":
            raise ConfigError(
                f"the {self.route} route fits a logistic regression (the likelihood of counts is the logistic "
                "model's); train a factorization machine with --route rr or source"
            )
        if self.max_rows_per_unit is not None and self.unit_column is None:
            raise ConfigError(
                "--max-rows-per-unit bounds each privacy unit's rows: name the unit with --privacy-unit (unit_column)"
            )
        if self.max_rows_per_unit is not None and (
            int(self.max_rows_per_unit) != self.max_rows_per_unit or self.max_rows_per_unit < 1
        ):
            raise ConfigError(f"max_rows_per_unit must be a whole number >= 1, got {self.max_rows_per_unit}")
        if min(self.block_rows, self.batch_rows, self.dim) < 1 or (self.epochs is not None and self.epochs < 1):
            raise ConfigError("block_rows, batch_rows, dim and epochs must be at least 1")
        if self.l2 < 0 or (self.lr is not None and not self.lr > 0):
            raise ConfigError("l2 must be >= 0 and lr > 0")

    def training(self, fit: str) -> dict:
        """The training settings (``SparseTrainConfig``'s keywords) of ``fit``, a key of
        :data:`ROUTE_TRAINING`, whose values fill in those left at None."""
        defaults = ROUTE_TRAINING[fit]
        return {
            "epochs": defaults["epochs"] if self.epochs is None else self.epochs,
            "lr": defaults["lr"] if self.lr is None else self.lr,
            "l2": self.l2,
            "batch_rows": self.batch_rows,
            "seed": self.seed,
        }


__all__ = [
    "CALIBRATION_ROWS",
    "DEFAULT_BLOCK_ROWS",
    "DEFAULT_SLOT_BITS",
    "HashedConfig",
    "MODELS",
    "ROUTES",
    "ROUTE_TRAINING",
]
