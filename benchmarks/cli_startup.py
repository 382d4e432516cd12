"""How fast the command line answers before any work: ``labeldp --help``, ``labeldp train --help``,
``labeldp train`` and ``labeldp privatize`` without their required flags, beside ``python -c "import
torch"`` (what every command paid first before the library's imports were made lazy) and a bare
``python -c pass``.

Each command runs in a fresh process, ``--repeats`` times in turn with the others (so that a busy
spell hits them all alike); the table gives the median wall time and its ratio to importing torch,
and the machine's load average before and after.

Usage: python benchmarks/cli_startup.py [--repeats 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

#: the installed ``labeldp`` script beside this Python, else ``python -m labeldp``
LABELDP = (
    [str(Path(sys.executable).with_name("labeldp"))]
    if Path(sys.executable).with_name("labeldp").exists()
    else [sys.executable, "-m", "labeldp"]
)
COMMANDS = {
    'python -c "pass"': [sys.executable, "-c", "pass"],
    'python -c "import torch"': [sys.executable, "-c", "import torch"],
    "labeldp --help": [*LABELDP, "--help"],
    "labeldp train --help": [*LABELDP, "train", "--help"],
    "labeldp train (no --out)": [*LABELDP, "train"],
    "labeldp privatize (no --table)": [*LABELDP, "privatize"],
}
TORCH = 'python -c "import torch"'


def wall_time(command: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    load_before = os.getloadavg()
    for command in COMMANDS.values():  # warm the file cache
        wall_time(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(args.repeats):
        for name, command in COMMANDS.items():
            times[name].append(wall_time(command))
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"median of {args.repeats} fresh processes each; load average {load_before[0]:.2f} before, "
        f"{os.getloadavg()[0]:.2f} after, {os.cpu_count()} cores\n"
    )
    print(f"{'command':<34}{'median s':>10}{'min s':>8}{'/ import torch':>16}")
    for name, values in times.items():
        print(f"{name:<34}{medians[name]:>10.3f}{min(values):>8.3f}{medians[name] / medians[TORCH]:>16.2f}")


if __name__ == "__main__":
    main()
