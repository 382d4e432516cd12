"""Models from a source's aggregate reports (labeldp.ads.reports): the report table hashed into the run's
buckets, its stated guarantee recorded as the source's event, and a fit that learns the signal at a
generous epsilon. The test plays the source: it counts the synthetic table's conversions per key and
adds Laplace noise of the scale it states."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import roc_auc_score

from labeldp.ads import fit_from_reports, predict_hashed
from labeldp.ads.reports import read_reports
from labeldp.data.hashed_table import read_column
from labeldp.data.hashing import hash_frame
from labeldp.errors import ConfigError, DataError


def _reports(train, spec, scale: float, contribution: float, seed: int = 0) -> pd.DataFrame:
    """One row per key of every slot: its noisy conversions, its impressions, the stated scale and bound."""
    frame = pd.read_parquet(train)
    rng = np.random.default_rng(seed)
    parts = []
    for slot in spec.slots:
        keys = frame.groupby(list(slot.columns)).agg(noisy_positives=("converted", "sum"), rows=("converted", "size"))
        keys = keys.reset_index()
        keys["noisy_positives"] = keys["noisy_positives"] + rng.laplace(0, scale, len(keys))
        parts.append(keys.assign(slot=":".join(slot.columns)))
    return pd.concat(parts, ignore_index=True).assign(scale=scale, contribution=contribution)


def test_reports_are_hashed_into_the_runs_buckets(ads, spec) -> None:
    reports = _reports(ads[0], spec, 1.0, 4.0)  # pandas made the key columns float (empty where unused)
    schema = pq.read_schema(ads[0])
    found = read_reports(reports, spec, {name: schema.field(name).type for name in spec.columns})
    sizes = np.bincount(hash_frame(pd.read_parquet(ads[0]), spec).ravel(), minlength=spec.num_buckets)
    assert np.array_equal(found["sizes"], sizes)  # every key's rows in its bucket, collisions summed
    assert found["epsilon"] == 4.0 and np.all(found["variance"][sizes > 0] >= 2.0)
    with pytest.raises(DataError, match="slots the run does not hash"):
        read_reports(reports.assign(slot="hour"), spec)
    with pytest.raises(DataError, match="lacks the columns"):
        read_reports(reports.drop(columns="scale"), spec)
    with pytest.raises(DataError, match="> 0"):
        read_reports(reports.assign(scale=0.0), spec)


def test_a_fit_from_reports_learns_at_a_generous_epsilon_and_records_the_statement(ads, spec, tmp_path) -> None:
    """A user's conversions change at most 5 keys' counts (one per slot) by at most 2 each: C = 10 in L1;
    scale 1.25 states epsilon 8 for the whole table."""
    path = tmp_path / "reports.parquet"
    _reports(ads[0], spec, 1.25, 10.0).to_parquet(path)
    summary = fit_from_reports(ads[0], tmp_path / "run", reports=path, spec=spec, block_rows=2048)
    assert summary["route"] == "reports" and summary["epsilon_per_unit"] == pytest.approx(8.0, abs=1e-2)
    assert "as the source states (recorded, not drawn by labeldp)" in summary["release"]
    ledger = json.loads((tmp_path / "run" / "ledger.json").read_text())
    assert [entry["tag"] for entry in ledger["entries"]] == ["reports"]
    labels = read_column(ads[1], "converted")
    probabilities = predict_hashed(tmp_path / "run", ads[1])
    assert roc_auc_score(labels, probabilities) > 0.65
    assert abs(probabilities.mean() - labels.mean()) < 0.03
    with pytest.raises(ConfigError, match="bounded per unit by their source"):
        fit_from_reports(ads[0], tmp_path / "unit", reports=path, spec=spec, unit_column="user_id")
