"""Run under ``torchrun --nproc_per_node 2`` by tests/ads/test_ddp.py (not a test module itself).

Every rank runs the ads route's runs RUNS names (``fit_hashed`` on TABLE hashed by SPEC, each into
``ROOT/name``, with reproducible noise), then resumes the first after rank 0 has deleted its end (the
model and the summary), trains a factorization machine on a fixed batch split between the ranks, then
runs `labeldp hashed train` (which leaves the process group at its end).
An audit hook on rank 1 records every file it opens, creates, moves or deletes under ROOT (the run
folders are rank 0's). Each rank writes what it saw to ``RESULTS/rank{r}.json``.

usage: ddp_worker.py TABLE SPEC RUNS ROOT RESULTS
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
table, spec_json, runs_json, root, results = sys.argv[1:6]
root = Path(root).resolve()
rank = int(os.environ["RANK"])
touched: list[str] = []


def _hook(event: str, args: tuple) -> None:
    if event in ("open", "os.rename", "os.mkdir", "os.remove", "os.unlink", "os.replace") and args:
        if isinstance(args[0], (str, bytes, os.PathLike)) and os.path.abspath(os.fsdecode(args[0])).startswith(
            str(root)
        ):
            touched.append(f"{event} {os.fsdecode(args[0])}")


if rank != 0:
    sys.addaudithook(_hook)

from labeldp.ads import fit_hashed  # noqa: E402
from labeldp.cli import main  # noqa: E402
from labeldp.data.hashing import HashSpec  # noqa: E402
from labeldp.models.sparse import HashedFM  # noqa: E402
from labeldp.randomness import NoiseSource  # noqa: E402
from labeldp.training.out_of_core import SparseTrainConfig, forward_loss, train_sparse  # noqa: E402

spec = HashSpec.from_dict(json.loads(spec_json))
runs = json.loads(runs_json)
report: dict = {"rank": rank}
for name, options in runs.items():
    report[name] = fit_hashed(table, root / name, spec=spec, noise=NoiseSource(insecure_seed=5), **options)
first = next(iter(runs))
folder = root / first
torch.distributed.barrier()
if rank == 0:  # an interrupted training: the release and the ledger are saved, the model and summary gone
    kept = {name: (folder / name).read_bytes() for name in ("release.npz", "ledger.json")}
    for name in ("summary.json", "model.pt"):
        (folder / name).unlink()
torch.distributed.barrier()
options = runs[first]
report["resumed"] = fit_hashed(table, folder, spec=spec, noise=NoiseSource(insecure_seed=5), **options)
if rank == 0:
    report["resume_kept_release"] = all((folder / name).read_bytes() == kept[name] for name in kept)
# one step an epoch on a fixed batch split between the ranks: the model of one process on the whole batch
rng = np.random.default_rng(0)
buckets, targets = rng.integers(0, 64, (256, 3)), np.log(rng.uniform(0.05, 1, (256, 2))).astype(np.float32)
mine = slice(rank, None, 2)
with torch.random.fork_rng():
    torch.manual_seed(0)
    model = HashedFM(64, 4)
settings = SparseTrainConfig(epochs=3, batch_rows=256, lr=0.1, l2=0.5)
sizes = np.bincount(buckets.ravel(), minlength=64)
blocks = lambda epoch: [(buckets[mine], targets[mine])]  # noqa: E731
report["steps"] = train_sparse(model, blocks, forward_loss, settings, sizes, data_parallel=True)
report["state"] = {name: value.tolist() for name, value in model.state_dict().items()}
report["cli"] = main(
    ["hashed", "train", "--table", table, "--label-column", "converted", "--classes", "0", "1"]
    + ["--columns", "advertiser", "campaign", "site", "device", "--bits", "8", "--epsilon", "4"]
    + ["--route", "rr", "--block-rows", "1024", "--insecure-noise-seed", "3", "--out", str(root / "cli")]
)
report["touched"] = touched
Path(results).mkdir(parents=True, exist_ok=True)
(Path(results) / f"rank{rank}.json").write_text(json.dumps(report))
