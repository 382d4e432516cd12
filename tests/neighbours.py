"""Every route a user can take with private labels, registered once for the neighbour test
(tests/test_neighbours.py). A new command, estimator or public entry point that reads labels joins
:data:`ROUTES`; one that reads none is named in :data:`EXCLUDED` with the reason.

A route writes its inputs into the current folder from a table (:func:`table`), runs, and returns an
exit code (the CLI's) or None. Paths are relative, so that two neighbours' outputs can be compared.
"""

from __future__ import annotations

import hashlib
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import numpy as np
import pandas as pd

from labeldp.cli import main
from labeldp.data.idx import CHECKSUMS, FILES
from tests.helpers import write_idx, write_movielens

#: the declared classes: numbers, a word, and a missing-value spelling
CLASSES = ("0", "1", "refused", "None")
BINARY = ("0", "refused")
ROWS = 120
#: the row whose label a neighbour changes (labelled 0 in the base table)
ROW = 8
#: the files a route writes from the table, its inputs: never compared
INPUTS = {"t.csv", "t.parquet", "test.csv", "ml/u.data", *(f"images/{stem}" for stem in FILES.values())}
INPUTS |= {f"cifar/data_batch_{i}" for i in range(1, 6)} | {"cifar/test_batch"}


def table(labels: np.ndarray | None = None) -> pd.DataFrame:
    """The base table: ids, 30 users of 4 rows, two public features; labels 0 and 1 (numbers)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "id": np.arange(ROWS),
            "user": rng.permutation(np.arange(ROWS) % 30),
            "x": rng.normal(size=ROWS).round(3),
            "site": [f"s{i % 5}" for i in range(ROWS)],
            "y": np.arange(ROWS) % 2,
        }
    )
    if labels is not None:
        frame["y"] = labels
    return frame


def write(frame: pd.DataFrame, path: str) -> None:
    """The table as CSV or Parquet (a label column of mixed values written as text in Parquet)."""
    if path.endswith(".parquet"):
        if frame["y"].dtype == object:
            frame = frame.assign(y=frame["y"].astype(str))
        frame.to_parquet(path, index=False)
    else:
        frame.to_csv(path, index=False)


@dataclass(frozen=True)
class Route:
    """One way a user's labels go through labeldp.

    ``covers``: the CLI commands (``"train"``, ``"hashed train"``) and public names (``"fit_hashed"``)
    it exercises. ``run(frame)``: write the inputs from ``frame`` and run. ``setup()``: what runs first on
    the base table, unobserved (the run an audit or a prediction starts from). ``units``/``ids``: the route
    takes a privacy unit / an id column, so one unit's labels changing and a duplicated row are tried.
    ``replay``: how the part after the release is replayed with the true labels replaced: ``"folder"``
    (rerun from the saved release, the training outputs removed), ``"draws"`` (the in-memory releases
    recorded and handed back), or the reason there is nothing after the release to replay.
    """

    name: str
    covers: tuple[str, ...]
    run: Callable[[pd.DataFrame], int | None]
    classes: tuple[str, ...] = CLASSES
    units: bool = False
    ids: bool = False
    replay: str = "folder"
    releases: bool = True
    setup: Callable[[], None] | None = None
    outputs: tuple[str, ...] = field(default=("summary.json", "model.pt", "metrics.jsonl", "checkpoints"))


def _cli(argv: list[str], path: str) -> Callable[[pd.DataFrame], int]:
    def run(frame: pd.DataFrame) -> int:
        write(frame, path)
        return main(argv)

    return run


def _table_options(path: str, classes=CLASSES) -> list[str]:
    return ["--dataset", "csv", "--table", path, "--label-column", "y", *(["--classes", *classes] if classes else [])]


_QUICK = ["--epochs", "1", "--batch-size", "32", "--insecure-noise-seed", "5", "--threads", "1", "--quiet"]
_TRAIN = ["train", *_table_options("t.csv"), "--method", "lp-1st", "--epsilon", "1", *_QUICK]


def _images(argv: list[str]) -> Callable[[pd.DataFrame], int]:
    """Run ``argv`` on an IDX folder ``images`` of public random images, the table's labels as their classes, the
    base table's labels file taken for MNIST's published one (a changed label then changes its checksum)."""

    def run(frame: pd.DataFrame) -> int:
        folder = Path("images")
        folder.mkdir(exist_ok=True)
        rng = np.random.default_rng(0)
        write_idx(folder / FILES["train_images"], rng.integers(0, 256, (len(frame), 28, 28)), compress=False)
        write_idx(folder / FILES["test_images"], rng.integers(0, 256, (20, 28, 28)), compress=False)
        write_idx(folder / FILES["test_labels"], np.arange(20) % 10, compress=False)
        labels = folder / FILES["train_labels"]
        write_idx(labels, np.arange(len(frame)) % 2, compress=False)
        published = hashlib.md5(labels.read_bytes()).hexdigest()
        write_idx(labels, frame["y"].to_numpy(dtype=np.int64), compress=False)
        with mock.patch.dict(CHECKSUMS["mnist"], train_labels=(published,)):
            return main(argv)

    return run


def _cifar(argv: list[str]) -> Callable[[pd.DataFrame], int]:
    """Run ``argv`` on a CIFAR-10 folder ``cifar`` of public random images in five batches, the table's labels
    as their classes."""

    def run(frame: pd.DataFrame) -> int:
        folder = Path("cifar")
        folder.mkdir(exist_ok=True)
        rng = np.random.default_rng(0)
        for index, labels in enumerate(np.array_split(frame["y"].to_numpy(dtype=np.int64), 5), start=1):
            batch = {b"data": rng.integers(0, 256, (len(labels), 3072), dtype=np.uint8), b"labels": labels.tolist()}
            (folder / f"data_batch_{index}").write_bytes(pickle.dumps(batch))
        test = {b"data": rng.integers(0, 256, (20, 3072), dtype=np.uint8), b"labels": list(range(10)) * 2}
        (folder / "test_batch").write_bytes(pickle.dumps(test))
        return main(argv)

    return run


def _ratings(argv: list[str]) -> Callable[[pd.DataFrame], int]:
    """Run ``argv`` on a MovieLens folder ``ml`` whose 120 public (user, item) pairs are rated with the table's
    labels."""

    def run(frame: pd.DataFrame) -> int:
        if not Path("ml").exists():
            write_movielens(Path("ml"), users=30, items=8, ratings=len(frame))
        data = pd.read_csv("ml/u.data", sep="\t", header=None)
        data[2] = frame["y"].to_numpy(dtype=np.int64)
        data.to_csv("ml/u.data", sep="\t", header=False, index=False)
        return main(argv)

    return run


def _train_first() -> None:
    write(table(), "t.csv")
    assert main([*_TRAIN, "--tune-budget", "0", "--out", "run"]) == 0


def _estimator(make: Callable[[], object], numeric: bool = False) -> Callable[[pd.DataFrame], None]:
    def run(frame: pd.DataFrame) -> None:
        from labeldp import PrivateLabels

        features = frame[["x"]].to_numpy()
        labels = (
            PrivateLabels(frame["y"].map(lambda v: {"0": 0.0, "1": 1.0}.get(str(v), 5.0)).to_numpy(), dataset="survey")
            if numeric
            else PrivateLabels(frame["y"].to_numpy(dtype=object), classes=CLASSES, dataset="survey")
        )
        model = make().fit(features, labels)
        np.save("predictions.npy", model.predict(features))
        labels.ledger.save("ledger.json")

    return run


def _privatize_in_memory(frame: pd.DataFrame) -> None:
    from labeldp import privatize
    from labeldp.randomness import NoiseSource

    released = privatize(
        frame["y"].to_numpy(dtype=object), classes=CLASSES, epsilon=1.0, ids=frame["id"].to_numpy(),
        noise=NoiseSource(insecure_seed=5), dataset_name="survey",
    )  # fmt: skip
    np.save("released.npy", released.labels)
    released.ledger.save("ledger.json")


def _privatize_frame(frame: pd.DataFrame) -> None:
    from labeldp import privatize_table
    from labeldp.randomness import NoiseSource

    privatize_table(
        frame, "release", label_column="y", id_column="id", classes=CLASSES, epsilon=1.0,
        noise=NoiseSource(insecure_seed=5),
    )  # fmt: skip


def _privatize_on_dask(frame: pd.DataFrame) -> None:
    import dask.dataframe as dd

    from labeldp.dask import privatize
    from labeldp.randomness import NoiseSource

    privatize(
        dd.from_pandas(frame, npartitions=3), "release", label_column="y", id_column="id", classes=CLASSES,
        epsilon=1.0, unit_column="user", max_rows_per_unit=3, noise=NoiseSource(insecure_seed=5),
    )  # fmt: skip


def _classifier():
    from sklearn.linear_model import LogisticRegression

    from labeldp import LabelDPClassifier

    return LabelDPClassifier(LogisticRegression(), epsilon=1.0, insecure_noise_seed=5)


def _counts_classifier():
    from sklearn.linear_model import LogisticRegression

    from labeldp import LabelDPClassifier

    return LabelDPClassifier(
        LogisticRegression(), epsilon=1.0, stages=2, second_stage="counts", cell_rows=5, insecure_noise_seed=5
    )


def _logistic():
    from labeldp import LabelDPLogisticRegression

    return LabelDPLogisticRegression(epsilon=1.0, insecure_noise_seed=5)


def _regressor():
    from sklearn.tree import DecisionTreeRegressor

    from labeldp import LabelDPRegressor

    return LabelDPRegressor(DecisionTreeRegressor(max_depth=2), epsilon=1.0, label_range=(0, 5), insecure_noise_seed=5)


_HASHED = ["hashed", "train", "--table", "t.parquet", "--label-column", "y", "--classes", *BINARY]
_HASHED += ["--columns", "site", "--bits", "4", "--epsilon", "1", "--insecure-noise-seed", "5", "--out", "run"]
_COUNTS = ["--epsilon", "1", *_QUICK, "--out", "run"]
_PRIVATIZE = ["privatize", "--label-column", "y", "--classes", *CLASSES, "--epsilon", "1"]
_PRIVATIZE += ["--insecure-noise-seed", "5", "--out", "release"]

ROUTES: list[Route] = [
    Route(
        "train on a CSV table, the test rows held out privately, the learning rate chosen on the release",
        ("labeldp train", "labeldp.train_run"),
        _cli([*_TRAIN, "--id-column", "id", "--out", "run"], "t.csv"),
        ids=True,
    ),
    Route(
        "train on a CSV table with the defaults: one stage, the network or boosted trees chosen on the release",
        ("labeldp train",),
        _cli(["train", *_table_options("t.csv"), "--epsilon", "1", *_QUICK[4:], "--out", "run"], "t.csv"),
    ),
    Route(
        "train on IDX images, the recipes set aside: the learning rate, the mirror and cut-out chosen on the release",
        ("labeldp train",),
        _images(
            [
                "train",
                "--dataset",
                "mnist",
                "--no-recipe",
                "--data-dir",
                "images",
                "--epsilon",
                "1",
                *_QUICK,
                "--out",
                "run",
            ]
        ),
        classes=("0", "1", "9"),
    ),
    Route(
        "train on CIFAR-10's python batches (the ConvNet in place of the ResNet, for time)",
        ("labeldp train",),
        _cifar(
            ["train", "--dataset", "cifar10", "--data-dir", "cifar", "--epsilon", "1", "--model", "cnn", *_QUICK]
            + ["--out", "run"]
        ),
        classes=("0", "1", "9"),
    ),
    Route(
        "train on MovieLens ratings with the defaults, the test pairs held out privately",
        ("labeldp train",),
        _ratings(["train", "--dataset", "movielens", "--data-dir", "ml", "--epsilon", "1", *_QUICK, "--out", "run"]),
        classes=("1", "2", "5"),
    ),
    Route(
        "train by VLP on a CSV table, the test rows held out privately, the learning rate chosen on the release",
        ("labeldp train",),
        _cli(
            ["train", *_table_options("t.csv"), "--method", "vlp", "--epsilon", "1", *_QUICK, "--out", "run"], "t.csv"
        ),
    ),
    Route(
        "train on a Parquet table with a public test table, then retrain on the consensus",
        ("labeldp train",),
        _cli(
            [
                "train",
                *_table_options("t.parquet"),
                "--test-table",
                "test.csv",
                "--method",
                "lp-2st",
                "--epsilon",
                "2",
                "--consensus",
                *_QUICK,
                "--tune-budget",
                "0",
                "--out",
                "run",
            ],
            "t.parquet",
        ),
        setup=lambda: table().to_csv("test.csv", index=False),
    ),  # fmt: skip
    Route(
        "train in two stages, the second's labels counted in cells of rows the first model scores alike",
        ("labeldp train",),
        _cli(["train", *_table_options("t.csv"), "--method", "lp-2st-counts", "--cell-rows", "5", *_COUNTS], "t.csv"),
    ),
    Route(
        "train with gradient-boosted trees fitted on the release",
        ("labeldp train",),
        _cli(
            ["train", *_table_options("t.csv"), "--method", "lp-1st", "--model", "gbdt", "--epsilon", "1"]
            + ["--insecure-noise-seed", "5", "--threads", "1", "--quiet", "--out", "run"],
            "t.csv",
        ),
    ),
    *(
        Route(
            f"train by {method}",
            ("labeldp train",),
            _cli(["train", *_table_options("t.csv"), "--method", method, *extra, "--out", "run"], "t.csv"),
            replay=replay,
            classes=("0", "1"),  # the label's reading is the routes' above: here one neighbour, another class
        )
        for method, extra, replay in (
            ("alibi", _COUNTS[:-2], "folder"),
            ("lp-mst", [*_COUNTS[:-2], "--tune-budget", "0"], "folder"),
            ("marginals", ["--epsilon", "1", *_QUICK[4:]], "folder"),
            ("pate", ["--epsilon", "4", *_QUICK, "--teachers", "8", "--teacher-epochs", "1"], "folder"),
            ("dp-sgd", _COUNTS[:-2], "its output is the model DP-SGD trains, under the release's guarantee"),
        )
    ),
    *(
        Route(
            f"train by {method} on a numeric label",
            ("labeldp train",),
            _cli(
                ["train", *_table_options("t.csv", ()), "--label-range", "0", "5", "--method", method, *_COUNTS],
                "t.csv",
            ),
            classes=("0", "1", "5"),
        )
        for method in ("rr-on-bins", "rr-on-bins-mst", "laplace-regression")
    ),
    Route(
        "train in two stages, the first's labels released as VLP's vectors",
        ("labeldp train",),
        _cli(["train", *_table_options("t.csv"), "--method", "lp-2st", "--first-release", "vlp", *_COUNTS], "t.csv"),
    ),
    Route(
        "train in two stages, the first release chosen by the classes declared (VLP's vectors at 10)",
        ("labeldp train",),
        # not quiet: it says which release it chose
        _cli(
            ["train", *_table_options("t.csv", (*CLASSES, *"abcdef")), "--method", "lp-2st", "--epsilon", "1"]
            + [*(option for option in _QUICK if option != "--quiet"), "--out", "run"],
            "t.csv",
        ),
    ),
    Route(
        "train per privacy unit",
        ("labeldp train",),
        _cli(
            [*_TRAIN, "--privacy-unit", "user", "--max-rows-per-unit", "3", "--tune-budget", "0", "--out", "run"],
            "t.csv",
        ),
        units=True,
    ),  # fmt: skip
    Route(
        "privatize a CSV table with ids",
        ("labeldp privatize", "labeldp.privatize_table"),
        _cli([*_PRIVATIZE, "--table", "t.csv", "--id-column", "id"], "t.csv"),
        ids=True,
        replay="its output is the release itself",
    ),
    Route(
        "privatize a Parquet table per privacy unit",
        ("labeldp privatize",),
        _cli([*_PRIVATIZE, "--table", "t.parquet", "--privacy-unit", "user", "--max-rows-per-unit", "3"], "t.parquet"),
        units=True,
        replay="its output is the release itself",
    ),  # fmt: skip
    Route(
        "privatize a Parquet table on Spark per privacy unit",
        ("labeldp privatize --engine spark", "labeldp.spark.privatize"),
        _cli(
            [
                *_PRIVATIZE,
                "--engine",
                "spark",
                "--table",
                "t.parquet",
                "--id-column",
                "id",
                "--privacy-unit",
                "user",
                "--max-rows-per-unit",
                "3",
            ],
            "t.parquet",
        ),
        units=True,
        ids=True,
        replay="its output is the release itself",
    ),  # fmt: skip
    Route(
        "privatize a Dask DataFrame per privacy unit",
        ("labeldp.dask.privatize",),
        _privatize_on_dask,
        units=True,
        ids=True,
        replay="its output is the release itself",
    ),
    Route(
        "privatize_table on a DataFrame as pandas typed it",
        ("labeldp.privatize_table",),
        _privatize_frame,
        ids=True,
        replay="its output is the release itself",
    ),
    Route(
        "privatize labels held in memory",
        ("labeldp.privatize",),
        _privatize_in_memory,
        ids=False,
        replay="its output is the release itself",
    ),
    Route(
        "hashed train, noisy counts",
        ("labeldp hashed train", "labeldp.fit_hashed"),
        _cli(_HASHED, "t.parquet"),
        classes=BINARY,
        outputs=("summary.json", "model.pt"),
    ),
    Route(
        "hashed train, randomized response per user",
        ("labeldp hashed train",),
        _cli(
            [*_HASHED, "--route", "rr", "--privacy-unit", "user", "--max-rows-per-unit", "3", "--epochs", "1"],
            "t.parquet",
        ),
        classes=BINARY,
        units=True,
        outputs=("summary.json", "model.pt"),
    ),  # fmt: skip
    Route(
        "LabelDPClassifier",
        ("labeldp.LabelDPClassifier", "labeldp.PrivateLabels"),
        _estimator(_classifier),
        replay="draws",
    ),
    Route(
        "LabelDPClassifier, the second stage's labels counted in cells",
        ("labeldp.LabelDPClassifier",),
        _estimator(_counts_classifier),
        replay="draws",
    ),
    Route("LabelDPLogisticRegression", ("labeldp.LabelDPLogisticRegression",), _estimator(_logistic), replay="draws"),
    Route("LabelDPRegressor", ("labeldp.LabelDPRegressor",), _estimator(_regressor, numeric=True), replay="draws"),
    Route(
        "sweep over seeds",
        ("labeldp sweep",),
        _cli(
            [
                "sweep",
                "--grid",
                "dataset=csv",
                "table=t.csv",
                "label_column=y",
                f"classes={':'.join(CLASSES)}",
                "method=lp-1st",
                "epsilon=1",
                "epochs=1",
                "insecure_noise_seed=5",
                "seed=0,1",
                "--quiet",
                "--threads",
                "1",
                "--out",
                "sweep",
            ],
            "t.csv",
        ),
        replay="its runs are train's, replayed there",
    ),  # fmt: skip
    Route(
        "tune on one release",
        ("labeldp tune", "labeldp.tune"),
        _cli(
            [
                "tune",
                *_table_options("t.csv"),
                "--method",
                "lp-1st",
                "--epsilon",
                "1",
                *_QUICK,
                "--grid",
                "lr=0.01,0.1",
                "--out",
                "tuned",
            ],
            "t.csv",
        ),
        replay="its candidates train on the saved release as train's runs do, replayed there",
    ),  # fmt: skip
    Route(
        "tune DP-SGD by private selection, the test rows held out privately",
        ("labeldp tune",),
        _cli(
            [
                "tune",
                *_table_options("t.csv"),
                "--method",
                "dp-sgd",
                "--epsilon",
                "1",
                *_QUICK,
                "--grid",
                "lr=0.1,0.2",
                "--selection-mean",
                "1.5",
                "--out",
                "tuned",
            ],
            "t.csv",
        ),
        replay="its output is the selection's own release",
    ),  # fmt: skip
    Route(
        "audit a run",
        ("labeldp audit",),
        _cli(["audit", "run", "--canaries", "8", "--threads", "1"], "t.csv"),
        setup=_train_first,
        replay="its output is the audit's own releases of its canaries",
    ),
    Route(
        "predict with a finished run, the table scored holding the label column",
        ("labeldp predict",),
        _cli(["predict", "run", "--table", "t.csv", "--id-column", "id", "--out", "scores.csv"], "t.csv"),
        setup=_train_first,
        replay="it releases nothing: its whole output is compared",
        releases=False,
    ),
]

#: the commands (``labeldp X``) and public names (``labeldp.X``) that read no private label, each with why
EXCLUDED: dict[str, str] = {
    "labeldp demo": "trains on the embedded digits, never on a user's labels",
    "labeldp profiles": "lists recipes; reads no data",
    "labeldp report": "reads a sweep's results, written after its releases",
    "labeldp download": "fetches public files",
    "labeldp budget": "reads the dataset ledgers, and with import saved ledgers and a table's public facts",
    "labeldp hashed predict": "scores rows with a saved model; reads no label column",
    "labeldp hashed train --route source": "the labels arrive randomized by a source: they are the release, under the "
    "source's guarantee, and labeldp draws nothing",
    "labeldp hashed train --route reports": "a source's noisy counts are the release, under the source's guarantee",
    "labeldp.predict_hashed": "scores rows with a saved model; reads no label column",
    "labeldp.fit_from_noisy_source": "labels a source randomized: labeldp draws nothing and records the source's "
    "guarantee",
    "labeldp.fit_from_reports": "a source's noisy counts: labeldp draws nothing and records the source's guarantee",
    "labeldp.load_release": "reads a release",
    "labeldp.ReleasedLabels": "released labels, public",
    "labeldp.released_scorer": "scores released labels",
    "labeldp.released_log_likelihood": "scores released labels",
    "labeldp.RunConfig": "settings",
    "labeldp.LabelBudget": "settings",
    "labeldp.PrivateLabelAccessError": "an error",
}


def covered() -> set[str]:
    """Every command and public name a route exercises or the exclusions name."""
    return {name for route in ROUTES for name in route.covers} | set(EXCLUDED)


def replaced(frame: pd.DataFrame) -> pd.DataFrame:
    """The same table with every true label replaced (all 1)."""
    return frame.assign(y=np.ones(len(frame), dtype=np.int64))


def file_names(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))
