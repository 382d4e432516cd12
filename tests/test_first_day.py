"""What a user study's first day with labeldp ran into: threads on a shared machine, the recipes behind
the defaults, and the command line's footguns."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import torch

from labeldp import runtime
from labeldp.cli import build_parser, main
from labeldp.config.run import RunConfig
from labeldp.config.train import TrainConfig
from labeldp.experiments.sweep import SweepJob, run_sweep


def write_table(path, rows: int = 60, **extra) -> None:
    """A small two-class table: numeric features ``a`` and ``b``, a text column ``c``, label ``label``."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=rows),
            "b": rng.normal(size=rows),
            "c": rng.choice(["x", "y"], size=rows),
            "label": np.tile([0, 1], rows // 2),
            **extra,
        }
    )
    frame.to_csv(path, index=False)


def table_config(path, **overrides) -> RunConfig:
    return RunConfig(
        dataset="csv",
        table=str(path),
        classes=("0", "1"),
        method="lp-1st",
        epsilon=1.0,
        train=TrainConfig(epochs=1, batch_size=16),
        **overrides,
    )


@pytest.fixture
def restore_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
    runtime._AUTO = None


# A. threads on a shared machine


def test_free_cores_leave_a_busy_core_to_its_process(monkeypatch) -> None:
    monkeypatch.setattr(runtime, "usable_cores", lambda: 2)
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(runtime, "_runnable_tasks", lambda: 2)  # this thread and one busy process
    assert runtime.busy_cores(0.02) == 1
    assert runtime.free_cores(0.02) == 1
    monkeypatch.setattr(runtime, "_runnable_tasks", lambda: 1)  # this thread alone
    assert runtime.free_cores(0.02) == 2
    monkeypatch.setattr(runtime, "_runnable_tasks", lambda: 9)  # a crowd: still one thread
    assert runtime.free_cores(0.02) == 1


def test_free_cores_fall_back_on_the_load_average(monkeypatch) -> None:
    monkeypatch.setattr(runtime, "_runnable_tasks", lambda: None)  # no /proc/stat (macOS)
    monkeypatch.setattr(runtime.os, "getloadavg", lambda: (3.0, 1.0, 1.0))
    assert runtime.busy_cores(0.02) == 3.0


def test_on_a_busy_machine_an_image_run_takes_the_free_cores_only(monkeypatch, restore_threads) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0: 3)
    monkeypatch.setattr(runtime, "usable_cores", lambda: 8)
    assert runtime.default_threads("mnist") == 3
    assert runtime.default_threads("csv") == runtime.default_threads("digits") == 1
    assert runtime.set_threads(None, "mnist") == 3 and torch.get_num_threads() == 3
    assert runtime.set_threads(None, "mnist", cores=2) == 2  # a sweep worker's share
    assert runtime.set_threads(5, "csv") == 5 and runtime._AUTO is None  # --threads as typed


def test_automatic_threads_follow_the_free_cores_during_training(monkeypatch, restore_threads) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "usable_cores", lambda: 4)
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0: 4)
    runtime.set_threads(None, "mnist")
    assert torch.get_num_threads() == 4
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0: 1)  # another process started
    runtime.recheck_threads()
    assert torch.get_num_threads() == 4  # not yet: at most one check per interval
    runtime._AUTO[1] -= runtime.RECHECK_INTERVAL
    runtime.recheck_threads()
    assert torch.get_num_threads() == 1
    runtime.set_threads(2, "mnist")  # threads a user chose are never changed
    runtime.recheck_threads()
    assert torch.get_num_threads() == 2


def test_the_command_makes_idle_openmp_threads_sleep_unless_told_otherwise(monkeypatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    main(["profiles", "^digits/e1/lp-1st/run0$"])
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert runtime.prefer_passive_waits() is False
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"


@pytest.mark.parametrize("command", ["train", "sweep", "tune", "audit"])
def test_every_command_that_trains_takes_threads(command) -> None:
    assert "--threads" in build_parser(command)._subparsers._group_actions[0].choices[command].format_help()


def test_a_sweep_of_tables_runs_on_one_thread_and_logs_each_run_when_not_on_a_terminal(
    tmp_path, capsys, restore_threads
) -> None:
    write_table(tmp_path / "t.csv")
    jobs = [SweepJob(f"t/run{seed}", table_config(tmp_path / "t.csv", seed=seed)) for seed in (0, 1)]
    torch.set_num_threads(2)
    rows = run_sweep(jobs, tmp_path / "sweep")
    assert [row["status"] for row in rows] == ["done", "done"] and rows[0]["table"] == "t"
    assert torch.get_num_threads() == 1
    err = capsys.readouterr()
    lines = [line for line in (err.out + err.err).splitlines() if line.startswith("[")]
    assert [line.split()[:3] for line in lines] == [["[1/2]", "t/run0", "done"], ["[2/2]", "t/run1", "done"]]


def test_ctrl_c_stops_a_sweeps_workers_rather_than_waiting_for_their_runs(tmp_path, monkeypatch) -> None:
    import multiprocessing
    import signal
    import time

    from labeldp.experiments import sweep

    write_table(tmp_path / "t.csv")
    jobs = [SweepJob(f"t/run{seed}", table_config(tmp_path / "t.csv", seed=seed)) for seed in (0, 1)]
    handler = signal.getsignal(signal.SIGINT)

    def interrupted(futures):
        raise KeyboardInterrupt
        yield

    monkeypatch.setattr(sweep, "as_completed", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(jobs, tmp_path / "sweep", workers=2, progress=False)
    assert signal.getsignal(signal.SIGINT) is handler  # ignored only while the workers started
    deadline = time.monotonic() + 30
    while multiprocessing.active_children() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not multiprocessing.active_children()
    assert not list((tmp_path / "sweep").rglob("summary.json"))  # stopped, not waited for


def test_sweep_refuses_threads_below_one(tmp_path, capsys) -> None:
    assert main(["sweep", "--grid", "epsilon=1", "--threads", "0", "--out", str(tmp_path)]) == 2
    assert "--threads must be at least 1" in capsys.readouterr().err


# B. the defaults are the recipe of every dataset that has one


def _defaults(*argv: str) -> RunConfig:
    from labeldp.cli.common import config_with_recipe

    args = build_parser("train").parse_args(["train", *argv, "--out", "o", "--quiet"])
    return config_with_recipe(args)


def _same_run(config: RunConfig, profile_key: str) -> bool:
    import dataclasses

    from labeldp.recipes import get_profile

    profile = get_profile(profile_key).config
    return (
        dataclasses.replace(config, data_dir=None).resolved() == dataclasses.replace(profile, data_dir=None).resolved()
    )


@pytest.mark.parametrize("method", ["lp-1st", "rr-on-bins", "rr-on-bins-mst", "laplace-regression"])
def test_movielens_defaults_are_its_profiles_recipe(method) -> None:
    config = _defaults("--dataset", "movielens", "--data-dir", "m", "--method", method, "--epsilon", "1")
    assert _same_run(config, f"movielens/e1/{method}/run0")


def test_movielens_says_which_recipe_it_takes(capsys) -> None:
    from labeldp.cli.common import config_with_recipe

    args = build_parser("train").parse_args(
        ["train", "--dataset", "movielens", "--data-dir", "m", "--method", "lp-1st", "--epsilon", "1", "--out", "o"]
    )
    config_with_recipe(args)
    out = capsys.readouterr().out
    assert "recipe for lp-1st on movielens" in out and "no tuned recipe" not in out


def test_a_cluster_prior_takes_the_best_cluster_profiles_encoder() -> None:
    config = _defaults(
        "--dataset", "mnist", "--data-dir", "m", "--method", "lp-2st", "--prior", "cluster", "--epsilon", "0.1"
    )
    assert config.encoder == "spectral" and config.clusters == 50
    assert _same_run(config, "mnist/e0.1/lp-2st-spectral/run0")
    typed = _defaults(
        "--dataset", "mnist", "--data-dir", "m", "--method", "lp-2st", "--prior", "cluster", "--epsilon", "0.1",
        "--encoder", "pca",
    )  # fmt: skip
    assert typed.encoder == "pca" and typed.clusters == 50  # what is typed wins, the rest is the recipe's


def test_a_table_of_ones_own_says_how_to_tune_it_on_its_own_release(capsys) -> None:
    from labeldp.cli.common import config_with_recipe

    args = build_parser("train").parse_args(
        [
            "train",
            "--dataset",
            "csv",
            "--table",
            "t.csv",
            "--classes",
            "0",
            "1",
            "--method",
            "lp-1st",
            "--epsilon",
            "1",
            "--out",
            "o",
        ]
    )
    config_with_recipe(args)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and "no tuned recipe" in lines[0]
    assert "labeldp tune" in lines[1] and "--grid" in lines[1] and "no extra epsilon" in lines[1]


# C. footguns


def test_a_table_run_shows_and_records_the_columns_it_trains_on(tmp_path, capsys) -> None:
    import json

    write_table(tmp_path / "t.csv", visit=np.zeros(60))
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--classes", "0", "1"]
    argv += ["--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--drop", "b", "--out", str(tmp_path / "run")]
    assert main(argv) == 0
    assert "features (3): a, c, visit" in capsys.readouterr().out
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["features"] == ["a", "c", "visit"]


def test_privatize_without_an_id_column_writes_each_rows_position(tmp_path, capsys) -> None:
    import pyarrow.parquet as pq

    frame = pd.DataFrame({"user": [5, 5, 7, 8], "answer": ["yes", "no", "no", "yes"]})
    frame.to_csv(tmp_path / "survey.csv", index=False)
    argv = ["privatize", "--table", str(tmp_path / "survey.csv"), "--label-column", "answer"]
    argv += ["--classes", "yes", "no", "--epsilon", "1", "--batch-rows", "3"]
    assert main([*argv, "--out", str(tmp_path / "release")]) == 0
    labels = pq.read_table(tmp_path / "release" / "labels.parquet").to_pandas()
    assert list(labels.columns) == ["row", "released_label"] and labels["row"].tolist() == [0, 1, 2, 3]
    assert "labels.parquet (row, released_label)" in capsys.readouterr().out
    assert main([*argv, "--id-column", "user", "--out", str(tmp_path / "by-user")]) == 2  # a duplicated id
    assert "user" in capsys.readouterr().err and not (tmp_path / "by-user").exists()


def test_each_demo_draws_afresh_into_a_new_folder_it_names(tmp_path, monkeypatch, capsys) -> None:
    import dataclasses

    from labeldp.cli import demo
    from labeldp.recipes import profiles

    def shortened(profile):  # two epochs: the demo's machinery, not its accuracy
        return dataclasses.replace(profile, config=dataclasses.replace(profile.config, train=TrainConfig(epochs=2)))

    listed = profiles.list_profiles
    monkeypatch.setattr(profiles, "list_profiles", lambda pattern=None: [shortened(p) for p in listed(pattern)])
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(demo, "DEMO_PROFILES", r"^digits/e8/lp-1st/run[0-1]$")
    folders = []
    for _ in range(2):
        assert main(["demo"]) == 0
        out = capsys.readouterr().out
        folder = out.splitlines()[0].removeprefix("demo runs in ").rstrip("/")
        assert (tmp_path / folder / "digits__e8__lp-1st__run0" / "summary.json").exists()
        assert f"runs: {folder}/" in out and " ± " in out and "(2)" in out  # mean ± std over the seeds
        folders.append(folder)
    assert folders[0] != folders[1]


def test_a_report_is_titled_by_the_tables_name_and_shows_no_spread_for_one_run() -> None:
    from labeldp.experiments.report import aggregate, format_report

    rows = [
        {"status": "done", "dataset": "csv", "table": "adult-train", "key": f"csv/e1/lp-1st/run{seed}",
         "method": "lp-1st", "target_epsilon": "1", "test_accuracy": accuracy}
        for seed, accuracy in ((0, "0.8"), (1, "0.82"))
    ] + [{"status": "done", "dataset": "csv", "table": "adult-train", "key": "csv/e2/lp-1st/run0",
          "method": "lp-1st", "target_epsilon": "2", "test_accuracy": "0.84"}]  # fmt: skip
    text = format_report(aggregate(rows))
    assert text.startswith("adult-train: test accuracy %") and "csv" not in text
    assert "81.00 ± 1.41 (2)" in text and "84.00 (1)" in text and "± 0.00" not in text


def test_downloading_movielens_without_a_network_is_one_line(tmp_path, monkeypatch, capsys) -> None:
    import urllib.error
    import urllib.request

    def offline(*args, **kwargs):
        assert kwargs.get("timeout"), "a download without a timeout can hang forever"
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert main(["download", "movielens", "--data-dir", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "could not download" in error and "Traceback" not in error and len(error.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_downloading_movielens_unpacks_it_into_place(tmp_path, monkeypatch) -> None:
    import io
    import urllib.request
    import zipfile

    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("ml-100k/u.data", "1\t1\t5\t0\n")
        archive.writestr("ml-100k/README", "research use only")

    class Response(io.BytesIO):
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    monkeypatch.setattr(urllib.request, "urlopen", lambda url, timeout=None: Response(buffer.getvalue()))
    assert main(["download", "movielens", "--data-dir", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ml-100k"]
    assert (tmp_path / "ml-100k" / "u.data").read_text() == "1\t1\t5\t0\n"


def test_ctrl_c_while_the_command_starts_is_one_line(monkeypatch, capsys) -> None:
    import labeldp.cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(labeldp.cli, "build_parser", interrupted)
    assert main(["train", "--out", "x"]) == 130
    assert capsys.readouterr().err.strip() == "labeldp: interrupted."


def test_profiles_with_no_match_say_so_and_list_the_prefixes(capsys) -> None:
    assert main(["profiles", "first-day-nothing"]) == 2  # (the README's test registers adult/ profiles)
    error = capsys.readouterr().err
    assert "no profile matches 'first-day-nothing'" in error and "digits/" in error and "movielens/" in error
    assert "--recipes" in error


def test_an_unknown_profile_points_to_recipes(capsys) -> None:
    assert main(["train", "--profile", "adult/e1/lp-1st/run0", "--out", "x"]) == 2
    error = capsys.readouterr().err
    assert "unknown profile 'adult/e1/lp-1st/run0'" in error and "--recipes" in error


def test_profiles_stay_in_columns_whatever_the_keys_length(tmp_path, capsys) -> None:
    recipes = tmp_path / "long_keys.py"
    recipes.write_text(
        "from labeldp.recipes import register\n"
        "from labeldp.runs import RunConfig\n"
        "register('firstday/a-rather-long-key-for-a-profile-of-ones-own/lp-1st/run0', "
        "RunConfig(method='lp-1st', epsilon=1.0))\n"
        "register('firstday/short/run0', RunConfig(method='lp-1st', epsilon=1.0))\n"
    )
    assert main(["profiles", "firstday/", "--recipes", str(recipes)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0].index(" v1 ") == lines[1].index(" v1 ")
    assert lines[0].index("lp-1st  epsilon") == lines[1].index("lp-1st  epsilon")


def test_a_missing_label_column_advises_label_column_not_classes(tmp_path, capsys) -> None:
    pd.DataFrame({"a": [1.0, 2.0], "converted": [0, 1]}).to_csv(tmp_path / "t.csv", index=False)
    argv = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--method", "lp-1st", "--epsilon", "1"]
    assert main([*argv, "--out", str(tmp_path / "run"), "--quiet"]) == 2
    error = capsys.readouterr().err
    assert "label column 'label' not found" in error and "--label-column" in error and "--classes" not in error
    assert "'converted'" in error


def test_a_run_refuses_a_folder_of_unrelated_files(tmp_path, capsys) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    argv = ["train", "--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--quiet"]
    assert main([*argv, "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "not empty and holds no labeldp run (notes.txt)" in error and "new or empty folder" in error
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["notes.txt"]
    (tmp_path / "empty").mkdir()
    assert main([*argv, "--out", str(tmp_path / "empty")]) == 0  # an empty folder, then the run's own: fine
    assert main([*argv, "--out", str(tmp_path / "empty")]) == 0


def test_a_grid_without_an_epsilon_says_how_a_grid_gives_one(tmp_path, capsys) -> None:
    assert main(["sweep", "--grid", "method=lp-1st,lp-2st", "--out", str(tmp_path / "s")]) == 2
    error = capsys.readouterr().err
    assert "epsilon=" in error and "--grid" in error and "--epsilon" not in error


def test_predict_on_a_run_that_is_no_tables_answers_in_the_command_lines_words(tmp_path, capsys) -> None:
    run = str(tmp_path / "run")
    assert main(["train", "--method", "lp-1st", "--epsilon", "1", "--epochs", "1", "--quiet", "--out", run]) == 0
    write_table(tmp_path / "t.csv")
    capsys.readouterr()
    assert main(["predict", run, "--table", str(tmp_path / "t.csv"), "--out", str(tmp_path / "s.csv")]) == 2
    error = capsys.readouterr().err
    assert "`labeldp predict` scores the rows of a table" in error and "trained on digits" in error
    assert "give its inputs as an array" not in error and not (tmp_path / "s.csv").exists()


# D. review findings


@pytest.mark.parametrize("has_filter", [True, False])
def test_cifar_archives_unpack_safely_with_or_without_tarfiles_filter(tmp_path, monkeypatch, has_filter) -> None:
    import io
    import tarfile

    from labeldp.data.cifar import extract_safely
    from labeldp.errors import DataError

    if not has_filter:  # Python 3.10 and 3.11 releases before the filter argument
        monkeypatch.delattr(tarfile, "data_filter", raising=False)

    def archive(name: str) -> tarfile.TarFile:
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as tar:
            member = tarfile.TarInfo(name)
            member.size = 2
            tar.addfile(member, io.BytesIO(b"ok"))
        buffer.seek(0)
        return tarfile.open(fileobj=buffer)

    (tmp_path / "data").mkdir()
    with archive("cifar-10-batches-py/data_batch_1") as tar:
        extract_safely(tar, tmp_path / "data")
    assert (tmp_path / "data" / "cifar-10-batches-py" / "data_batch_1").read_bytes() == b"ok"
    with archive("../outside") as tar, pytest.raises(DataError, match="unsafe"):
        extract_safely(tar, tmp_path / "data")
    assert not (tmp_path / "outside").exists()


def test_unsupported_models_are_a_labeldp_error_and_still_a_value_error() -> None:
    from labeldp.dpsgd.clipping import UnsupportedModelError
    from labeldp.errors import ConfigError, LabelDPError

    assert issubclass(UnsupportedModelError, LabelDPError) and issubclass(UnsupportedModelError, ConfigError)
    assert issubclass(UnsupportedModelError, ValueError)


def _requirement_name(requirement: str) -> str:
    import re

    return re.split(r"[\s<>=!~;\[(]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def test_every_library_the_package_imports_is_installed_with_it() -> None:
    """Each third-party module imported under src/labeldp comes from a distribution that pyproject.toml
    depends on, or one of theirs (joblib through scikit-learn): a module found only because a test
    extra or a neighbour installed it breaks a plain `pip install labeldp` (PyYAML for --grid-file)."""
    import ast
    import importlib.metadata as metadata
    import sys
    from pathlib import Path

    tomllib = pytest.importorskip("tomllib")
    root = Path(__file__).resolve().parents[1]
    declared = {
        _requirement_name(r) for r in tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]
    }
    reachable, todo = set(), list(declared)
    while todo:
        name = todo.pop()
        if name in reachable:
            continue
        reachable.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_requirement_name(r) for r in requires if "extra ==" not in r]
    modules = set()
    for path in (root / "src" / "labeldp").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                modules.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                modules.add(node.module.split(".")[0])
    providers = metadata.packages_distributions()
    third_party = sorted(m for m in modules if m != "labeldp" and m not in sys.stdlib_module_names and m in providers)
    missing = {
        m: providers[m] for m in third_party if not {d.lower().replace("_", "-") for d in providers[m]} & reachable
    }
    assert missing == {}


def test_movielens_holds_out_the_test_share_it_is_asked_for(tmp_path) -> None:
    from labeldp.data import load_dataset
    from test_regression_data import write_movielens

    write_movielens(tmp_path / "ml", ratings=100)
    assert len(load_dataset("movielens", tmp_path / "ml").y_test) == 20
    assert len(load_dataset("movielens", tmp_path / "ml", test_fraction=0.5).y_test) == 50


def test_a_test_share_that_leaves_no_training_row_is_a_clear_error(tmp_path) -> None:
    from labeldp.data import load_dataset
    from labeldp.errors import DataError
    from test_regression_data import write_movielens

    pd.DataFrame({"a": [1.0], "label": [0]}).to_csv(tmp_path / "one.csv", index=False)
    with pytest.raises(DataError, match="leaves none to train on"):
        load_dataset("csv", table=tmp_path / "one.csv", classes=("0", "1"))
    write_movielens(tmp_path / "ml", ratings=1)
    with pytest.raises(DataError, match="leaves none to train on"):
        load_dataset("movielens", tmp_path / "ml")


def test_a_datasets_aliases_name_it_too(monkeypatch) -> None:
    from labeldp.data import registry
    from labeldp.data.registry import Dataset, dataset_names, get_dataset, register_dataset
    from labeldp.errors import ConfigError

    monkeypatch.setattr(registry, "_DATASETS", dict(registry._DATASETS))  # the registry as it was, afterwards
    dataset = register_dataset(Dataset("first-day-blobs", "embedded", "x:y", aliases=("first-day-b",)))
    assert get_dataset("first-day-b") is dataset and "first-day-b" in dataset_names()
    with pytest.raises(ConfigError, match="already registered"):
        register_dataset(Dataset("first-day-other", "embedded", "x:y", aliases=("first-day-b",)))
    assert "first-day-other" not in dataset_names()


def test_an_unknown_augmentation_is_refused_whatever_the_inputs() -> None:
    from labeldp.errors import ConfigError
    from labeldp.training.augment import augment

    generator = torch.Generator().manual_seed(0)
    for inputs in (torch.zeros(4, 10), torch.zeros(4, 1, 8, 8)):
        with pytest.raises(ConfigError, match="unknown augmentation policy 'flip'"):
            augment(inputs, "flip", generator)
    assert augment(torch.ones(4, 10), "translate", generator).equal(torch.ones(4, 10))  # a table: unchanged


def test_a_private_selection_without_candidates_is_a_config_error() -> None:
    from labeldp.dpsgd.selection import plan_selection
    from labeldp.errors import ConfigError

    with pytest.raises(ConfigError, match="at least one candidate"):
        plan_selection([], 1000, epsilon=1.0, delta=1e-5, seed=0, holdout=0.2, mean=5.0, shape=1.0, score_noise=10.0)


@pytest.mark.parametrize("mean", [3.0, 1000.0])
def test_a_poisson_number_of_trials_has_its_mean_even_where_exp_underflows(mean) -> None:
    from labeldp.dpsgd.selection import draw_trials

    rng = np.random.default_rng(0)
    draws = np.array([draw_trials(rng, mean, float("inf")) for _ in range(400)])
    assert abs(draws.mean() - mean) < 5 * np.sqrt(mean / draws.size)
    assert abs(draws.var() - mean) < 0.3 * mean
