"""MovieLens in the GroupLens folder format (``u.data``, ``u.item``, ``u.user``): ratings as private
numeric labels on the public grid 1..5.

Under label DP the *rating* is private; who rated which movie is public (the paper's task), and so are
the users' demographics, the movies' genres and years, and each user's and movie's number of ratings.
An input is one float32 row per (user, item) pair: four integer codes (user, item, occupation, gender;
float32 holds integers exactly up to 2^24, and ``LabeledDataset.categorical`` gives their sizes for the
``recommender`` to embed), then standardised side features.

The test pairs are chosen from the seed's public stream after sorting the pairs, so they depend neither
on the ratings nor on the file's order; their ratings are private like the others unless the test set is public (a run's
``test_labels`` public). MovieLens is licensed for research use only: users download it themselves
(``labeldp download movielens --data-dir DIR``).
"""

from __future__ import annotations

import os
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

from labeldp.boundary import PrivateLabels
from labeldp.data.dataset import LabeledDataset
from labeldp.data.idx import fetch
from labeldp.errors import DataError, MissingFileError
from labeldp.randomness import public_rng

#: The rating grid of MovieLens: whole stars 1 to 5.
RATINGS = np.arange(1.0, 6.0)
GENRES = 19
#: the public codes before the numeric features: user, item, occupation, gender
CODE_COLUMNS = ("user", "item", "occupation", "gender")
URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
TEST_FRACTION = 0.2


def _folder(data_dir: Path) -> Path:
    for candidate in (data_dir, data_dir / "ml-100k"):
        if (candidate / "u.data").exists():
            return candidate
    if not data_dir.is_dir():
        raise MissingFileError(
            f"data folder {data_dir} does not exist (download with: labeldp download movielens --data-dir {data_dir})"
        )
    raise MissingFileError(
        f"data folder {data_dir} has no u.data (nor ml-100k/u.data): not a MovieLens folder "
        f"(download with: labeldp download movielens --data-dir {data_dir})"
    )


def _read(path: Path, separator: str, names: list[str]) -> pd.DataFrame:
    if not path.exists():
        raise MissingFileError(f"MovieLens file {path} does not exist")
    try:
        return pd.read_csv(path, sep=separator, header=None, names=names, encoding="latin-1", engine="python")
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise DataError(f"{path} is not in the MovieLens format ({error})") from None


def _codes(values: pd.Series, known: list) -> np.ndarray:
    """Each value's position in ``known``; values not in it get the extra code len(known)."""
    lookup = {value: index for index, value in enumerate(known)}
    return values.map(lambda v: lookup.get(v, len(known))).to_numpy(np.int64)


def _standardised(values: np.ndarray) -> np.ndarray:
    return (values - values.mean()) / (values.std() + 1e-8)


def read_ratings(folder: Path) -> pd.DataFrame:
    """``u.data``'s ratings (``user``, ``item``, ``rating``, ``timestamp``), each line checked.

    The ratings are the private labels, read unreleased: no guarantee covers what a caller does with them,
    and the errors show none.
    """
    ratings = _read(folder / "u.data", "\t", ["user", "item", "rating", "timestamp"])
    if ratings.empty or ratings[["user", "item", "rating"]].isna().any().any():
        raise DataError(f"{folder / 'u.data'} must hold user, item, rating, timestamp on every line")
    return ratings


def load_movielens_dataset(
    data_dir: str | Path, split_seed: int = 0, test_fraction: float = TEST_FRACTION, public_test: bool = False
) -> LabeledDataset:
    """MovieLens (100K's folder format, in ``data_dir`` or its ``ml-100k``) as a regression on the ratings 1..5
    (see :mod:`labeldp.data.movielens`).

    The test pairs' ratings are private like every rating, unless ``public_test``, for exact test metrics the
    epsilon does not cover. A rating outside the grid is refused unnamed.
    """
    folder = _folder(Path(data_dir))
    ratings = read_ratings(folder)
    users = _read(folder / "u.user", "|", ["user", "age", "gender", "occupation", "zip"]).set_index("user")
    item_columns = ["item", "title", "date", "video_date", "url"] + [f"genre{g}" for g in range(GENRES)]
    items = _read(folder / "u.item", "|", item_columns).set_index("item")
    if not 0.0 < test_fraction < 1.0:
        raise DataError(f"test_fraction must lie in (0, 1), got {test_fraction}")
    # The ratings are checked against the public grid before anything else reads them.
    rating = pd.to_numeric(ratings["rating"], errors="coerce").to_numpy(np.float64)  # a word: refused, unnamed
    if not np.isin(rating, RATINGS).all():
        raise DataError(f"{folder / 'u.data'} has ratings outside the MovieLens grid 1..5")

    user_ids = np.union1d(users.index.to_numpy(), ratings["user"].to_numpy())
    item_ids = np.union1d(items.index.to_numpy(), ratings["item"].to_numpy())
    occupations = (
        _read(folder / "u.occupation", "|", ["name"])["name"].tolist()
        if (folder / "u.occupation").exists()
        else sorted(users["occupation"].dropna().unique())
    )
    user = np.searchsorted(user_ids, ratings["user"].to_numpy())
    item = np.searchsorted(item_ids, ratings["item"].to_numpy())
    person = users.reindex(ratings["user"].to_numpy())
    movie = items.reindex(ratings["item"].to_numpy())
    occupation = _codes(person["occupation"], occupations)
    gender = _codes(person["gender"], ["F", "M"])
    age = person["age"].fillna(users["age"].mean()).to_numpy(np.float64)
    year = pd.to_numeric(movie["date"].astype(str).str[-4:], errors="coerce").to_numpy(np.float64)
    year_missing = np.isnan(year)
    year = np.where(year_missing, np.nanmean(year) if (~year_missing).any() else 0.0, year)
    genres = movie[[f"genre{g}" for g in range(GENRES)]].fillna(0).to_numpy(np.float64)
    # how many ratings each user and movie has: public (who rated what), over all pairs
    user_count = np.bincount(user, minlength=user_ids.size)[user]
    item_count = np.bincount(item, minlength=item_ids.size)[item]
    numeric = np.column_stack(
        [
            _standardised(age),
            _standardised(year),
            year_missing.astype(np.float64),
            genres,
            _standardised(np.log(user_count)),
            _standardised(np.log(item_count)),
        ]
    )
    codes = np.column_stack([user, item, occupation, gender]).astype(np.float64)
    inputs = np.concatenate([codes, numeric], axis=1).astype(np.float32)
    sizes = (user_ids.size, item_ids.size, len(occupations) + 1, 3)

    # the test pairs: sorted by (user, item), then a public permutation; never by rating or file order
    by_pair = np.lexsort((ratings["item"].to_numpy(), ratings["user"].to_numpy()))
    order = by_pair[public_rng(split_seed, "ratings-split").permutation(len(ratings))]
    n_test = max(1, int(round(test_fraction * len(ratings))))
    if n_test >= len(ratings):  # the number of (user, item) pairs is public
        raise DataError(
            f"{folder / 'u.data'} has {len(ratings)} rating(s): holding out {n_test} as the test set leaves none "
            "to train on"
        )
    test, train = np.sort(order[:n_test]), np.sort(order[n_test:])
    labels = (rating - 1).astype(np.int64)
    return LabeledDataset(
        "movielens",
        inputs[train],
        labels[train],
        inputs[test],
        labels[test] if public_test else PrivateLabels.from_indices(labels[test], RATINGS.size),
        num_classes=5,
        class_names=[f"{r:g}" for r in RATINGS],
        label_values=RATINGS.copy(),
        y_test_values=rating[test] if public_test else None,
        categorical=sizes,
    )


def download_movielens(data_dir: str | Path) -> None:
    """Download MovieLens 100K from GroupLens into ``data_dir/ml-100k`` (needs internet; research use only).

    The archive is fetched whole or not at all (:func:`labeldp.data.idx.fetch`), unpacked beside the folder
    and renamed into place; a folder already holding ``u.data`` is left as it is.
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    folder = data_dir / "ml-100k"
    if (folder / "u.data").exists():
        return
    archive = data_dir / "ml-100k.zip"
    if not archive.exists():
        fetch(URL, archive)
    partial = data_dir / ".ml-100k.partial"
    shutil.rmtree(partial, ignore_errors=True)
    try:
        with zipfile.ZipFile(archive) as zipped:
            zipped.extractall(partial)
        if not (partial / "ml-100k" / "u.data").exists():
            raise zipfile.BadZipFile("it holds no ml-100k/u.data")
    except zipfile.BadZipFile as error:
        shutil.rmtree(partial, ignore_errors=True)
        archive.unlink(missing_ok=True)
        raise DataError(
            f"{archive} is not MovieLens 100K's archive ({error}); it was removed: download again"
        ) from None
    shutil.rmtree(folder, ignore_errors=True)  # an unfinished folder without u.data
    os.rename(partial / "ml-100k", folder)
    shutil.rmtree(partial)
    archive.unlink()
