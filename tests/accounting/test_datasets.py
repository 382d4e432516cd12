"""The ledgers of groups of people across runs (accounting/datasets.py, people.py, spending.py): a group keyed by
its people or its name whatever the file, composed per person, a cap enforced before anything is drawn, appends
safe under concurrency and SIGKILL."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from labeldp.accounting.datasets import DatasetLedger, Spend, compose, ledgers
from labeldp.accounting.people import People, PeopleIndex
from labeldp.accounting.policy import BudgetPolicy, Guarantee, group_bound
from labeldp.accounting.spending import Source, Spending, charges
from labeldp.cli import main
from labeldp.errors import BudgetError, ConfigError


def _frame(rows: int = 300, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({"id": np.arange(rows), "x": rng.normal(size=rows).round(4), "y": rng.integers(0, 2, rows)})


def _privatize(table, out, *extra: str, label: str = "y") -> list[str]:
    return ["privatize", "--table", str(table), "--label-column", label, "--classes", "0", "1", "--epsilon", "1",
            "--out", str(out), *extra]  # fmt: skip


def _variants(frame: pd.DataFrame, folder) -> dict[str, tuple[str, str]]:
    """The innocent variants of a table a user makes: (path, label column) of each."""
    folder.mkdir()
    made = {
        "a renamed copy": (frame, "y", "survey_2024.csv"),
        "one row appended": (pd.concat([frame, frame.tail(1).assign(id=len(frame))]), "y", "grown.csv"),
        "one row removed": (frame.iloc[1:], "y", "shrunk.csv"),
        "a column added": (frame.assign(derived=frame["x"] * 2), "y", "derived.csv"),
        "a column dropped": (frame.drop(columns="x"), "y", "dropped.csv"),
        "the label column renamed": (frame.rename(columns={"y": "income"}), "income", "renamed.csv"),
        "a Parquet copy": (frame, "y", "copy.parquet"),
        "a pandas round trip": (pd.read_csv(folder.parent / "survey.csv"), "y", "round.csv"),
    }
    found = {}
    for name, (table, label, file) in made.items():
        path = folder / file
        table.to_parquet(path, index=False) if file.endswith(".parquet") else table.to_csv(path, index=False)
        found[name] = (str(path), label)
    return found


@pytest.mark.parametrize("people", [("--id-column", "id"), ("--dataset-name", "survey")], ids=["ids", "named"])
def test_every_innocent_variant_of_a_table_is_refused_past_the_cap(tmp_path, capsys, people) -> None:
    """Released at epsilon 1 under --total-epsilon 1.5: a second release of the same people from each variant
    (renamed, grown, shrunk, a column added or dropped, the label renamed, Parquet, a pandas round trip) is
    refused before anything is drawn, with ids or under one --dataset-name."""
    frame = _frame()
    frame.to_csv(tmp_path / "survey.csv", index=False)
    cap = ["--total-epsilon", "1.5", *people]
    assert main(_privatize(tmp_path / "survey.csv", tmp_path / "first", *cap)) == 0
    folder = BudgetPolicy.from_environment().folder
    before = {path.name: path.read_bytes() for path in folder.iterdir()}
    capsys.readouterr()
    for name, (path, label) in _variants(frame, tmp_path / "variants").items():
        out = tmp_path / "second" / name.replace(" ", "-")
        assert main(_privatize(path, out, *cap, label=label)) == 2, name
        error = capsys.readouterr().err
        assert "past --total-epsilon 1.5: refused before anything was drawn" in error, (name, error)
        assert not out.exists() and not out.parent.joinpath(f".{out.name}.partial").exists()
        assert {path.name: path.read_bytes() for path in folder.iterdir()} == before, name


def test_a_growing_table_charges_each_person_the_releases_that_hold_them(tmp_path, capsys) -> None:
    """30 daily releases of a table grown by 1 % new people each day: the people there since day 1 at 30 x
    epsilon, the newest at epsilon; labeldp budget shows the worst and how many people sit at it."""
    from labeldp.boundary import privatize_table
    from labeldp.randomness import NoiseSource

    base = 200
    for day in range(30):
        rows = int(base * 1.01**day)
        frame = _frame(rows, seed=day)
        privatize_table(frame, tmp_path / f"day{day}", label_column="y", id_column="id", classes=[0, 1],
                        epsilon=0.5, noise=NoiseSource(insecure_seed=day))  # fmt: skip
    ledger = DatasetLedger.of_people("id", BudgetPolicy.from_environment().folder)
    index = ledger.index()
    spends = {spend.release: spend for spend in ledger.spends()}
    each = {}
    for signature, keys in zip(index.signatures, index.keys):
        for key in keys.tolist():
            each[key] = compose([spends[release] for release in signature])[0]
    assert each[0] == pytest.approx(15.0) and each[base - 1] == pytest.approx(15.0)
    newest = int(base * 1.01**29) - 1
    assert each[newest] == pytest.approx(0.5)
    worst = ledger.worst()
    assert worst.epsilon == pytest.approx(15.0) and worst.at == base and worst.people == newest + 1
    capsys.readouterr()
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    worst = f"epsilon 15 per person of column 'id' spent in all by its worst person ({base} of {newest + 1} people)"
    assert worst in out
    assert "(30 releases" in out


def test_a_per_row_release_after_a_per_unit_one_is_charged_per_unit(tmp_path, capsys) -> None:
    """4 rows a user: a per-user release at epsilon 1, then one without --privacy-unit at 1 costs each user 4
    (their rows, group privacy): refused under a cap of 2, and 5 in all without a cap."""
    frame = _frame(120).assign(user=np.arange(120) % 30)
    frame.to_csv(tmp_path / "t.csv", index=False)
    per_user = ["--privacy-unit", "user", "--max-rows-per-unit", "4"]
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "a", *per_user, "--total-epsilon", "2")) == 0
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "b", "--total-epsilon", "2")) == 2
    assert "of column 'user'" in capsys.readouterr().err and not (tmp_path / "b").exists()
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "c")) == 0
    users = DatasetLedger.of_people("user", BudgetPolicy.from_environment().folder)
    assert users.worst().epsilon == pytest.approx(5.0) and users.worst().at == 30


def test_a_per_unit_release_after_per_row_ones_takes_the_table_s_earlier_releases_along(tmp_path, capsys) -> None:
    """The other order: a release of a table naming no people, then one per user; the first joins the users'
    ledger, each user charged for their rows in it, and the console says so."""
    frame = _frame(120).assign(user=np.arange(120) % 30)
    frame.to_csv(tmp_path / "t.csv", index=False)
    per_user = ["--privacy-unit", "user", "--max-rows-per-unit", "4"]
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "a")) == 0
    capsys.readouterr()
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "b", *per_user)) == 0
    assert (
        "nothing spent on it before; the table's earlier releases, put on it now, take its worst person to "
        "epsilon 4; this release takes its worst person to epsilon 5"
    ) in capsys.readouterr().err
    users = DatasetLedger.of_people("user", BudgetPolicy.from_environment().folder)
    assert users.worst().epsilon == pytest.approx(5.0)
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "c", *per_user)) == 0
    assert users.worst().epsilon == pytest.approx(6.0)  # the table's first release counted once


def test_dpsgd_is_charged_under_replace_one_by_dp_accounting() -> None:
    """A DP-SGD plan recorded at add-or-remove epsilon 1 is epsilon 1.6 or so for a replaced label: dp_accounting's
    PLD accountant under REPLACE_ONE says how much, and that is what the dataset ledgers compose."""
    import dp_accounting
    from dp_accounting.pld import pld_privacy_accountant

    from labeldp.accounting import DPSGD_RELATION, PrivacyLedger, calibrate_noise_multiplier, dpsgd_event

    sigma = calibrate_noise_multiplier(1.0, 1e-5, 0.01, 1000)
    ledger = PrivacyLedger(1000, DPSGD_RELATION)
    ledger.record(dpsgd_event(sigma, 0.01, 1000), np.ones(1000, dtype=bool), "dp-sgd")
    assert ledger.epsilon(1e-5) <= 1.0
    guarantee = Guarantee.of_ledger(ledger, 1e-5)
    accountant = pld_privacy_accountant.PLDAccountant(dp_accounting.NeighboringRelation.REPLACE_ONE)
    accountant.compose(dpsgd_event(sigma, 0.01, 1000))
    assert guarantee.epsilon == pytest.approx(accountant.get_epsilon(1e-5)) and 1.4 < guarantee.epsilon < 2.0
    assert group_bound(1.0, 1e-5, 2) == (2.0, pytest.approx(1e-5 * (1 + np.e)))


def _train(table, out, *extra: str) -> list[str]:
    return ["train", "--dataset", "csv", "--table", str(table), "--label-column", "y", "--classes", "0", "1",
            "--epochs", "1", "--tune-budget", "0", "--quiet", "--threads", "1", "--out", str(out), *extra]  # fmt: skip


def test_a_reference_run_without_privacy_is_kept_apart_and_never_lifts_the_cap(tmp_path, capsys) -> None:
    _frame().to_csv(tmp_path / "t.csv", index=False)
    assert main(_train(tmp_path / "t.csv", tmp_path / "reference", "--method", "non-private")) == 0
    for index in range(3):
        status = main(_privatize(tmp_path / "t.csv", tmp_path / f"r{index}", "--total-epsilon", "2"))
        assert status == (0 if index < 2 else 2)
    capsys.readouterr()
    assert main(["budget"]) == 0
    out = capsys.readouterr().out
    assert (
        "epsilon 2 per row spent in all (2 releases, composed, delta 0, replace-one label, 1 reference run(s) apart"
        in out
    )


def test_private_selection_is_capped_before_its_first_trial_and_recorded_at_replace_one(tmp_path, capsys) -> None:
    """tune --method dp-sgd after a release at epsilon 1 under a cap of 1.5: refused before any trial; without
    the cap it runs (the private test rows too) and the dataset ledger holds its replace-one group bound."""
    _frame(240).to_csv(tmp_path / "t.csv", index=False)
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "release")) == 0
    tune = _tune(tmp_path / "t.csv", tmp_path / "tuned", "--selection-mean", "1.5")
    assert main([*tune, "--total-epsilon", "1.5"]) == 2
    assert "refused before anything was drawn" in capsys.readouterr().err
    assert not (tmp_path / "tuned").exists() and not (tmp_path / ".tuned.selection").exists()
    assert main(tune) == 0
    table = DatasetLedger.of_table(_facts(tmp_path / "t.csv"), BudgetPolicy.from_environment().folder)
    selection = [spend for spend in table.spends() if spend.route == "tune"]
    assert len(selection) == 1 and 1.9 < selection[0].epsilon <= 2.0 and selection[0].delta > 1e-5
    assert json.loads((tmp_path / "tuned" / "summary.json").read_text())["dataset_ledger"]["releases"] == 2


def _tune(table, out, *extra: str) -> list[str]:
    return ["tune", "--dataset", "csv", "--table", str(table), "--label-column", "y", "--classes", "0", "1",
            "--method", "dp-sgd", "--epsilon", "1", "--batch-size", "32", "--epochs", "1", "--quiet", "--threads",
            "1", "--grid", "lr=0.1,0.2", "--out", str(out), *extra]  # fmt: skip


def _facts(path) -> dict:
    from labeldp.accounting.datasets import table_facts

    frame = pd.read_csv(path)
    return table_facts(path, "y", list(frame.columns), len(frame))


def test_a_selection_killed_during_its_trials_stays_on_the_ledger(tmp_path, monkeypatch) -> None:
    from labeldp.dpsgd import selection

    _frame(240).to_csv(tmp_path / "t.csv", index=False)

    def killed(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(selection, "_run_trials", killed)
    tune = _tune(tmp_path / "t.csv", tmp_path / "tuned")
    assert main(tune) == 130
    table = DatasetLedger.of_table(_facts(tmp_path / "t.csv"), BudgetPolicy.from_environment().folder)
    assert table.worst().epsilon == pytest.approx(2.0)
    assert all("time" not in json.loads(line) for line in table.path.read_text().splitlines())


def test_import_counts_a_folder_by_its_identity_once(tmp_path, monkeypatch, capsys) -> None:
    """Folders on the ledger already are skipped (1.5 stays 1.5); a folder made while the ledgers were
    elsewhere is counted once, however often it is imported, by an id from its content; a missing folder is
    an error."""
    _frame().to_csv(tmp_path / "t.csv", index=False)
    assert main(_train(tmp_path / "t.csv", tmp_path / "runs" / "run", "--method", "lp-1st", "--epsilon", "1")) == 0
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "runs" / "release", "--epsilon", "0.5")) == 0
    capsys.readouterr()
    for _ in range(2):
        assert main(["budget", "import", str(tmp_path / "runs")]) == 0
    out = capsys.readouterr().out
    assert out.count("on the ledger already") == 4 and "epsilon 1.5 per row spent in all (2 releases" in out
    elsewhere = ["--budget-dir", str(tmp_path / "elsewhere")]
    for _ in range(2):
        assert main(["budget", "import", str(tmp_path / "runs"), *elsewhere]) == 0
    out = capsys.readouterr().out
    assert "epsilon 1.5 per row spent in all (2 releases" in out and out.count("on the ledger already") == 2
    assert main(["budget", "import", str(tmp_path / "nowhere")]) == 2
    assert "no such folder" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (["--total-epsilon", "nan"], "--total-epsilon must be a finite number above 0"),
        (["--total-epsilon", "1e400"], "--total-epsilon must be a finite number above 0"),
        (["--total-epsilon", "-1"], "--total-epsilon must be a finite number above 0"),
    ],
)
def test_a_cap_that_is_no_number_is_refused(tmp_path, capsys, given, says) -> None:
    _frame().to_csv(tmp_path / "t.csv", index=False)
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "r", *given)) == 2
    assert says in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_the_environment_s_cap_and_folder_are_checked_at_the_edge(tmp_path, monkeypatch, capsys) -> None:
    _frame().to_csv(tmp_path / "t.csv", index=False)
    monkeypatch.setenv("LABELDP_TOTAL_EPSILON", "1,5")
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "r")) == 2
    assert "$LABELDP_TOTAL_EPSILON must be a number (a point for decimals: 1.5), got '1,5'" in capsys.readouterr().err
    monkeypatch.delenv("LABELDP_TOTAL_EPSILON")
    (tmp_path / "file").write_text("")
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "r", "--budget-dir", str(tmp_path / "file"))) == 2
    assert "is a file: name a folder" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_a_damaged_ledger_line_is_named_not_a_traceback(tmp_path, capsys) -> None:
    _frame().to_csv(tmp_path / "t.csv", index=False)
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "a")) == 0
    (ledger,) = ledgers(BudgetPolicy.from_environment().folder)
    line = json.loads(ledger.path.read_text().splitlines()[-1])
    with open(ledger.path, "a") as handle:
        handle.write(json.dumps({**line, "release": "other", "epsilon": None}) + "\n")
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "b")) == 2
    error = capsys.readouterr().err
    assert f"line 3 of {ledger.path} is damaged" in error and "delete the line" in error


def test_people_index_round_trips_and_takes_at_most_8_bytes_a_person(tmp_path) -> None:
    rng = np.random.default_rng(0)
    hashed = np.unique(rng.integers(-(2**63), 2**63 - 1, size=5000, dtype=np.int64))
    index = PeopleIndex().with_release("a", People.of_distinct("id", hashed))
    index = index.with_release("b", People.of_rows("id", np.concatenate([hashed[:100], [7, 7, -3]])))
    assert index.with_release("b", People.of_distinct("id", hashed)) is index  # a release's people are fixed
    index.save(tmp_path / "p.npz")
    back = PeopleIndex.load(tmp_path / "p.npz")
    assert back.signatures == index.signatures
    assert all(np.array_equal(x, y) for x, y in zip(back.keys, index.keys))
    assert sorted(map(tuple, back.signatures)) == [("a",), ("a", "b"), ("b",)]
    assert (tmp_path / "p.npz").stat().st_size <= 8 * back.count + 2000
    consecutive = PeopleIndex().with_release("a", People.of_distinct("id", np.arange(10**5)))
    consecutive.save(tmp_path / "q.npz")
    assert (tmp_path / "q.npz").stat().st_size < 2 * 10**5  # consecutive ids: a byte each


def test_composition_adds_pure_releases_exactly_and_composes_deltas() -> None:
    pure = [Spend(f"r{i}", "train", 1.0) for i in range(3)]
    assert compose(pure) == (3.0, 0.0)
    epsilon, delta = compose([Spend("a", "train", 1.0, 1e-5), Spend("b", "train", 1.0, 1e-5)])
    assert delta == 2e-5 and 1.5 < epsilon <= 2.0


_WRITER = textwrap.dedent("""
    import sys
    from labeldp.accounting.datasets import DatasetLedger, Spend
    ledger = DatasetLedger("shared", "a table", sys.argv[1])
    for i in range(100):
        ledger.record(Spend(f"{sys.argv[2]}-{i}", "train", 0.01))
        print(i, flush=True)
""")


def test_two_writers_at_once_one_killed_midway_lose_no_completed_release(tmp_path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(tmp_path), name], stdout=subprocess.PIPE, text=True, env=env
        )
        for name in ("a", "b")
    ]
    completed = -1
    for line in writers[1].stdout:  # b is killed after its 50th release is on the ledger
        completed = int(line)
        if completed == 49:
            writers[1].send_signal(signal.SIGKILL)
            break
    writers[1].wait()
    assert writers[0].wait(timeout=120) == 0
    ledger = DatasetLedger("shared", "a table", tmp_path)
    names = {spend.release for spend in ledger.spends()}
    assert {f"a-{i}" for i in range(100)} <= names and {f"b-{i}" for i in range(50)} <= names
    for line in ledger.path.read_text().splitlines():
        json.loads(line)  # every line parses
    with open(ledger.path, "a") as handle:  # a line cut short by a kill is skipped, and cut off by the next writer
        handle.write('{"release": "half')
    assert len(ledger.spends()) == len(names)
    ledger.record(Spend("after", "train", 0.01))
    assert all(json.loads(line) for line in ledger.path.read_text().splitlines())
    assert len(ledger.spends()) == len(names) + 1


def test_private_labels_of_one_named_dataset_share_its_ledger_with_the_command_line(tmp_path, monkeypatch) -> None:
    """A notebook cell run twice makes two sets of the same labels: named, they compose on one ledger, the
    command line's --dataset-name too, and a cap refuses the fit that would pass it before anything is drawn."""
    from sklearn.linear_model import LogisticRegression

    from labeldp import LabelDPClassifier, PrivateLabels

    frame = _frame()
    X, y = frame[["x"]].to_numpy(), frame["y"].to_numpy()
    for _ in range(2):  # the cell, run twice
        LabelDPClassifier(LogisticRegression(), epsilon=1.0).fit(X, PrivateLabels(y, [0, 1], dataset="survey"))
    frame.to_csv(tmp_path / "survey.csv", index=False)
    assert main(_privatize(tmp_path / "survey.csv", tmp_path / "r", "--dataset-name", "survey")) == 0
    survey = DatasetLedger.named("survey", BudgetPolicy.from_environment().folder)
    assert survey.worst().epsilon == 3.0
    labels = PrivateLabels(y, [0, 1], dataset="survey", policy=BudgetPolicy.from_environment(total_epsilon=3.5))
    with pytest.raises(BudgetError, match="past --total-epsilon 3.5"):
        LabelDPClassifier(LogisticRegression(), epsilon=1.0).fit(X, labels)
    assert not labels.ledger.entries and survey.worst().epsilon == 3.0


def test_a_check_reserves_its_spend_so_that_two_at_once_see_each_other(tmp_path) -> None:
    policy = BudgetPolicy(tmp_path, 1.5)
    source = Source(name="t")
    first = Spending(policy, source, "a", "train")
    first.reserve(Guarantee(1.0, 0.0), quiet=True)  # reserved, not yet drawn
    second = Spending(policy, source, "b", "train")
    with pytest.raises(BudgetError, match="epsilon 1 spent already"):
        second.reserve(Guarantee(1.0, 0.0), quiet=True)
    first.cancel()  # "a" failed before its draw
    second.reserve(Guarantee(1.0, 0.0), quiet=True)
    first.reserve(Guarantee(0.4, 0.0), quiet=True)  # a withdrawn release reserved anew
    assert second.primary.worst().epsilon == 1.4


def test_reservations_hold_until_a_run_finishes(tmp_path) -> None:
    """A run's line keeps its reserved spend between its releases (a check meanwhile sees the whole run)."""
    policy = BudgetPolicy(tmp_path)
    run = Spending(policy, Source(name="t"), "run", "train")
    run.reserve(Guarantee(1.0, 0.0), quiet=True)
    run.record(Guarantee(0.3, 0.0), final=False)  # its prior, drawn first
    assert run.primary.worst().epsilon == 1.0
    run.record(Guarantee(0.9, 0.0))  # finished, below its plan
    assert run.primary.worst().epsilon == 0.9


def test_a_named_group_follows_one_column_of_people(tmp_path) -> None:
    policy = BudgetPolicy(tmp_path)
    keys = np.arange(10)
    with_users = Source(name="ads", columns=("user",), keys=lambda column: keys, unit="user")
    Spending(policy, with_users, "a", "train").reserve(Guarantee(1.0, 0.0, "user"), quiet=True)
    with pytest.raises(ConfigError, match="follows the people of column 'user'; this release names 'household'"):
        charges(policy, Source(name="ads", columns=("household",), keys=lambda c: keys, unit="household"))
    with pytest.raises(ConfigError, match="which this release has not"):
        charges(policy, Source(name="ads"))
    Spending(policy, Source(name="plain"), "b", "train").reserve(Guarantee(1.0, 0.0), quiet=True)
    with pytest.raises(ConfigError, match="releases that named no people"):
        charges(policy, Source(name="plain", columns=("user",), keys=lambda column: keys, unit="user"))


def test_a_copied_folder_is_a_release_of_its_own_and_a_finished_one_reserves_nothing(tmp_path, capsys) -> None:
    _frame().to_csv(tmp_path / "t.csv", index=False)
    train = _train(tmp_path / "t.csv", tmp_path / "a", "--method", "lp-1st")
    assert main([*train, "--epsilon", "1"]) == 0
    ledger = DatasetLedger.of_table(_facts(tmp_path / "t.csv"), BudgetPolicy.from_environment().folder)
    before = ledger.path.read_bytes()
    assert main([*train, "--epsilon", "3"]) == 2  # a finished run of another configuration
    assert ledger.path.read_bytes() == before
    shutil.copytree(tmp_path / "a", tmp_path / "b")
    (tmp_path / "b" / "summary.json").unlink()
    train[train.index(str(tmp_path / "a"))] = str(tmp_path / "b")
    assert main([*train, "--epsilon", "1"]) == 0  # the copy trains again from its release
    assert len(ledger.spends()) == 2 and ledger.worst().epsilon == 2.0  # counted again: never fewer


def test_a_sweep_of_seeds_composes_and_a_later_run_is_refused_past_the_total(tmp_path, capsys) -> None:
    """Three seeds at epsilon 1 on one table: each run says 1, the dataset 3; a train afterwards shows 4;
    with --total-epsilon 3.5 the next is refused before any draw (no run folder, the ledger unchanged),
    also from another process."""
    _frame().to_csv(tmp_path / "t.csv", index=False)
    grid = ["dataset=csv", f"table={tmp_path / 't.csv'}", "label_column=y", "classes=0:1", "method=lp-1st"]
    grid += ["epsilon=1", "epochs=1", "seed=0,1,2"]
    assert main(["sweep", "--grid", *grid, "--quiet", "--threads", "1", "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    results = pd.read_csv(tmp_path / "s" / "results.csv")
    assert results["epsilon"].tolist() == [1.0, 1.0, 1.0] and results["dataset_epsilon"].tolist() == [3.0] * 3
    assert "epsilon 3 per row spent in all by 3 releases, composed" in out
    train = _train(tmp_path / "t.csv", tmp_path / "fourth", "--method", "lp-1st", "--epsilon", "1")
    assert main(train) == 0
    assert "epsilon 4 per row spent in all (4 releases, composed" in capsys.readouterr().out
    ledger = DatasetLedger.of_table(_facts(tmp_path / "t.csv"), BudgetPolicy.from_environment().folder)
    before = ledger.path.read_bytes()
    capped = ["--method", "lp-1st", "--epsilon", "1", "--total-epsilon", "3.5"]
    fifth = _train(tmp_path / "t.csv", tmp_path / "fifth", *capped)
    fifth.remove("--quiet")
    assert main(fifth) == 2
    assert "past --total-epsilon 3.5: refused before anything was drawn" in capsys.readouterr().err
    assert not (tmp_path / "fifth").exists() and ledger.path.read_bytes() == before
    sixth = _train(tmp_path / "t.csv", tmp_path / "sixth", *capped)
    command = [sys.executable, "-m", "labeldp", *sixth]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert result.returncode == 2 and "refused before anything was drawn" in result.stderr
    assert not (tmp_path / "sixth").exists() and ledger.path.read_bytes() == before
    assert main([*train, "--total-epsilon", "3.5"]) == 0  # resumes


def test_a_release_of_100002_declared_classes_states_its_channel_in_two_numbers(tmp_path) -> None:
    """It ended in a MemoryError after its reservation (a K x K matrix in release.json)."""
    _frame().to_csv(tmp_path / "t.csv", index=False)
    classes = [str(value) for value in range(100_002)]
    argv = ["privatize", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes", *classes]
    assert main([*argv, "--epsilon", "1", "--out", str(tmp_path / "r")]) == 0
    channel = json.loads((tmp_path / "r" / "release.json").read_text())["channel"]
    assert "matrix" not in channel and channel["keep"] + 100_001 * channel["each_other"] == pytest.approx(1.0)


@pytest.mark.parametrize("method", ["marginals", "dp-sgd"])
def test_a_table_run_whose_auto_tune_was_declined_resumes_once_its_final_files_are_gone(tmp_path, method) -> None:
    _frame().to_csv(tmp_path / "t.csv", index=False)
    train = ["train", "--dataset", "csv", "--table", str(tmp_path / "t.csv"), "--label-column", "y", "--classes",
             "0", "1", "--method", method, "--epsilon", "1", "--quiet", "--out", str(tmp_path / "run")]  # fmt: skip
    assert main(train) == 0
    assert json.loads((tmp_path / "run" / "auto_tune.json").read_text())["chosen"] is None
    for name in ("summary.json", "model.pt"):
        (tmp_path / "run" / name).unlink(missing_ok=True)
    assert main(train) == 0 and (tmp_path / "run" / "summary.json").exists()
    table = DatasetLedger.of_table(_facts(tmp_path / "t.csv"), BudgetPolicy.from_environment().folder)
    assert len(table.spends()) == 1  # resumed from its release: no second


@pytest.mark.parametrize(
    ("first", "second"),
    [
        (("--dataset-name", "N"), ()),
        (("--dataset-name", "N"), ("--id-column", "id")),
        (("--dataset-name", "N", "--id-column", "id"), ("--id-column", "id")),
        (("--id-column", "id"), ("--dataset-name", "N")),
    ],
    ids=["named-then-not", "named-then-ids", "named-ids-then-ids", "ids-then-named"],
)
def test_the_same_table_under_another_name_or_none_is_still_capped(tmp_path, first, second) -> None:
    """From a review: a release named one way, then the same table named another way or not at all, drew twice
    under a cap of 1.5 (each group said 1.0). A table's own ledger holds every release of it."""
    _frame().to_csv(tmp_path / "t.csv", index=False)
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "a", *first, "--total-epsilon", "1.5")) == 0
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "b", *second, "--total-epsilon", "1.5")) == 2
    assert not (tmp_path / "b").exists()


def test_the_table_s_earlier_releases_charge_each_person_all_their_rows(tmp_path) -> None:
    """From a review: a release of every row, then one per user keeping one row a user: the first counted each
    user once (the second's rows); a user with 3 rows spent 3 in it."""
    frame = _frame(60).assign(user=[0, 0, 0] + list(range(1, 58)))
    frame.to_csv(tmp_path / "t.csv", index=False)
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "a")) == 0
    assert (
        main(_privatize(tmp_path / "t.csv", tmp_path / "b", "--privacy-unit", "user", "--max-rows-per-unit", "1")) == 0
    )
    users = DatasetLedger.of_people("user", BudgetPolicy.from_environment().folder)
    assert users.worst().epsilon == pytest.approx(4.0)  # (each user charged as the one of most rows: never fewer)


def test_the_cap_holds_for_every_person_a_release_touches_not_only_the_worst(tmp_path) -> None:
    """From a review: ids 0-9 at epsilon 5, then ids 10-49 at 4 under a cap of 3 was drawn (the worst stayed 5)."""
    policy = BudgetPolicy(tmp_path / "budget")
    ids = np.arange(50)
    facts = {"label_column": "y", "columns": ["id", "y"], "rows": 50, "described": "t"}

    def release(name: str, rows: np.ndarray, epsilon: float, cap: float | None) -> None:
        source = Source(columns=("id",), keys=lambda column: ids[rows], id_column="id")
        Spending(BudgetPolicy(policy.folder, cap), source, name, "privatize").reserve(Guarantee(epsilon, 0.0), True)

    release("a", np.arange(10), 5.0, None)
    with pytest.raises(BudgetError, match="take 40 of its people to epsilon 4"):
        release("b", np.arange(10, 50), 4.0, 3.0)
    release("c", np.arange(10, 50), 3.0, 3.0)  # within the cap for each person it holds
    assert facts  # (the table's facts play no part here)


def test_two_releases_checked_at_once_see_each_other_whatever_their_groups(tmp_path) -> None:
    """From a review: one release naming ids and one naming none, checked at once, both drew under a cap of
    1.5 (each group was named before the other existed). One lock for the budget folder makes them one step each."""
    import threading

    _frame().to_csv(tmp_path / "t.csv", index=False)
    barrier, outcomes = threading.Barrier(2), {}
    from labeldp.accounting import spending

    reserve = spending.Spending.reserve

    def waiting(self, *args, **kwargs):
        barrier.wait(timeout=60)
        return reserve(self, *args, **kwargs)

    def run(name: str, *extra: str) -> None:
        outcomes[name] = main(_privatize(tmp_path / "t.csv", tmp_path / name, *extra, "--total-epsilon", "1.5"))

    spending.Spending.reserve = waiting
    try:
        threads = [threading.Thread(target=run, args=args) for args in (("a", "--id-column", "id"), ("b",))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        spending.Spending.reserve = reserve
    assert sorted(outcomes.values()) == [0, 2]


def test_a_dp_sgd_run_reserves_what_its_ledger_records(tmp_path) -> None:
    """From a review: DP-SGD reserved the group bound of two changes (16 at epsilon 8) and recorded its steps
    accounted under replace-one (19.1), past a cap of 17 that the reservation had passed."""
    _frame(200).to_csv(tmp_path / "t.csv", index=False)
    train = _train(tmp_path / "t.csv", tmp_path / "run", "--method", "dp-sgd", "--epsilon", "2", "--batch-size", "40")
    assert main(train) == 0
    table = DatasetLedger.of_table(_facts(tmp_path / "t.csv"), BudgetPolicy.from_environment().folder)
    lines = [json.loads(line) for line in table.path.read_text().splitlines()]
    reserved, final = lines[0]["epsilon"], lines[-1]["epsilon"]
    assert lines[0]["reserved"] and not lines[-1]["reserved"] and final == pytest.approx(reserved) and final > 2


def test_unsigned_ids_past_2_63_are_one_person_in_parquet_and_csv(tmp_path, capsys) -> None:
    """From a review: Parquet's uint64 ids wrapped to negative int64 while CSV hashed them: two people each."""
    ids = np.array([2**63 + 1, 2**63 + 2, 7, 9], dtype=np.uint64)
    frame = pd.DataFrame({"id": ids, "y": [0, 1, 0, 1]})
    frame.to_parquet(tmp_path / "t.parquet", index=False)
    frame.astype({"id": str}).to_csv(tmp_path / "t.csv", index=False)
    assert main(_privatize(tmp_path / "t.parquet", tmp_path / "a", "--id-column", "id")) == 0
    assert main(_privatize(tmp_path / "t.csv", tmp_path / "b", "--id-column", "id", "--total-epsilon", "1.5")) == 2


def test_two_releases_of_one_configuration_are_imported_as_two(tmp_path, capsys) -> None:
    """From a review: their release.json and ledger.json are alike; their released labels are not."""
    _frame().to_csv(tmp_path / "t.csv", index=False)
    elsewhere = ["--budget-dir", str(tmp_path / "elsewhere")]
    for name in ("a", "b"):
        assert main(_privatize(tmp_path / "t.csv", tmp_path / "old" / name, *elsewhere)) == 0
        (tmp_path / "old" / name / ".dataset-release").unlink()  # as folders written before the ledgers
    capsys.readouterr()
    assert main(["budget", "import", str(tmp_path / "old")]) == 0
    assert "epsilon 2 per row spent in all (2 releases" in capsys.readouterr().out


def test_a_run_interrupted_after_its_draw_stays_on_the_ledger(tmp_path, monkeypatch) -> None:
    """From a review: Ctrl-C after the noisy labels were saved, before the ledgers heard of them, withdrew the
    reservation: the release written, counted for nothing."""
    from labeldp.runs import context

    _frame().to_csv(tmp_path / "t.csv", index=False)

    def interrupted(self, final=True):
        raise KeyboardInterrupt

    monkeypatch.setattr(context.RunContext, "record_on_dataset", interrupted)
    assert main(_train(tmp_path / "t.csv", tmp_path / "run", "--method", "lp-1st", "--epsilon", "1")) == 130
    table = DatasetLedger.of_table(_facts(tmp_path / "t.csv"), BudgetPolicy.from_environment().folder)
    assert table.worst().epsilon == 1.0 and list((tmp_path / "run" / "noisy_labels").glob("*.npz"))
