"""The documentation, run: every `labeldp` command of the bash blocks and every Python block of
README.md and of each page under docs/, page by page in the order a reader meets them, each page on
fresh small fixtures in the places the pages name (``~/data/mnist``, ``~/data/adult``,
``conversions.parquet``...), so that the documentation cannot drift from the code.

A block fenced as ``bash`` or ``python`` is run; any other block (```` ``` ```` alone, ``text``) is
output or a file listing, shown and not run. A page's blocks share its fixtures and its working folder,
and its Python blocks one namespace, as in one interpreter session: a page runs on its own, from its
first block.

To stay fast, every run trains one epoch per stage in batches of at most 64 (the pages show what
the real settings give),
a sweep runs its jobs in this process, and a grid's seeds and epsilons and an audit's canaries are thinned
(:data:`FLAG_VALUES`,
:data:`GRID_VALUES`).
A Python block's ``# -> VALUE`` comments are checked, in order, against what it prints (a value of
several words against as many printed words). A block that
starts with ``# NAME.py`` is a file the page asks the reader to save: it is written, not run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import pickle
import re
import shlex
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from labeldp.cli import main
from labeldp.models.names import FITTED_MODELS
from labeldp.recipes import profile_registry
from labeldp.runs import RunConfig
from tests.helpers import make_mnist_folder, write_movielens

ROOT = Path(__file__).resolve().parents[1]
#: the pages whose blocks run: the README, then every page of the site
PAGES = ["README.md", *sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.md"))]

#: the beginnings of command lines the suite does not run itself, and why
NOT_RUN = {
    "make ": "make demo and make test install, then run the demo or this suite",
    "python3 -m venv": "the installation this suite runs in",
    ". .venv/bin/activate": "the installation this suite runs in",
    "pip install": "the installation this suite runs in",
    ".venv/bin/python -m pytest": "this suite",
    "labeldp download": "needs the network (tests/data/test_idx.py checks its error without one)",
    "python benchmarks/": "benchmarks, on the full datasets",
    "torchrun ": "several processes: tests/test_distributed.py runs labeldp under torchrun",
}

#: rewrites that keep the pages' commands small: flags whose value is replaced (None: the flag is
#: dropped, so a sweep runs its jobs in this process), and grid arguments replaced whole
FLAG_VALUES = {"--workers": None, "--canaries": "50"}
GRID_VALUES = [(r"^seed=.*$", "seed=0"), (r"^epsilon=1,2,4,8$", "epsilon=1,8")]


def page_blocks(page: str) -> list[tuple[str, int, str]]:
    """(language, first line, text) of each fenced bash or python block of a page."""
    text = (ROOT / page).read_text()
    return [
        (m.group(1), text[: m.start()].count("\n") + 2, m.group(2))
        for m in re.finditer(r"^```(bash|python)\n(.*?)^```", text, re.S | re.M)
    ]


def commands(block: str) -> list[str]:
    """The command lines of a bash block, continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", block)
    return [
        line.split(" #")[0].strip()
        for line in joined.splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def shrunk(argv: list[str]) -> list[str]:
    out: list[str] = []
    for index, arg in enumerate(argv):
        flag = argv[index - 1] if index else ""
        if arg in FLAG_VALUES and FLAG_VALUES[arg] is None:
            continue
        if flag in FLAG_VALUES:
            if FLAG_VALUES[flag] is not None:
                out.append(FLAG_VALUES[flag])
            continue
        out.append(next((new for pattern, new in GRID_VALUES if re.match(pattern, arg)), arg))
    return out


def expected_outputs(block: str) -> list[str]:
    return [m.group(1).split(" (")[0].strip() for m in re.finditer(r"#\s*->\s*(.+)$", block, re.M)]


def _survey(rng: np.random.Generator, n: int) -> pd.DataFrame:
    age = rng.integers(17, 90, n)
    education = rng.choice(["Bachelors", "HS-grad", "Masters", "Some-college"], n)
    hours = rng.integers(10, 80, n)
    rich = rng.random(n) < 1 / (1 + np.exp(-(age - 40) / 10 - (education == "Masters") - (hours - 40) / 20))
    return pd.DataFrame(
        {
            "age": age,
            "workclass": rng.choice(["Private", "State-gov", None], n),
            "education": education,
            "hours-per-week": hours,
            "income": np.where(rich, ">50K", "<=50K"),
        }
    )


def _hillstrom(rng: np.random.Generator, work: Path) -> None:
    customers = pd.DataFrame(
        {
            "recency": rng.integers(1, 13, 500),
            "history": rng.gamma(2, 120, 500).round(2),
            "mens": rng.integers(0, 2, 500),
            "zip_code": rng.choice(["Urban", "Rural"], 500),
            "channel": rng.choice(["Web", "Phone"], 500),
        }
    )
    bought = rng.random(500) < 0.05
    customers.to_csv(work / "customers.csv", index=False)
    customers.assign(
        visit=(rng.random(500) < 0.15) | bought,
        conversion=bought,
        spend=np.where(bought, rng.gamma(2, 60, 500).round(2), 0.0),
    ).to_csv(work / "hillstrom.csv.gz", index=False)


def _released_once_tables(rng: np.random.Generator, work: Path) -> None:
    """``events/`` (a folder of Parquet parts, as Spark writes) and ``survey.parquet`` with prior columns."""
    (work / "events").mkdir()
    for part in range(2):
        pd.DataFrame(
            {
                "impression_id": np.arange(part * 200, (part + 1) * 200),
                "channel": rng.choice(["web", "mail"], 200),
                "converted": (rng.random(200) < 0.1).astype(int),
            }
        ).to_parquet(work / "events" / f"part-{part:05d}.parquet")
    prior = rng.dirichlet(np.ones(3), 300)
    pd.DataFrame(
        {
            "respondent": [f"r{index}" for index in range(300)],
            "age": rng.integers(18, 90, 300),
            "region": rng.choice(["north", "south"], 300),
            "answer": rng.choice(["yes", "no", "maybe"], 300),
            "p_yes": prior[:, 0],
            "p_no": prior[:, 1],
            "p_maybe": prior[:, 2],
        }
    ).to_parquet(work / "survey.parquet")


def _cifar10(rng: np.random.Generator, folder: Path) -> None:
    """CIFAR-10's python pickles, 4 images a batch."""
    folder.mkdir(parents=True)
    for name in [f"data_batch_{index}" for index in range(1, 6)] + ["test_batch"]:
        batch = {b"data": rng.integers(0, 256, (4, 3072), dtype=np.uint8), b"labels": rng.integers(0, 10, 4).tolist()}
        (folder / name).write_bytes(pickle.dumps(batch))


@pytest.fixture
def reader(tmp_path, monkeypatch):
    """A reader's machine: HOME and the working folder hold the data the pages name. A page's own
    recipes are registered for that page only."""
    home, work = tmp_path / "home", tmp_path / "work"
    monkeypatch.setenv("HOME", str(home))
    work.mkdir()
    monkeypatch.chdir(work)
    for folder in (home / "data" / "mnist", work / "data" / "mnist"):
        make_mnist_folder(folder, n_train=300, n_test=60)
    rng = np.random.default_rng(0)
    (home / "data" / "adult").mkdir(parents=True)
    # folds of 300 rows: with 120, one release in about a hundred left a fold with no AUC estimate at epsilon 1
    _survey(rng, 1500).to_csv(home / "data" / "adult" / "adult-train.csv.gz", index=False)
    _survey(rng, 150).to_csv(home / "data" / "adult" / "adult-test.csv.gz", index=False)
    ads = pd.DataFrame({"impressions": rng.poisson(3, 400), "channel": rng.choice(["web", "mail"], 400)})
    ads["converted"] = (rng.random(400) < 0.1 + 0.05 * ads["impressions"].clip(0, 5)).astype(int)
    ads.to_parquet(work / "conversions.parquet")
    users = np.repeat(np.arange(60), rng.integers(1, 10, 60))  # users of 1 to 9 impressions
    pd.DataFrame(
        {
            "user": users,
            "site": rng.choice(["news", "shop", "video"], users.size),
            "hour": rng.integers(0, 24, users.size),
            "converted": (rng.random(users.size) < 0.2).astype(int),
        }
    ).to_parquet(work / "impressions.parquet")
    write_movielens(home / "data" / "movielens", users=20, items=25, ratings=300)
    _hillstrom(rng, work)
    _released_once_tables(rng, work)
    _cifar10(rng, home / "data" / "cifar10" / "cifar-10-batches-py")

    resolved = RunConfig.resolved

    def one_epoch(config: RunConfig) -> RunConfig:
        config = resolved(config)
        if config.model in FITTED_MODELS:  # no epochs: fitted with its own settings
            return config
        config = dataclasses.replace(
            config, train=dataclasses.replace(config.train, epochs=1, batch_size=min(config.train.batch_size, 64))
        )
        if config.method == "pate":
            config = dataclasses.replace(config, options=dataclasses.replace(config.options, teacher_epochs=1))
        return config

    monkeypatch.setattr(RunConfig, "resolved", one_epoch)
    profile_registry.list_profiles()  # the built-in profile_registry, registered before the page's own are set aside
    monkeypatch.setattr(profile_registry, "_REGISTRY", dict(profile_registry._REGISTRY))
    monkeypatch.setattr(profile_registry, "_LOADED_RECIPES", set(profile_registry._LOADED_RECIPES))
    yield work
    torch.set_num_threads(1)  # as conftest sets it; `labeldp train` sets its own


@pytest.mark.parametrize("page", PAGES)
def test_a_page_lists_only_commands_it_can_run(page: str) -> None:
    for language, line, block in page_blocks(page):
        if language == "bash":
            for command in commands(block):
                assert command.startswith("labeldp ") or any(command.startswith(p) for p in NOT_RUN), (
                    f"{page} line {line}: {command!r} is neither a labeldp command nor in NOT_RUN"
                )


def _run_command(command: str, where: str, capsys) -> None:
    argv = shrunk([str(Path(arg).expanduser()) if arg.startswith("~") else arg for arg in shlex.split(command)[1:]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            code = main(argv)
        except SystemExit as exit_:  # --help
            code = exit_.code
    printed = capsys.readouterr()
    assert code == 0, f"{where}: `{command}` exited {code}:\n{printed.err[-2000:]}"


def _run_python(block: str, where: str, namespace: dict) -> None:
    first = block.splitlines()[0]
    if re.fullmatch(r"# [\w.]+\.py", first):
        Path(first[2:]).write_text(block)
        return
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exec(compile(block, where, "exec"), namespace)
    expected = [token for value in expected_outputs(block) for token in value.split()]
    printed = stdout.getvalue().split()[-len(expected) :] if expected else []
    assert printed == expected, f"{where} printed {stdout.getvalue()!r}, the page says {expected}"


@pytest.mark.filterwarnings("ignore:.*match no published checksum")
@pytest.mark.parametrize("page", PAGES)
def test_every_command_and_snippet_of_a_page_runs(page: str, reader, capsys) -> None:
    namespace = {"__name__": "__docs__"}  # a page's Python blocks run in one session, in order
    for language, line, block in page_blocks(page):
        where = f"{page} block at line {line}"
        if language == "python":
            _run_python(block, where, namespace)
            continue
        for command in commands(block):
            if command.startswith("labeldp ") and not any(command.startswith(p) for p in NOT_RUN):
                _run_command(command, where, capsys)
