"""Run under ``torchrun --nproc_per_node 2`` by tests/test_distributed.py (not a test module itself).

Every rank runs the same runs (lp-2st, dp-sgd and pate on digits), resumes the first after rank 0 has
deleted its end (stage 2's checkpoint, the model and the summary), and then repeats one DP-SGD
step's privatised gradient many times, and finally runs `labeldp train` (lp-1st). Ranks other than 0
are given their own ``--out`` folders, which must
never appear, and an audit hook records every file they open, create, move or delete under the runs'
root. Each rank writes what it saw to ``RESULTS/rank{r}.json`` at the end (outside the runs' root).

usage: distributed_worker.py ROOT RESULTS
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
root, results = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
rank = int(os.environ["RANK"])
touched: list[str] = []

_EVENTS = {
    "open",
    "os.rename",
    "os.mkdir",
    "os.remove",
    "os.rmdir",
    "shutil.rmtree",
    "os.truncate",
    "os.chmod",
    "os.link",
    "os.symlink",
    "os.utime",
}


def _hook(event: str, args: tuple) -> None:
    if event in _EVENTS and args and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if os.path.abspath(path).startswith(str(root)):
            touched.append(f"{event} {path}")


if rank != 0:  # the other ranks must not touch the run folders at all: rank 0 reads and writes them
    sys.addaudithook(_hook)

from labeldp import distributed  # noqa: E402
from labeldp.boundary import PrivateLabels  # noqa: E402
from labeldp.config.dpsgd import DPSGDConfig  # noqa: E402
from labeldp.config.pate_config import PATEConfig  # noqa: E402
from labeldp.dpsgd.trainer import private_gradient  # noqa: E402
from labeldp.runs import RunConfig, train_run  # noqa: E402
from labeldp.teachers import train_teachers  # noqa: E402
from labeldp.training import TrainConfig  # noqa: E402


def out(name: str) -> Path:
    return root / (name if rank == 0 else f"{name}-rank{rank}")


report: dict = {"rank": rank}
started = time.perf_counter()
lp = RunConfig(
    dataset="digits",
    method="lp-2st",
    epsilon=2.0,
    insecure_noise_seed=7,
    seed=1,
    train=TrainConfig(epochs=2, batch_size=64, lr=0.05),
)
report["lp-2st"] = train_run(lp, out("lp-2st"), device="cpu", progress=False)
folder = root / "lp-2st"
torch.distributed.barrier()
if rank == 0:  # an interrupted stage 2: its checkpoint, the model and the summary are gone
    before = {p.name: p.stat().st_mtime_ns for p in [folder / "ledger.json", *(folder / "noisy_labels").iterdir()]}
    ledger = (folder / "ledger.json").read_text()
    for name in ("summary.json", "model.pt", "checkpoints/stage2.pt"):
        (folder / name).unlink()
torch.distributed.barrier()
report["lp-2st-resumed"] = train_run(lp, out("lp-2st"), device="cpu", progress=False)
if rank == 0:
    after = {p.name: p.stat().st_mtime_ns for p in [folder / "ledger.json", *(folder / "noisy_labels").iterdir()]}
    report["resume_kept_releases"] = before == after and ledger == (folder / "ledger.json").read_text()
dpsgd = RunConfig(
    dataset="digits",
    method="dp-sgd",
    epsilon=8.0,
    delta=1e-5,
    model="mlp",
    seed=1,
    train=TrainConfig(epochs=1, batch_size=128, lr=1.0, momentum=0.0, optimizer="sgd"),
    options=DPSGDConfig(noise_multiplier=0.9, ema_decay=0.0),
)
report["dp-sgd"] = train_run(dpsgd, out("dp-sgd"), device="cpu", progress=False)
pate = RunConfig(
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
report["pate"] = train_run(pate, out("pate"), device="cpu", progress=False)
# PATE's teachers resumed across ranks after every one of them had voted: their saved votes come back
saved_votes = results / "teachers.npz"  # outside the runs' root, written by rank 0
if rank == 0:
    results.mkdir(parents=True, exist_ok=True)
    np.savez(saved_votes, predictions=np.full((4, 5), 7, dtype=np.int16), done=np.array(4))
torch.distributed.barrier()
votes = train_teachers(
    lambda teacher: torch.nn.Linear(2, 10),
    np.zeros((8, 2), np.float32),
    PrivateLabels.from_indices(np.zeros(8, np.int64), 10),
    np.arange(8) % 4,
    np.zeros((5, 2), np.float32),
    10,
    TrainConfig(epochs=1, batch_size=2),
    checkpoint=saved_votes if rank == 0 else None,
    progress=False,
    parallel=True,
)
report["pate_resumed_votes"] = votes.tolist() if rank == 0 else None
report["runs_seconds"] = time.perf_counter() - started

# One DP-SGD step repeated: every rank takes its share of a fixed batch, rank 0 adds the noise.
torch.manual_seed(0)
model = torch.nn.Linear(8, 4)
x, y = torch.randn(16, 8), torch.randint(0, 4, (16,))
dp = DPSGDConfig(max_grad_norm=1.0)
mine = slice(rank, None, distributed.world_size())
samples = []
for _ in range(int(os.environ.get("REPEATS", "300"))):
    private_gradient(model, x[mine], y[mine], dp, 1.0, 16.0, "secure" if rank == 0 else None, parallel=True)
    samples.append(torch.cat([p.grad.reshape(-1) for p in model.parameters()]).clone())
report["gradients"] = torch.stack(samples).tolist()
# last, the command line (its train command leaves the process group at its end)
from labeldp.cli import main  # noqa: E402

report["cli"] = main(
    [
        "train",
        "--dataset",
        "digits",
        "--method",
        "lp-1st",
        "--epsilon",
        "2",
        "--epochs",
        "1",
        "--threads",
        "1",
        "--device",
        "cpu",  # gloo's ranks, as above: on a machine with one GPU a second rank would have none
        "--quiet",
        "--out",
        str(out("cli")),
    ]
)
report["touched"] = touched
results.mkdir(parents=True, exist_ok=True)
(results / f"rank{rank}.json").write_text(json.dumps(report))
