"""The ads route under torchrun: two processes, each reading its own row groups, release once and record
once (the ledger of one process, the counts' true part summed exactly), train one model together, and
resume without a second draw.

One ``torchrun --nproc_per_node 2`` launch (tests/ads/ddp_worker.py) serves every test here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import roc_auc_score

from labeldp.ads import fit_hashed, predict_hashed
from labeldp.ads.route import label_stream
from labeldp.data.hashed_table import read_column
from labeldp.data.hashing import row_groups
from labeldp.models.sparse import HashedFM
from labeldp.randomness import NoiseSource
from labeldp.training.out_of_core import SparseTrainConfig, forward_loss, train_sparse
from tests.helpers import run_two_ranks

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="needs torch.distributed with gloo",
)

WORKER = Path(__file__).with_name("ddp_worker.py")
BASE = {"label_column": "converted", "classes": [0, 1], "block_rows": 1024, "batch_rows": 512}
#: the first is resumed by the worker; a generous epsilon, so that the models learn
RUNS = {
    "rr": {**BASE, "route": "rr", "epsilon": 8.0, "unit_column": "user_id", "max_rows_per_unit": 3},
    "counts": {**BASE, "route": "counts", "epsilon": 8.0, "unit_column": "user_id", "max_rows_per_unit": 3},
}


@pytest.fixture(scope="module")
def two_ranks(ads, spec, tmp_path_factory) -> dict:
    """What each rank of one two-process torchrun launch of the worker reported, and its folders."""
    assert len(row_groups(ads[0])) == 3  # uneven: rank 0 reads row groups 0 and 2, rank 1 row group 1
    base = tmp_path_factory.mktemp("ads-ddp")
    root, results = base / "runs", base / "results"
    arguments = [str(ads[0]), json.dumps(spec.to_dict()), json.dumps(RUNS), str(root), str(results)]
    ranks = run_two_ranks(WORKER, arguments, results)
    return {"root": root, "ranks": ranks}


def _alone(ads, spec, out: Path, name: str) -> dict:
    return fit_hashed(ads[0], out / name, spec=spec, noise=NoiseSource(insecure_seed=5), **RUNS[name])


def _release(folder: Path) -> dict:
    with np.load(folder / "release.npz", allow_pickle=False) as arrays:
        return dict(arrays)


@pytest.mark.parametrize("name", list(RUNS))
def test_two_processes_release_and_record_as_one(two_ranks, ads, spec, tmp_path, name) -> None:
    zero, one = (rank[name] for rank in two_ranks["ranks"])
    assert zero == one and zero["processes"] == 2  # every rank returns rank 0's summary
    alone = _alone(ads, spec, tmp_path, name)
    folder = two_ranks["root"] / name
    # the same events on the same members, the same epsilon per unit and per row
    assert json.loads((folder / "ledger.json").read_text()) == json.loads((tmp_path / name / "ledger.json").read_text())
    for key in ("members", "epsilon_per_unit", "epsilon_per_row", "privacy_units", "release"):
        assert zero[key] == alone[key], key
    shared, single = _release(folder), _release(tmp_path / name)
    np.testing.assert_array_equal(shared["members"], single["members"])  # every member released once
    if name == "counts":  # each rank counted its rows, rank 0 drew from the stream one process draws from:
        np.testing.assert_array_equal(shared["counts"], single["counts"])  # so the true part is the same sum
        np.testing.assert_array_equal(shared["sizes"], single["sizes"])
    else:  # each row's label drawn once, by its own rank, from a stream of that rank (not one process's)
        assert shared["labels"].shape == single["labels"].shape == shared["members"].shape
        assert not np.array_equal(shared["labels"], single["labels"])
    # one model trained on every rank's rows: as good as one process's
    labels = read_column(ads[1], "converted")
    auc = roc_auc_score(labels, predict_hashed(folder, ads[1]))
    assert auc > 0.65 and abs(auc - roc_auc_score(labels, predict_hashed(tmp_path / name, ads[1]))) < 0.05
    assert sum(record["rows"] for record in zero["history"]) == sum(record["rows"] for record in alone["history"])


def test_resume_under_torchrun_draws_nothing_again(two_ranks) -> None:
    zero, one = two_ranks["ranks"]
    assert zero["resume_kept_release"] is True  # release.npz and ledger.json byte for byte
    assert zero["resumed"] == one["resumed"]
    assert zero["resumed"]["release"] == zero["rr"]["release"] and zero["resumed"]["members"] == zero["rr"]["members"]


def test_only_rank_zero_touches_the_run_folders(two_ranks) -> None:
    assert [rank["cli"] for rank in two_ranks["ranks"]] == [0, 0]
    assert (two_ranks["root"] / "cli" / "summary.json").exists()
    assert two_ranks["ranks"][1]["touched"] == []


def test_no_two_ranks_draw_from_one_stream() -> None:
    assert label_stream(0, 1) == ()  # one process: the stream it always drew from
    streams = {label_stream(rank, 4) for rank in range(4)} | {label_stream(0, 2), label_stream(1, 2)}
    assert len(streams) == 6
    noise = NoiseSource(insecure_seed=5)
    draws = {noise.generator("label-release", *label_stream(r, 2)).integers(0, 2**62) for r in range(2)}
    assert len(draws) == 2 and noise.generator("label-release").integers(0, 2**62) not in draws


def test_a_step_shared_by_two_ranks_is_the_step_of_one_process(two_ranks) -> None:
    """A factorization machine trained 3 epochs of one step on a batch split between the ranks (sparse
    gradients of the linear weights and the factors, the dense bias, the l2 penalty) is the model one
    process trains on the whole batch, on both ranks."""
    zero, one = two_ranks["ranks"]
    assert zero["state"] == one["state"]  # every rank added the same parts in the same order
    rng = np.random.default_rng(0)
    buckets, targets = rng.integers(0, 64, (256, 3)), np.log(rng.uniform(0.05, 1, (256, 2))).astype(np.float32)
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = HashedFM(64, 4)
    settings = SparseTrainConfig(epochs=3, batch_rows=256, lr=0.1, l2=0.5)
    sizes = np.bincount(buckets.ravel(), minlength=64)
    history = train_sparse(model, lambda epoch: [(buckets, targets)], forward_loss, settings, sizes)
    for name, value in model.state_dict().items():
        np.testing.assert_allclose(np.array(zero["state"][name]), value.numpy(), rtol=1e-5, atol=1e-6)
    assert [record["rows"] for record in zero["steps"]] == [256] * 3
    np.testing.assert_allclose([r["loss"] for r in zero["steps"]], [r["loss"] for r in history], rtol=1e-5)


def test_under_torchrun_hashed_predict_runs_in_one_process(monkeypatch, capsys) -> None:
    from labeldp.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["hashed", "predict", "--run", "r", "--table", "t.parquet", "--out", "p.parquet"]) == 2
    assert "`labeldp hashed train`" in capsys.readouterr().err
