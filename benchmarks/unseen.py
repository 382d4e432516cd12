"""Data nobody tuned for: ``labeldp train``'s defaults on a dataset with its recipes set aside
(``--no-recipe``), so that each run behaves as on a user's own data: the library's defaults, and the
learning rate chosen on the run's own release by the auto-tune (docs/guides/runs.md, "Tuned on your own
release"), at no extra epsilon.

Each run is the command a user types, run as a separate process::

    labeldp train --dataset D --method M --epsilon E --no-recipe --quiet --out OUT/M-eE-dS [EXTRA...]

and the table gives its test accuracy (estimated from released test labels where the test labels are
private), its wall time (the process's, startup included, and the run's own ``seconds``, candidates
included), and what the auto-tune tried and chose (``auto_tune.json`` of the run folder). A finished run
in ``--out`` is read back, not run again.

``--draws 1 2 3`` repeats each cell on the releases of ``--insecure-noise-seed`` 1, 2 and 3: the same
draws in every cell and on every machine, so that two versions of labeldp compare paired, but NOT PRIVATE
(the noise is reproducible). ``--draws fresh`` draws secret noise, one run per cell. Either way each run
releases the dataset's labels once, and its dataset ledger records it: give ``--budget-dir`` (or
``$LABELDP_BUDGET_DIR``) a folder of its own for a check on a built-in dataset.

On data of your own, pass its options after ``--``::

    python benchmarks/unseen.py --dataset csv --draws fresh -- --table mine.csv --label-column y

Usage: python benchmarks/unseen.py [--dataset digits] [--methods lp-2st] [--epsilons 0.5 1 2]
[--draws 1 2 3] [--data-dir DIR] [--threads N] [--out runs/unseen] [-- EXTRA TRAIN FLAGS]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

LABELDP = [sys.executable, "-m", "labeldp"]


def run_one(argv: list[str], out: Path) -> dict:
    """One run's facts: its summary and auto-tune record, and the process's wall time (None: a finished run
    read back)."""
    wall = None
    if not (out / "summary.json").exists():
        started = time.perf_counter()
        done = subprocess.run([*LABELDP, *argv, "--out", str(out)], capture_output=True, text=True)
        if done.returncode != 0:
            return {"error": (done.stderr or done.stdout).strip().splitlines()[-1:]}
        wall = time.perf_counter() - started
    summary = json.loads((out / "summary.json").read_text())
    record_path = out / "auto_tune.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    return {"summary": summary, "record": record, "wall": wall}


def tried(record: dict) -> str:
    """The learning rates tried, those beyond the planned grid after a ``+``."""
    planned = [o["lr"] for o in record.get("options", [])]
    beyond = [step["options"]["lr"] for step in record.get("extended", [])]
    return ",".join(f"{lr:g}" for lr in planned) + ("+" + ",".join(f"{lr:g}" for lr in beyond) if beyond else "")


def main() -> None:
    own, extra = sys.argv[1:], []
    if "--" in own:
        cut = own.index("--")
        own, extra = own[:cut], own[cut + 1 :]
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default="digits")
    parser.add_argument("--methods", nargs="+", default=["lp-2st"])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--draws", nargs="+", default=["1", "2", "3"], help="insecure noise seeds, or 'fresh'")
    parser.add_argument("--data-dir")
    parser.add_argument("--threads", type=int)
    parser.add_argument("--out", default="runs/unseen")
    args = parser.parse_args(own)

    common = ["--dataset", args.dataset, "--no-recipe", "--quiet", *extra]
    common += ["--data-dir", args.data_dir] if args.data_dir else []
    common += ["--threads", str(args.threads)] if args.threads else []
    load = os.getloadavg()[0]
    rows = []
    print(f"{'method':<8}{'epsilon':>8}{'draw':>6}{'test %':>9}{'wall s':>9}{'run s':>9}  chosen")
    for method in args.methods:
        for epsilon in args.epsilons:
            for draw in args.draws:
                seed = [] if draw == "fresh" else ["--insecure-noise-seed", draw]
                name = f"{method}-e{epsilon:g}-d{draw}" if draw != "fresh" else f"{method}-e{epsilon:g}-fresh"
                argv = ["train", *common, "--method", method, "--epsilon", f"{epsilon:g}", *seed]
                facts = run_one(argv, Path(args.out) / args.dataset / name)
                rows.append((method, epsilon, draw, facts))
                if "error" in facts:
                    print(f"{name}: failed: {facts['error']}", flush=True)
                    continue
                summary, record = facts["summary"], facts["record"]
                chosen = record.get("chosen") or f"not tuned ({record.get('reason', 'no auto-tune')})"
                wall = "read" if facts["wall"] is None else f"{facts['wall']:.1f}"
                print(
                    f"{method:<8}{epsilon:>8g}{draw:>6}{100 * summary['test_accuracy']:>9.2f}{wall:>9}"
                    f"{summary['seconds']:>9.1f}  {chosen:<12} tried {tried(record)}",
                    flush=True,
                )
    print(
        f"\n{args.dataset}, recipes set aside (--no-recipe); load average {load:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end. Per cell: mean test accuracy % (the draws), mean wall seconds "
        "(the process's, of the runs made here), the learning rates chosen:\n"
    )
    print(f"{'method':<8}{'epsilon':>8}  {'accuracy % (draws)':<28}{'wall s':>8}  chosen")
    for method in args.methods:
        for epsilon in args.epsilons:
            cell = [f for m, e, _, f in rows if m == method and e == epsilon and "error" not in f]
            if not cell:
                continue
            accuracies = [100 * f["summary"]["test_accuracy"] for f in cell]
            draws = ", ".join(f"{a:.1f}" for a in accuracies)
            chosen = ", ".join(str((f["record"].get("chosen_options") or {}).get("lr", "-")) for f in cell)
            walls = [f["wall"] for f in cell if f["wall"] is not None]
            wall = f"{statistics.mean(walls):.1f}" if walls else "read"
            cell_accuracy = f"{statistics.mean(accuracies):.2f} ({draws})"
            print(f"{method:<8}{epsilon:>8g}  {cell_accuracy:<28}{wall:>8}  {chosen}")


if __name__ == "__main__":
    main()
