"""Ads-like synthetic tables: impressions with high-cardinality categoricals and rare conversions.

A ground-truth logistic model over Zipf-distributed categoricals, generated block by block into Parquet
row groups (memory is one block's), deterministic from a seed. Each row is one impression:

``row_id`` (int64)
    the row's position in its table (a public id).
``user_id`` (int64)
    the user who saw it: users come one after another with a geometric number of rows each (mean
    ``rows_per_user``), each keeping one ``device``; the ``"test"`` part's users are others.
``advertiser``, ``campaign``, ``site``, ``device``, ``hour`` (int32)
    categorical codes: ``campaign`` Zipf over ``campaigns``, each belonging to one advertiser (Zipf over
    ``advertisers``), ``site`` and ``device`` (per user) Zipf, ``hour`` uniform over 24; codes permuted
    so that popular values are not the small numbers.
``converted`` (int8)
    the label, 1 with probability sigmoid(logit) where

        logit = intercept + a[advertiser] + c[campaign] + s[site] + d[device] + h[hour]
                + x(advertiser, site) + x'(campaign, device) + u(user)

    each term Gaussian with :class:`AdsSpec`'s scales (the crosses' and the user's from a 64-bit hash of
    the pair or user, so no table of pairs is kept), the intercept solved for a mean rate of ``base_rate``.

A block's rows are shuffled, and the parts draw from disjoint streams of the seed:
``write_ads_table(path, n, spec, part="test")`` is a test table of the same model. The labels are the
generator's, for labeldp to treat as private (read them through :mod:`labeldp.boundary` only).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from scipy.optimize import brentq
from scipy.special import expit, ndtri

from labeldp.data.hashing import mix64
from labeldp.errors import ConfigError

#: the categorical columns of the table, in order
CATEGORICAL_COLUMNS = ("advertiser", "campaign", "site", "device", "hour")
#: the label column
LABEL_COLUMN = "converted"
#: the parts of one model, each from its own stream of the seed (and its own users)
PARTS = {"train": 0, "test": 1, "calibration": 2}
_USERS_PER_PART = 1 << 40  # user ids of part p start at p * this


@dataclass(frozen=True)
class AdsSpec:
    """The ground-truth model of an ads-like table (see :mod:`labeldp.data.synthetic_ads`).

    Parameters
    ----------
    seed : int
        Draws the model's terms and, with the part, the rows.
    base_rate : float
        The mean conversion rate, in (0, 0.5].
    advertisers, campaigns, sites, devices : int
        The cardinalities.
    zipf_exponent : float
        s of the Zipf laws Pr[k-th value] proportional to k^-s.
    rows_per_user : float
        The mean rows per user (geometric, at least 1).
    scales : tuple of float
        Standard deviations of the terms advertiser, campaign, site, device, the hour's amplitude,
        advertiser x site, campaign x device, user.
    """

    seed: int = 0
    base_rate: float = 0.02
    advertisers: int = 1_000
    campaigns: int = 10_000
    sites: int = 100_000
    devices: int = 10
    zipf_exponent: float = 1.1
    rows_per_user: float = 5.0
    scales: tuple[float, ...] = (0.5, 0.5, 0.7, 0.3, 0.3, 0.6, 0.4, 0.5)

    def __post_init__(self) -> None:
        if not 0 < self.base_rate <= 0.5:
            raise ConfigError(f"base_rate must lie in (0, 0.5], got {self.base_rate}")
        if min(self.advertisers, self.campaigns, self.sites, self.devices) < 1 or self.rows_per_user < 1:
            raise ConfigError("cardinalities must be at least 1 and rows_per_user at least 1")
        if len(self.scales) != 8:
            raise ConfigError(f"scales must hold 8 standard deviations, got {len(self.scales)}")


class _Model:
    """The terms of the logistic model, drawn once from ``spec.seed``."""

    def __init__(self, spec: AdsSpec):
        rng = np.random.default_rng([spec.seed, 1000])
        scale = spec.scales
        self.spec = spec
        self.zipf = {
            name: (np.cumsum(_zipf(size, spec.zipf_exponent)), rng.permutation(size).astype(np.int32))
            for name, size in (
                ("advertiser", spec.advertisers),
                ("campaign", spec.campaigns),
                ("site", spec.sites),
                ("device", spec.devices),
            )
        }
        self.advertiser_of = self.draw(rng, "advertiser", spec.campaigns)  # each campaign's advertiser
        self.terms = {
            "advertiser": rng.normal(0, scale[0], spec.advertisers),
            "campaign": rng.normal(0, scale[1], spec.campaigns),
            "site": rng.normal(0, scale[2], spec.sites),
            "device": rng.normal(0, scale[3], spec.devices),
            "hour": scale[4] * np.sin(2 * np.pi * (np.arange(24) - 15) / 24),
        }
        self.salts = rng.integers(0, 2**63, 3, dtype=np.int64).astype(np.uint64)

    def draw(self, rng: np.random.Generator, name: str, count: int) -> np.ndarray:
        """``count`` int32 codes of ``name`` drawn Zipf over its values (codes permuted)."""
        cdf, codes = self.zipf[name]
        return codes[np.minimum(np.searchsorted(cdf, rng.random(count) * cdf[-1]), cdf.size - 1)]

    def logits_without_intercept(self, columns: dict[str, np.ndarray]) -> np.ndarray:
        """Each row's ground-truth logit less the intercept, from its categorical codes and ``user_id``."""
        scale = self.spec.scales
        logit = sum(self.terms[name][columns[name]] for name in CATEGORICAL_COLUMNS)
        logit = logit + scale[5] * _hashed_normal(self.salts[0], columns["advertiser"], columns["site"])
        logit = logit + scale[6] * _hashed_normal(self.salts[1], columns["campaign"], columns["device"])
        return logit + scale[7] * _hashed_normal(self.salts[2], columns["user_id"], 0)


def _zipf(size: int, exponent: float) -> np.ndarray:
    weights = np.arange(1, size + 1, dtype=np.float64) ** -exponent
    return weights / weights.sum()


def _hashed_normal(salt: np.uint64, first: np.ndarray, second) -> np.ndarray:
    """A standard normal value per (first, second) pair, a function of the pair and the salt only."""
    key = mix64(np.asarray(first, dtype=np.int64).view(np.uint64) ^ salt)
    key = mix64(key ^ np.asarray(second, dtype=np.int64).view(np.uint64))
    uniform = ((key >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53
    return ndtri(uniform)


@functools.lru_cache(maxsize=8)
def _model(spec: AdsSpec) -> tuple[_Model, float]:
    """The model's terms and the intercept giving a mean rate of ``base_rate``, solved on the calibration part."""
    model = _Model(spec)
    columns = _columns(model, 200_000, np.random.default_rng([spec.seed, PARTS["calibration"]]), 0)
    logit = model.logits_without_intercept(columns)
    intercept = brentq(lambda b: expit(logit + b).mean() - spec.base_rate, -30.0, 30.0, xtol=1e-10)
    return model, float(intercept)


def _columns(model: _Model, rows: int, rng: np.random.Generator, first_user: int) -> dict[str, np.ndarray]:
    """The shuffled features of ``rows`` rows of whole users (the last cut), users numbered from ``first_user``."""
    spec = model.spec
    per_user = rng.geometric(1.0 / spec.rows_per_user, size=int(rows / spec.rows_per_user * 1.5) + 16)
    ends = np.cumsum(per_user)
    users = int(np.searchsorted(ends, rows)) + 1
    user = np.repeat(np.arange(users), per_user[:users])[:rows]
    order = rng.permutation(rows)
    user = user[order]
    campaign = model.draw(rng, "campaign", rows)
    return {
        "user_id": user.astype(np.int64) + first_user,
        "advertiser": model.advertiser_of[campaign],
        "campaign": campaign,
        "site": model.draw(rng, "site", rows),
        "device": model.draw(rng, "device", users)[user],
        "hour": rng.integers(0, 24, rows).astype(np.int32),
    }


def ads_schema() -> pa.Schema:
    """The table's columns and types: ``row_id``, ``user_id``, the categorical columns and ``converted``."""
    fields = [pa.field("row_id", pa.int64()), pa.field("user_id", pa.int64())]
    fields += [pa.field(name, pa.int32()) for name in CATEGORICAL_COLUMNS]
    return pa.schema([*fields, pa.field(LABEL_COLUMN, pa.int8())])


def true_logits(columns, spec: AdsSpec = AdsSpec()) -> np.ndarray:
    """Each row's ground-truth (Bayes-optimal) logit, from ``user_id`` and its categorical columns."""
    model, intercept = _model(spec)
    arrays = {name: np.asarray(columns[name]) for name in ("user_id", *CATEGORICAL_COLUMNS)}
    return model.logits_without_intercept(arrays) + intercept


def ads_batches(rows: int, spec: AdsSpec = AdsSpec(), part: str = "train", batch_rows: int = 1 << 18):
    """The table's rows as :func:`ads_schema` record batches of ``batch_rows`` rows (the last shorter),
    generated one at a time; the rows depend on ``batch_rows`` (users are cut at its boundaries).

    ``part`` is ``"train"`` or ``"test"`` (other rows and users, the same model).
    """
    if part not in PARTS or part == "calibration":
        raise ConfigError(f"part must be 'train' or 'test', got {part!r}")
    if rows < 1 or batch_rows < 1:
        raise ConfigError(f"rows and batch_rows must be at least 1, got {rows} and {batch_rows}")
    model, intercept = _model(spec)
    first_user = PARTS[part] * _USERS_PER_PART
    for index, start in enumerate(range(0, rows, batch_rows)):
        count = min(batch_rows, rows - start)
        rng = np.random.default_rng([spec.seed, PARTS[part], index])
        columns = _columns(model, count, rng, first_user)
        first_user = int(columns["user_id"].max()) + 1
        probability = expit(model.logits_without_intercept(columns) + intercept)
        label = (rng.random(count) < probability).astype(np.int8)
        arrays = [pa.array(np.arange(start, start + count, dtype=np.int64))]
        arrays += [pa.array(columns[name]) for name in ("user_id", *CATEGORICAL_COLUMNS)]
        yield pa.RecordBatch.from_arrays([*arrays, pa.array(label)], schema=ads_schema())


def write_ads_table(
    path, rows: int, spec: AdsSpec = AdsSpec(), part: str = "train", row_group_rows: int = 1 << 18
) -> Path:
    """Write ``rows`` rows of the model to the Parquet file ``path`` (its folder created), one row group per
    generated block, in the memory of one block; the same arguments write the same file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with pq.ParquetWriter(path, ads_schema()) as writer:
        for batch in ads_batches(rows, spec, part, row_group_rows):
            writer.write_batch(batch, row_group_size=row_group_rows)
    return path


__all__ = [
    "AdsSpec",
    "CATEGORICAL_COLUMNS",
    "LABEL_COLUMN",
    "ads_batches",
    "ads_schema",
    "true_logits",
    "write_ads_table",
]
