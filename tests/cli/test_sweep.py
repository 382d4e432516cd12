"""`labeldp sweep` and `labeldp report` (cli/sweep.py, and cli/report.py, which has little logic and
shares this module): a sweep of profiles refuses a base recipe, and a report without results is a
clear error."""

from __future__ import annotations

from labeldp.cli import main


def test_sweep_of_profiles_refuses_a_base(tmp_path, capsys) -> None:
    assert main(["sweep", "--profiles", "^digits/e1/", "--base", "digits/e1/lp-1st/run0", "--out", str(tmp_path)]) == 2
    assert "--base is the recipe a --grid starts from" in capsys.readouterr().err
    assert not (tmp_path / "results.csv").exists()


def test_report_without_results_is_a_clear_error(tmp_path, capsys) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "results.csv does not exist" in capsys.readouterr().err


def test_sweep_refuses_threads_below_one(tmp_path, capsys) -> None:
    assert main(["sweep", "--grid", "epsilon=1", "--threads", "0", "--out", str(tmp_path)]) == 2
    assert "--threads must be at least 1" in capsys.readouterr().err


def test_a_grid_without_an_epsilon_says_how_a_grid_gives_one(tmp_path, capsys) -> None:
    assert main(["sweep", "--grid", "method=lp-1st,lp-2st", "--out", str(tmp_path / "s")]) == 2
    error = capsys.readouterr().err
    assert "epsilon=" in error and "--grid" in error and "--epsilon" not in error
