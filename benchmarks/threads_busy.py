"""How much a busy neighbour slows labeldp's estimators down, used from Python as the tables guide shows.

``cross_val_score`` of ``LabelDPClassifier(make_pipeline(encode, HistGradientBoostingClassifier()),
epsilon=1.0)`` on UCI Adult (32,561 rows; ``cv=KFold(5)``, ``scoring=released_scorer("roc_auc")``, as
docs/guides/tables.md shows), each time in a fresh Python process (the OpenMP runtime reads its wait
policy when it loads), timed ``--repeats`` times alone and beside one busy process (``python -c "while
True: pass"`` in a session of its own, as another user's job: one core's worth of load), in turn. Two
import orders: ``import labeldp`` first, and scikit-learn (with its OpenMP runtime) imported before
labeldp, as a notebook often does.

It prints each run's seconds and CPU seconds (``cross_val_score`` alone, not the imports or the reading
of the table), the load average (1 minute) just before it, the free cores labeldp counted, then the
medians and the slowdown (beside the busy process / alone; target at most 2x). ``--default-waits``
runs the children with ``GOMP_SPINCOUNT=300000``, GNU OpenMP's own default, which labeldp keeps as a
value the user set (the wait policy's share of the figures); ``--src`` times another checkout's
sources (the code before a change). The machine's other load moves every figure: read them with the
load averages beside them.

Usage: python benchmarks/threads_busy.py [--adult ../shared/datasets/adult/adult-train.csv.gz]
       [--order labeldp-first|sklearn-first] [--repeats 3] [--default-waits] [--src OTHER_CHECKOUT/src]
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
#: how OpenMP's threads wait and how many there are: the children start without them (labeldp's defaults)
WAITS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME", "OMP_NUM_THREADS")


def child(adult: str, order: str, src: str) -> None:
    """One user's session: import in ``order``, read Adult, time the 5-fold cross-validation."""
    first = ["sklearn.ensemble", "labeldp"] if order == "sklearn-first" else ["labeldp", "sklearn.ensemble"]
    for module in first:  # sklearn.ensemble loads scikit-learn's OpenMP runtime
        importlib.import_module(module)
    timed_from = Path(importlib.import_module("labeldp").__file__).parents[1]
    if timed_from != Path(src).resolve():  # an installed labeldp may come before PYTHONPATH
        raise SystemExit(f"labeldp was imported from {timed_from}, not {src}")
    import pandas as pd
    from sklearn.compose import make_column_selector, make_column_transformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.model_selection import KFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OrdinalEncoder

    from labeldp import LabelDPClassifier, PrivateLabels, released_scorer

    train = pd.read_csv(adult)
    X = train.drop(columns="income")
    y = PrivateLabels(train["income"], classes=["<=50K", ">50K"])
    encode = make_column_transformer(
        (
            OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1),
            make_column_selector(dtype_include=object),
        ),
        remainder="passthrough",
    )
    model = LabelDPClassifier(make_pipeline(encode, HistGradientBoostingClassifier()), epsilon=1.0)
    start, cpu = time.perf_counter(), time.process_time()
    scores = cross_val_score(model, X, y, cv=KFold(5), scoring=released_scorer("roc_auc"))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    counted = getattr(importlib.import_module("labeldp.runtime"), "_COUNTED", None)  # None: every core
    waits = " ".join(f"{name}={os.environ.get(name, '-')}" for name in WAITS[:2])
    print(f"{seconds:.3f} {cpu:.3f} {scores.mean():.4f} {counted[0] if counted else '-'} {waits}", flush=True)


def timed(adult: str, order: str, default_waits: bool, src: str) -> dict:
    """Run :func:`child` in a fresh process; its seconds and the load average before it."""
    env = {key: value for key, value in os.environ.items() if key not in WAITS}
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    if default_waits:
        env["GOMP_SPINCOUNT"] = "300000"  # GNU OpenMP's default (a value the user set: labeldp keeps it)
    load = os.getloadavg()[0]
    command = [sys.executable, __file__, "--child", order, "--adult", adult, "--src", src]
    with tempfile.TemporaryDirectory(prefix="labeldp-budget-") as budget:  # no spend outlives the run
        env["LABELDP_BUDGET_DIR"] = budget
        out = subprocess.run(command, check=True, env=env, capture_output=True, text=True).stdout.split(maxsplit=4)
    return {
        "seconds": float(out[0]),
        "cpu": float(out[1]),
        "auc": float(out[2]),
        "threads": out[3],
        "waits": out[4].strip(),
        "load": load,
    }


def measure(adult: str, order: str, repeats: int, default_waits: bool, src: str) -> float:
    """Time the cross-validation ``repeats`` times alone and beside a busy process, in turn (so that both
    see the same background load); print the figures and return the slowdown."""
    results: dict[str, list[dict]] = {"alone": [], "busy": []}
    for i in range(repeats):
        for beside in ("alone", "busy"):
            # in a session of its own, as another user's job: Linux schedules a session's processes as one
            # group (autogroup), so a busy child of this session would halve the share of the machine
            # this session gets from the other jobs, a slowdown of 2x on a machine others keep busy
            spin = [sys.executable, "-c", "while True: pass"]
            busy = subprocess.Popen(spin, start_new_session=True) if beside == "busy" else None
            try:
                if busy is not None:
                    time.sleep(1.0)  # let it show in the runnable count
                r = timed(adult, order, default_waits, src)
            finally:
                if busy is not None:
                    busy.terminate()
                    busy.wait()
            results[beside].append(r)
            print(
                f"  {order} {beside:<5} #{i}: {r['seconds']:6.1f} s, {r['cpu']:5.1f} s of CPU  (load average "
                f"{r['load']:.2f}; free cores counted: {r['threads']}; released AUC {r['auc']:.3f}; {r['waits']})",
                flush=True,
            )
    alone = statistics.median(r["seconds"] for r in results["alone"])
    busy_seconds = statistics.median(r["seconds"] for r in results["busy"])
    loads = [r["load"] for rs in results.values() for r in rs]
    print(
        f"{order}{' [GOMP_SPINCOUNT=300000]' if default_waits else ''}: median {alone:.1f} s alone, "
        f"{busy_seconds:.1f} s beside a busy process: slowdown {busy_seconds / alone:.2f}x (target <= 2x; "
        f"load average {min(loads):.2f}-{max(loads):.2f})",
        flush=True,
    )
    return busy_seconds / alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adult", default=str(ROOT.parent / "shared" / "datasets" / "adult" / "adult-train.csv.gz"))
    parser.add_argument("--order", choices=("labeldp-first", "sklearn-first"))
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--default-waits", action="store_true", help="idle threads wait as GNU OpenMP's default")
    parser.add_argument("--src", default=str(SRC), help="the labeldp sources to time (another checkout's src)")
    parser.add_argument("--child", choices=("labeldp-first", "sklearn-first"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.adult, args.child, args.src)
        return
    print(f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at start", flush=True)
    for order in [args.order] if args.order else ["labeldp-first", "sklearn-first"]:
        measure(args.adult, order, args.repeats, args.default_waits, args.src)


if __name__ == "__main__":
    main()
