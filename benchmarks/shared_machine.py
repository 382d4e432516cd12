"""How much a busy neighbour slows labeldp down with its default threads.

Two workloads, each timed alone and then beside one busy process (a ``python -c "while True: pass"``
child, one core's worth of load), with the command's defaults (no ``--threads``, no OMP_NUM_THREADS):

(a) one MNIST LP-1ST epoch: ``labeldp train --dataset mnist --method lp-1st --epsilon 2 --epochs 1``;
(b) a 7-run sweep of a table: ``labeldp sweep --grid`` over seven epsilons of UCI Adult, 2 epochs each.

It prints, for each, the wall-clock seconds of the whole command (start-up included; for (a) also the
epoch's own seconds from metrics.jsonl), the median of ``--repeats`` runs, the slowdown ratio (beside
the busy process / alone) and the load average (1 minute) and the free cores
(:func:`labeldp.runtime.free_cores`) measured just before each run. The target is a slowdown of at most
about 2.5x. ``--old`` times the same workloads the way labeldp chose threads before (every core for
images, torch's default of every core in an in-process sweep, OpenMP threads spinning while they wait),
for comparison. The machine's other load moves every figure: read them with the load averages beside
them, and compare ratios measured in one run.

Usage: python benchmarks/shared_machine.py [--mnist-dir ../shared/datasets/mnist]
       [--adult ../shared/datasets/adult/adult-train.csv.gz] [--only mnist|sweep] [--repeats 1] [--old]
       [--out runs/shared-machine]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))

from labeldp import runtime  # noqa: E402

EPSILONS = "0.5,1,2,4,8,16,32"


def mnist_command(data_dir: str, out: Path, old: bool) -> list[str]:
    command = ["train", "--dataset", "mnist", "--data-dir", data_dir, "--method", "lp-1st", "--epsilon", "2"]
    command += ["--epochs", "1", "--device", "cpu", "--quiet", "--out", str(out)]
    return command + (["--threads", str(os.cpu_count() or 1)] if old else [])


def sweep_command(table: str, out: Path, old: bool) -> list[str]:
    grid = [
        "dataset=csv",
        f"table={table}",
        "label_column=income",
        "classes=<=50K:>50K",
        "method=lp-1st",
        f"epsilon={EPSILONS}",
        "epochs=2",
    ]
    command = ["sweep", "--grid", *grid, "--device", "cpu", "--quiet", "--out", str(out)]
    return command + (["--threads", str(os.cpu_count() or 1)] if old else [])


def timed(command: list[str], out: Path, old: bool) -> dict[str, float]:
    """Run ``labeldp COMMAND`` in a fresh folder; its wall-clock seconds, the load average and free cores
    before it, and (for a run) its epoch's seconds."""
    shutil.rmtree(out, ignore_errors=True)
    waits = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
    env = {key: value for key, value in os.environ.items() if key not in waits}
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    if old:
        env["OMP_WAIT_POLICY"] = "ACTIVE"  # as before labeldp asked idle threads to sleep
    load, free = os.getloadavg()[0], runtime.free_cores()
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "labeldp", *command], check=True, env=env, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    metrics = out / "metrics.jsonl"
    epoch = json.loads(metrics.read_text().splitlines()[0])["seconds"] if metrics.exists() else float("nan")
    return {"seconds": seconds, "epoch": epoch, "load": load, "free": free}


def measure(name: str, command, out: Path, repeats: int, old: bool) -> None:
    """Time ``command`` ``repeats`` times alone, then beside a busy process, and print the figures."""
    results = {}
    for beside in ("alone", "busy"):
        busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if beside == "busy" else None
        try:
            if busy is not None:
                time.sleep(1.0)  # let the busy process show in the runnable count
            results[beside] = [timed(command(out / f"{beside}{i}"), out / f"{beside}{i}", old) for i in range(repeats)]
        finally:
            if busy is not None:
                busy.terminate()
                busy.wait()
        for i, r in enumerate(results[beside]):
            epoch = "" if r["epoch"] != r["epoch"] else f", epoch {r['epoch']:.1f} s"
            print(
                f"  {name} {beside:<5} #{i}: {r['seconds']:6.1f} s{epoch}  "
                f"(load average {r['load']:.2f}, free cores {r['free']})",
                flush=True,
            )
    alone = statistics.median(r["seconds"] for r in results["alone"])
    busy = statistics.median(r["seconds"] for r in results["busy"])
    print(
        f"{name}: median {alone:.1f} s alone, {busy:.1f} s beside a busy process: slowdown {busy / alone:.2f}x "
        f"(target <= 2.5x){' [old threads]' if old else ''}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mnist-dir", default=str(ROOT.parent / "shared" / "datasets" / "mnist"))
    parser.add_argument("--adult", default=str(ROOT.parent / "shared" / "datasets" / "adult" / "adult-train.csv.gz"))
    parser.add_argument("--only", choices=("mnist", "sweep"))
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--old", action="store_true", help="also time the former thread choice, for comparison")
    parser.add_argument("--out", default="runs/shared-machine")
    args = parser.parse_args()
    out = Path(args.out)
    print(
        f"{os.cpu_count()} cores, {runtime.usable_cores()} usable; load average {os.getloadavg()[0]:.2f} at start",
        flush=True,
    )
    workloads = {
        "mnist lp-1st epoch": lambda folder, old: mnist_command(args.mnist_dir, folder, old),
        "adult 7-run sweep": lambda folder, old: sweep_command(args.adult, folder, old),
    }
    chosen = {"mnist": ["mnist lp-1st epoch"], "sweep": ["adult 7-run sweep"]}.get(args.only, list(workloads))
    for old in (False, True) if args.old else (False,):
        for name in chosen:
            folder = out / ("old" if old else "new") / name.split()[0]
            measure(name, lambda f, n=name, o=old: workloads[n](f, o), folder, args.repeats, old)


if __name__ == "__main__":
    main()
