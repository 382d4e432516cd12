"""The settings of the ads route (``labeldp hashed train``, :func:`labeldp.ads.fit_hashed`), each default
stated once. No torch.

The training settings left at None take the route's own (:data:`ROUTE_TRAINING`), chosen on the non-private
models of ``benchmarks/ads_scale.py`` and kept for every epsilon: what depends on the release (the penalty
grown as randomized response thins each label's information, the intercept calibrated to the released base
rate) the route applies itself."""

from __future__ import annotations

from dataclasses import dataclass

from labeldp.errors import ConfigError
from labeldp.options import option

#: the routes: labeldp's own release (noisy label counts over every hashed bucket, or randomized response
#: on every label), or labels a source randomized before labeldp saw them (event-level reports with
#: their channel, or aggregate reports: noisy counts per key with their Laplace scale)
ROUTES = ("counts", "rr", "source", "reports")
#: the models: logistic regression over the buckets, a factorization machine (rr and the noisy source
#: only: the likelihood of counts is the logistic model's)
MODELS = ("lr", "fm")
#: the training settings of each model and route where the user leaves them (None)
ROUTE_TRAINING = {
    "lr": {"epochs": 2, "lr": 0.1},
    "fm": {"epochs": 2, "lr": 0.05},
    "counts": {"epochs": 1, "lr": 0.05},
}
#: buckets of a slot, as a power of two, where ``--slot-bits`` does not name it
DEFAULT_SLOT_BITS = 18
#: rows read, hashed and trained on at a time: they bound the memory
DEFAULT_BLOCK_ROWS = 1 << 18
#: the training rows the intercept is calibrated on (the first blocks' released rows)
CALIBRATION_ROWS = 1 << 20


def _by_fit(name: str) -> str:
    return ", ".join(f"{value[name]} for {fit}" for fit, value in ROUTE_TRAINING.items())


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
    model: str = option(
        "lr", choices=MODELS, help="lr: logistic regression over the buckets; fm: a factorization machine"
    )
    unit_column: str | None = option(
        None,
        flag="--privacy-unit",
        metavar="COLUMN",
        help="the column naming each row's privacy unit (a user): the labels of one unit are protected "
        "together at epsilon; default: each row is its own unit",
    )
    max_rows_per_unit: int | None = option(
        None,
        help="keep at most this many rows of each unit, chosen by the public seed, never by a label (the "
        "others are left out of the release); each row's epsilon is then about epsilon / this",
    )
    one_row_per_person: bool = option(
        False,
        help="state that no person has two rows, so that a folder of several files can be released without "
        "--privacy-unit (a row held in two files would otherwise be released twice)",
    )
    seed: int = option(0, help="the public seed: the rows a unit keeps and the order of training")
    block_rows: int = option(DEFAULT_BLOCK_ROWS, help="rows read, hashed and trained on at a time (memory)")
    epochs: int | None = option(
        None, help="passes over the table (default: " + _by_fit("epochs") + "; counts and reports use counts')"
    )
    lr: float | None = option(None, help="Adagrad's learning rate (default: " + _by_fit("lr") + ")")
    l2: float = option(
        10.0,
        help="ridge penalty on the summed loss, spread over each bucket's rows (under rr divided by "
        "(2 p - 1)^2, p the probability a label is kept)",
    )
    batch_rows: int = option(8192, help="rows per training step")
    dim: int = option(8, help="the factorization machine's factors per bucket")
    test_table: str | None = option(
        None,
        metavar="PATH",
        help="a public Parquet table with the hashed columns and the label column, scored at the end (AUC, "
        "log-loss); default: the rr and source routes estimate them from the released labels of the rows "
        "trained on",
    )

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
