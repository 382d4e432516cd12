"""Runs under torchrun: two processes on digits give the ledger and (within noise) the accuracy of one;
only rank 0 touches the run folder; DP-SGD's noise enters the privatised gradient once.

One ``torchrun --nproc_per_node 2`` launch (tests/distributed_worker.py) serves every test here."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.pate_config import PATEConfig
from labeldp.dpsgd.trainer import private_gradient
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig
from tests.helpers import run_two_ranks

pytestmark = pytest.mark.skipif(
    not (torch.distributed.is_available() and torch.distributed.is_gloo_available()),
    reason="needs torch.distributed with gloo",
)

WORKER = Path(__file__).with_name("distributed_worker.py")
REPEATS = 200


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory) -> dict:
    """What each rank of one two-process torchrun launch of the worker reported, and its folders."""
    base = tmp_path_factory.mktemp("ddp")
    root, results = base / "runs", base / "results"
    root.mkdir()
    ranks = run_two_ranks(WORKER, [str(root), str(results)], results, {"REPEATS": str(REPEATS)})
    return {"root": root, "ranks": ranks}


def _one_process(tmp_path: Path, name: str) -> dict:
    """The same run as the worker's, in this one process."""
    if name == "lp-2st":
        config = RunConfig(
            dataset="digits",
            method="lp-2st",
            epsilon=2.0,
            insecure_noise_seed=7,
            seed=1,
            train=TrainConfig(epochs=2, batch_size=64, lr=0.05),
        )
    else:
        config = RunConfig(
            dataset="digits",
            method="dp-sgd",
            epsilon=8.0,
            delta=1e-5,
            model="mlp",
            seed=1,
            train=TrainConfig(epochs=1, batch_size=128, lr=1.0, momentum=0.0, optimizer="sgd"),
            options=DPSGDConfig(noise_multiplier=0.9, ema_decay=0.0),
        )
    with pytest.warns(Warning) if config.insecure_noise_seed is not None else _nothing():
        return train_run(config, tmp_path / name, device="cpu", progress=False)


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.mark.parametrize("method", ["lp-2st", "dp-sgd"])
def test_two_processes_match_one(two_ranks, tmp_path, method) -> None:
    zero, one = (rank[method] for rank in two_ranks["ranks"])
    assert zero == one  # every rank returns rank 0's summary
    assert zero["processes"] == 2
    alone = _one_process(tmp_path, method)
    assert "processes" not in alone
    assert zero["epsilon"] == alone["epsilon"] and zero["delta"] == alone["delta"]
    ledger = json.loads((two_ranks["root"] / method / "ledger.json").read_text())
    assert ledger == json.loads((tmp_path / method / "ledger.json").read_text())
    # lp-2st: reproducible noise (stage 2's prior differs by float sums only); dp-sgd: fresh noise and batches,
    # whose one-epoch accuracy spreads over 0.56-0.73 between runs of one process (8 runs): 0.3 is over 4 sigma
    assert abs(zero["test_accuracy"] - alone["test_accuracy"]) < (0.05 if method == "lp-2st" else 0.3)
    assert zero["test_accuracy"] > 0.2  # far above chance (0.1)
    rows = [json.loads(line) for line in (two_ranks["root"] / method / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == (4 if method == "lp-2st" else 1)  # one row per epoch: rank 1 wrote none


def test_resume_under_torchrun(two_ranks) -> None:
    """Resumed by every rank after stage 2 was interrupted: no release drawn again, the ledger and the
    releases untouched, and stage 2 retrained to the same model."""
    zero, one = two_ranks["ranks"]
    assert zero["resume_kept_releases"] is True
    assert zero["lp-2st-resumed"] == one["lp-2st-resumed"]
    first, resumed = zero["lp-2st"], zero["lp-2st-resumed"]
    assert resumed["epsilon"] == first["epsilon"] and resumed["stages"] == first["stages"]
    assert abs(resumed["test_accuracy"] - first["test_accuracy"]) < 0.02


def test_pate_teachers_shared_among_ranks(two_ranks, tmp_path) -> None:
    """Teachers trained in rounds across two ranks vote as in one process: with the same (reproducible)
    vote noise the release is the same, and rank 0 removed the teachers' raw votes."""
    config = RunConfig(
        dataset="digits",
        method="pate",
        epsilon=4.0,
        delta=1e-5,
        insecure_noise_seed=3,
        seed=1,
        model="mlp",
        train=TrainConfig(epochs=1),
        options=PATEConfig(teachers=5, teacher_epochs=1, queries=100),
    )
    with pytest.warns(Warning):
        alone = train_run(config, tmp_path / "pate", device="cpu", progress=False)
    zero, one = (rank["pate"] for rank in two_ranks["ranks"])
    assert zero == one and zero["epsilon"] == alone["epsilon"] and zero["answered"] == alone["answered"]
    folder = two_ranks["root"] / "pate"
    assert not (folder / "private").exists()
    assert two_ranks["ranks"][0]["pate_resumed_votes"] == [[7] * 5] * 4  # resumed teachers keep their saved votes
    with (
        np.load(folder / "noisy_labels" / "pate.npz") as shared,
        np.load(tmp_path / "pate" / "noisy_labels" / "pate.npz") as single,
    ):
        for key in ("labels", "answered", "queries", "members"):
            np.testing.assert_array_equal(shared[key], single[key])


def test_only_rank_zero_touches_the_run_folder(two_ranks) -> None:
    root = two_ranks["root"]
    assert [rank["cli"] for rank in two_ranks["ranks"]] == [0, 0]
    assert (root / "cli" / "summary.json").exists()
    assert sorted(p.name for p in root.iterdir()) == [
        "cli",
        "dp-sgd",
        "lp-2st",
        "pate",
    ]  # rank 1's own --out never appears
    assert two_ranks["ranks"][1]["touched"] == []  # no open, mkdir, rename or delete under the root
    assert (root / "lp-2st" / "noisy_labels" / "stage2.npz").exists() and (root / "dp-sgd" / "model.pt").exists()


def test_dpsgd_noise_enters_once(two_ranks) -> None:
    """The privatised gradient of a fixed batch split over two ranks has the variance (sigma C / B)^2 of
    one process, not twice it, and the mean of the whole batch's clipped sum / B."""
    gradients = [np.array(rank["gradients"]) for rank in two_ranks["ranks"]]
    np.testing.assert_array_equal(gradients[0], gradients[1])  # every rank steps with the same gradient
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
    dp = DPSGDConfig(max_grad_norm=1.0)
    private_gradient(model, x, y, dp, 0.0, 16.0, None)
    clean = torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy()
    alone = []
    for _ in range(REPEATS):
        private_gradient(model, x, y, dp, 1.0, 16.0, "secure")
        alone.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).numpy())
    expected = (1.0 * 1.0 / 16.0) ** 2
    for samples in (gradients[0], np.array(alone)):
        ratio = samples.var(axis=0, ddof=1).mean() / expected
        assert 0.9 < ratio < 1.1, ratio  # relative error ~ sqrt(2 / (200 * 36)) = 1.7%; noise twice: 2
        se = np.sqrt(expected / len(samples))
        assert np.all(np.abs(samples.mean(axis=0) - clean) < 5 * se)


def test_one_process_is_unchanged(tmp_path) -> None:
    """Without torchrun the collectives are the identity, and a read-only run folder refuses every write."""
    from labeldp import distributed
    from labeldp.errors import RunDirectoryError
    from labeldp.runs.rundir import RunDirectory

    assert not distributed.active() and distributed.world_size() == 1 and distributed.is_main()
    assert distributed.shard(7) == slice(0, 7)
    rows = torch.arange(6.0).reshape(3, 2)
    assert distributed.gather_rows(rows, 3) is rows and distributed.all_reduce_sum(rows) is rows
    assert distributed.on_main(lambda: 5) == 5 and distributed.broadcast("x") == "x"
    folder = RunDirectory(tmp_path / "run", read_only=True)
    for write in (
        folder.create,
        lambda: folder.save_release("stage1", labels=np.zeros(2)),
        lambda: folder.append_metrics({}),
        lambda: folder.write_config({}),
        folder.discard_private,
    ):
        with pytest.raises(RunDirectoryError, match="only rank 0"):
            write()
    with pytest.raises(RunDirectoryError, match="only rank 0"), folder.lock():
        pass
    assert not (tmp_path / "run").exists()


def test_under_torchrun_only_train_runs(monkeypatch, capsys) -> None:
    from labeldp.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["profiles"]) == 2
    assert "only `labeldp train` runs" in capsys.readouterr().err


def test_more_ranks_than_gpus_is_refused(monkeypatch) -> None:
    """A second rank on a one-GPU machine gets a ConfigError naming the fix, not CUDA's invalid ordinal."""
    from labeldp import distributed
    from labeldp.errors import ConfigError

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert distributed.local_device(torch.device("cuda")) == torch.device("cuda", 0)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(ConfigError, match="1 GPU.*--nproc_per_node"):
        distributed.local_device(torch.device("cuda"))
    assert distributed.local_device(torch.device("cpu")) == torch.device("cpu")
