"""`labeldp tune` (cli/tune.py): ALIBI tuned on a grid read from a YAML file, with one run's release
spent."""

from __future__ import annotations

import json

import pytest

from labeldp.cli import main
from labeldp.runs import RunDirectory


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_tune_command_with_alibi_and_a_yaml_grid(tmp_path, capsys) -> None:
    grid = tmp_path / "grid.yaml"
    grid.write_text("lr: [0.01, 0.05]\nweight-decay: [0.001]\n")
    code = main(
        [
            "tune",
            "--method",
            "alibi",
            "--epsilon",
            "2",
            "--epochs",
            "2",
            "--insecure-noise-seed",
            "1",
            "--grid-file",
            str(grid),
            "--threads",
            "1",
            "--quiet",
            "--out",
            str(tmp_path / "tuned"),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert "  chosen" in out and "epsilon 2 (one run's releases: stage1)" in out
    saved = json.loads((tmp_path / "tuned" / "tune.json").read_text())
    assert [r["key"] for r in saved["results"]] == ["lr=0.01,weight_decay=0.001", "lr=0.05,weight_decay=0.001"]
    assert RunDirectory(tmp_path / "tuned").read_ledger().epsilon(0.0) == pytest.approx(2.0)
