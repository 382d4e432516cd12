"""A method and a dataset registered from outside the package (``examples/custom_method.py``) run end
to end: train, resume without a second draw, and a sweep whose worker processes know them too; the
method's own option (``--train-share``) is parsed, recorded and read by the method."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "custom_method.py"

SCRIPT = """
import sys
from pathlib import Path

from labeldp.cli import main

plugin, out = sys.argv[1], sys.argv[2]
train = ["train", "--recipes", plugin, "--dataset", "blobs", "--method", "rr-ce", "--epsilon", "2", "--epochs", "3",
         "--train-share", "0.5", "--quiet", "--out", out + "/run"]
assert main(train) == 0
release = Path(out, "run", "noisy_labels", "stage1.npz")
drawn = release.read_bytes(), release.stat().st_mtime_ns
assert main(train) == 0  # the same command again: the finished run is read back, nothing drawn
assert (release.read_bytes(), release.stat().st_mtime_ns) == drawn
other = ["train", "--recipes", plugin, "--method", "lp-1st", "--epsilon", "2", "--train-share", "0.5",
         "--out", out + "/x"]
assert main(other) == 2  # rr-ce's own option, refused for another method before anything is written
assert main(["sweep", "--recipes", plugin, "--grid", "dataset=blobs", "method=rr-ce", "epsilon=4,8", "epochs=2",
             "train-share=0.25", "--workers", "2", "--quiet", "--out", out + "/sweep"]) == 0
"""


def test_a_method_and_a_dataset_of_your_own_run_like_labeldps(tmp_path: Path) -> None:
    # a process of its own: the registrations stay out of the other tests' registries
    subprocess.run([sys.executable, "-c", SCRIPT, str(PLUGIN), str(tmp_path)], check=True, timeout=300)
    run = tmp_path / "run"
    summary = json.loads((run / "summary.json").read_text())
    assert (summary["method"], summary["dataset"], summary["epsilon"]) == ("rr-ce", "blobs", 2.0)
    assert summary["test_accuracy"] > 0.5  # three classes: chance is a third
    ledger = json.loads((run / "ledger.json").read_text())
    assert [event["tag"] for event in ledger["entries"]] == ["stage1"]  # one release, not two
    assert sorted(path.name for path in (run / "noisy_labels").iterdir()) == ["stage1.npz"]
    # the method's own option: parsed from --train-share, recorded in config.json and read by the method
    assert json.loads((run / "config.json").read_text())["train_share"] == 0.5
    assert summary["stages"][0]["released"] == 300  # half of the 600 training rows
    with open(tmp_path / "sweep" / "results.csv") as file:
        rows = list(csv.DictReader(file))
    assert [(row["status"], row["method"], float(row["epsilon"])) for row in rows] == [
        ("done", "rr-ce", 4.0),
        ("done", "rr-ce", 8.0),
    ]  # two runs: in two worker processes, which know the method and the dataset
    swept = [json.loads(path.read_text()) for path in (tmp_path / "sweep").rglob("config.json")]
    assert [config["train_share"] for config in swept] == [0.25] * 2  # the grid sets it too
