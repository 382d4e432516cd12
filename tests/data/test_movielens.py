"""MovieLens 100K (data/movielens.py), read from a small folder in its format written here (never the
real dataset): the pairs' ratings on the grid, a split that depends on the pairs only, and its errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from labeldp.boundary import unseal
from labeldp.cli import main
from labeldp.data import load_dataset
from labeldp.errors import ConfigError, DataError, MissingFileError
from labeldp.models import default_model_name
from tests.helpers import write_movielens


def test_movielens_folder(tmp_path) -> None:
    ratings = write_movielens(tmp_path)
    data = load_dataset("movielens", tmp_path, split_seed=3, public_test=True)
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
    for rating in (6, "five"):  # refused, the rating unnamed
        frame[2] = frame[2].astype(object)
        frame.iloc[4, 2] = rating
        frame.to_csv(tmp_path / "ml-100k" / "u.data", sep="\t", header=False, index=False)
        with pytest.raises(DataError, match="outside the MovieLens grid") as refused:
            load_dataset("movielens", tmp_path)
        assert "five" not in str(refused.value)


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


def test_movielens_holds_out_the_test_share_it_is_asked_for(tmp_path) -> None:
    from labeldp.data import load_dataset
    from tests.helpers import write_movielens

    write_movielens(tmp_path / "ml", ratings=100)
    assert len(load_dataset("movielens", tmp_path / "ml").y_test) == 20
    assert len(load_dataset("movielens", tmp_path / "ml", test_fraction=0.5).y_test) == 50
