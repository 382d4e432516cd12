"""Numeric labels as data: the declared grid, snapping, regression tables, and the MovieLens folder
format on a small folder written here (never the real dataset)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from labeldp.boundary import unseal
from labeldp.data import LabeledDataset, label_grid, load_dataset, regression_dataset, snap_to_grid
from labeldp.errors import ConfigError, DataError, MissingFileError
from labeldp.models import RecommenderMLP, build_model, default_model_name
from tests.helpers import write_movielens


def test_grid_and_snapping() -> None:
    grid = label_grid(0, 10, 11)
    assert np.array_equal(grid, np.arange(11.0))
    assert snap_to_grid([-3.0, 0.4, 0.5, 0.6, 9.7, 42.0], grid).tolist() == [0, 0, 0, 1, 10, 10]
    with pytest.raises(ConfigError, match="LOW < HIGH"):
        label_grid(5, 5, 3)
    with pytest.raises(ConfigError, match="at least 2 points"):
        label_grid(0, 1, 1)
    with pytest.raises(DataError, match="missing or infinite"):
        snap_to_grid([1.0, np.nan], grid)


def test_regression_dataset_keeps_the_raw_test_values() -> None:
    x = np.zeros((4, 2))
    data = regression_dataset("r", x, [0.0, 3.2, 11.0, 5.0], x, [1.4, 2.6, -1.0, 7.5], label_grid(0, 10, 6))
    assert data.is_regression and data.num_classes == 6
    assert unseal(data.y_train).tolist() == [0, 2, 5, 2] and data.y_test.tolist() == [1, 1, 0, 4]
    assert data.test_values.tolist() == [1.4, 2.6, -1.0, 7.5]
    assert "label_values=[0 .. 10]" in repr(data)
    plain = LabeledDataset("c", x, [0, 1, 0, 1], x, [1, 0, 1, 0], num_classes=2)
    assert not plain.is_regression
    with pytest.raises(DataError, match="classification"):
        plain.test_values  # noqa: B018


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(label_values=[1.0, 2.0]), "num_classes"),
        (dict(label_values=[1.0, 3.0, 2.0]), "strictly increasing"),
        (dict(y_test_values=[1.0, 2.0]), "give label_values too"),
        (dict(label_values=[1.0, 2.0, 3.0], y_test_values=[1.0]), "one per test example"),
        (dict(categorical=(2, 9, 9)), "cover leading columns"),
        (dict(categorical=(1,)), "integer codes"),
    ],
)
def test_dataset_refuses_inconsistent_regression_fields(change, message) -> None:
    arrays = dict(
        x_train=np.array([[0.0, 1.5], [1.0, 0.0], [1.0, 2.0]]),
        y_train=np.array([0, 1, 2]),
        x_test=np.zeros((2, 2)),
        y_test=np.array([0, 1]),
    )
    with pytest.raises(DataError, match=message):
        LabeledDataset("t", num_classes=3, **arrays, **change)


def test_regression_table(tmp_path) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "a": rng.normal(size=50),
            "channel": rng.choice(["web", "mail", "phone"], 50),
            "id": np.arange(50),
            "spend": rng.uniform(-5, 120, 50),
        }
    )
    frame.to_csv(tmp_path / "t.csv", index=False)
    data = load_dataset(
        "csv",
        table=tmp_path / "t.csv",
        label_column="spend",
        label_range=(0, 100),
        label_grid_size=11,
        id_column="id",
        public_test_split=True,
    )
    assert data.x_train.shape[1] == 1 + 3 and data.preprocessor is not None  # categories one-hot, the id left out
    assert data.is_regression and np.array_equal(data.label_values, np.arange(0, 101, 10.0))
    assert np.isin(data.test_values, frame["spend"].to_numpy()).all()  # the raw values, not clipped or snapped
    assert np.array_equal(data.y_test, snap_to_grid(data.test_values, data.label_values))
    with pytest.raises(ConfigError, match="not both"):
        load_dataset("csv", table=tmp_path / "t.csv", label_column="spend", label_range=(0, 1), classes=("0", "1"))
    with pytest.raises(ConfigError, match="needs --label-range"):
        load_dataset("csv", table=tmp_path / "t.csv", label_column="spend", label_grid_size=5)
    with pytest.raises(ConfigError, match="defines its own labels"):
        load_dataset("digits", label_range=(0, 1))


def test_movielens_folder(tmp_path) -> None:
    ratings = write_movielens(tmp_path)
    data = load_dataset("movielens", tmp_path, split_seed=3, public_test_split=True)
    assert data.is_regression and data.label_values.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert len(data.y_train) == 120 and len(data.y_test) == 30
    assert data.categorical == (12, 15, 5, 3)  # users, items, 4 occupations + unknown, F / M / other
    assert data.x_train.shape[1] == 4 + 3 + 19 + 2 and data.x_train.dtype == np.float32
    assert default_model_name(data.input_shape, data.categorical) == "recommender"
    # every pair's rating comes back at its pair, as a grid index; the raw test values too
    rating_of = {(u, i): r for u, i, r in ratings[["user", "item", "rating"]].itertuples(index=False)}
    for x, y in zip(data.x_train, unseal(data.y_train)):
        assert rating_of[(int(x[0]) + 1, int(x[1]) + 1)] == y + 1
    assert [rating_of[(int(x[0]) + 1, int(x[1]) + 1)] for x in data.x_test] == data.test_values.tolist()
    first_user = data.x_train[data.x_train[:, 0] == 0]
    assert first_user.size == 0 or (first_user[:, 2] == 4).all() and (first_user[:, 3] == 2).all()
    private = load_dataset("movielens", tmp_path, split_seed=3)  # by default the test ratings are private too
    assert not private.public_test and private.y_test_values is None
    assert unseal(private.y_test).tolist() == data.y_test.tolist()


def test_movielens_split_depends_on_the_pairs_only(tmp_path) -> None:
    write_movielens(tmp_path / "a")
    write_movielens(tmp_path / "b", shuffle=7, rating_offset=2)  # other file order, other ratings
    a, b = load_dataset("movielens", tmp_path / "a"), load_dataset("movielens", tmp_path / "b")

    def pairs(x):
        return sorted(map(tuple, x[:, :2].astype(int).tolist()))

    assert pairs(a.x_test) == pairs(b.x_test) and pairs(a.x_train) == pairs(b.x_train)
    assert pairs(load_dataset("movielens", tmp_path / "a", split_seed=1).x_test) != pairs(a.x_test)


def test_movielens_errors(tmp_path) -> None:
    with pytest.raises(MissingFileError, match="does not exist"):
        load_dataset("movielens", tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MissingFileError, match="no u.data"):
        load_dataset("movielens", tmp_path / "empty")
    with pytest.raises(ConfigError, match="needs a data folder"):
        load_dataset("movielens")
    write_movielens(tmp_path / "ml-100k")
    assert load_dataset("movielens", tmp_path).num_classes == 5  # the folder inside, as the archive unpacks
    frame = pd.read_csv(tmp_path / "ml-100k" / "u.data", sep="\t", header=None)
    frame.iloc[4, 2] = 6
    frame.to_csv(tmp_path / "ml-100k" / "u.data", sep="\t", header=False, index=False)
    with pytest.raises(DataError, match="outside the MovieLens grid"):
        load_dataset("movielens", tmp_path)


def test_recommender_model(tmp_path) -> None:
    write_movielens(tmp_path)
    data = load_dataset("movielens", tmp_path)
    model = build_model(None, data.input_shape, data.num_classes, seed=0, categorical=data.categorical)
    assert isinstance(model, RecommenderMLP)
    assert model(torch.as_tensor(data.x_test)).shape == (30, 5)
    again = build_model(None, data.input_shape, data.num_classes, seed=0, categorical=data.categorical)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters()))
    with pytest.raises(ConfigError, match="categorical codes"):
        build_model("recommender", (10,), 5)
