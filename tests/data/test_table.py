"""Loaders on small files written in the real formats (IDX, CIFAR pickles, CSV, Parquet)."""

from __future__ import annotations

import pickle

import numpy as np
import pandas as pd
import pytest

from labeldp.boundary import unseal
from labeldp.data import LabeledDataset, load_dataset, read_idx
from tests.helpers import make_mnist_folder, write_idx


@pytest.mark.parametrize("compress", [True, False])
@pytest.mark.parametrize("name", ["mnist", "fashion-mnist", "kmnist"])
@pytest.mark.filterwarnings("ignore:.*match no published checksum")
def test_idx_family(tmp_path, compress: bool, name: str) -> None:
    labels, _ = make_mnist_folder(tmp_path, compress=compress)
    data = load_dataset(name, tmp_path)
    assert data.x_train.shape == (50, 1, 28, 28) and data.x_test.shape == (20, 1, 28, 28)
    assert np.array_equal(unseal(data.y_train), labels) and data.num_classes == 10
    assert data.x_train.dtype == np.float32 and abs(float(data.x_train.mean())) < 1e-4
    assert data.augmentation == "translate"


def test_idx_reader_rejects_corrupt_files(tmp_path) -> None:
    (tmp_path / "bad").write_bytes(b"\x01\x02\x03\x04")
    with pytest.raises(ValueError, match="magic"):
        read_idx(tmp_path / "bad")
    write_idx(tmp_path / "short", np.zeros((4, 2, 2)), compress=False)
    (tmp_path / "short").write_bytes((tmp_path / "short").read_bytes()[:-3])
    with pytest.raises(ValueError, match="header promises"):
        read_idx(tmp_path / "short")


def test_missing_folder_and_files(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset("mnist", tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_dataset("mnist", tmp_path)
    with pytest.raises(ValueError, match="needs a data folder"):
        load_dataset("mnist")
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("imagenet", tmp_path)


@pytest.mark.parametrize("num_classes", [10, 100])
def test_cifar_pickles(tmp_path, num_classes: int) -> None:
    rng = np.random.default_rng(0)
    key = b"labels" if num_classes == 10 else b"fine_labels"
    folder = tmp_path / ("cifar-10-batches-py" if num_classes == 10 else "cifar-100-python")
    folder.mkdir()
    names = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"] if num_classes == 10 else ["train", "test"]
    written = {}
    for name in names:
        labels = rng.integers(0, num_classes, 8).tolist()
        written[name] = labels
        batch = {b"data": rng.integers(0, 256, (8, 3072), dtype=np.uint8), key: labels}
        (folder / name).write_bytes(pickle.dumps(batch))
    data = load_dataset(f"cifar{num_classes}", tmp_path)
    train_names = names[:-1]
    assert data.x_train.shape == (8 * len(train_names), 3, 32, 32)
    assert unseal(data.y_train).tolist() == sum((written[n] for n in train_names), [])
    assert data.num_classes == num_classes and data.augmentation == "crop-flip"


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_tables(tmp_path, suffix: str) -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {"a": rng.normal(size=100), "b": rng.normal(size=100), "outcome": rng.choice(["no", "yes", "maybe"], 100)}
    )
    path = tmp_path / f"table{suffix}"
    frame.to_csv(path, index=False) if suffix == ".csv" else frame.to_parquet(path)
    data = load_dataset("csv", table=path, label_column="outcome", classes=("yes", "no", "maybe"))
    assert data.num_classes == 3 and data.class_names == ["yes", "no", "maybe"]  # the declared order
    assert len(data.y_train) == 80 and len(data.y_test) == 20 and data.input_shape == (2,)
    assert not data.public_test and data.private_rows == 100  # held out of the private column: private too
    names = np.array(["yes", "no", "maybe"])[np.concatenate([unseal(data.y_train), unseal(data.y_test)])]
    assert sorted(names) == sorted(frame["outcome"])
    with pytest.raises(ValueError, match="label column 'y' not found"):
        load_dataset("csv", table=path, label_column="y", classes=("yes", "no"))


def test_the_label_domain_is_declared_never_read_off_the_private_labels(tmp_path) -> None:
    """Replacing one training label by a value no other row has must not change the classes, K or
    the model's output size: without --classes a table is refused, and an undeclared value is an
    error before any release (today's loader counted the distinct labels, 2 -> 3)."""
    frame = pd.DataFrame({"a": np.arange(50.0), "label": [0, 1] * 25})
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match="must be declared: --classes"):
        load_dataset("csv", table=tmp_path / "t.csv")
    assert load_dataset("csv", table=tmp_path / "t.csv", classes=("0", "1", "2")).num_classes == 3
    frame.loc[7, "label"] = 9
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(ValueError, match=r"has labels missing or outside the declared classes \['0', '1'\]; declare"):
        load_dataset("csv", table=tmp_path / "t.csv", classes=("0", "1"), test_fraction=0.02)
    # values are matched as text: 1, 1.0 and true are one class
    frame = pd.DataFrame({"a": np.arange(4.0), "label": [1.0, 0.0, 1.0, 0.0]})
    frame.to_csv(tmp_path / "f.csv", index=False)
    data = load_dataset("csv", table=tmp_path / "f.csv", classes=("false", "true"), test_fraction=0.5)
    assert sorted(np.concatenate([unseal(data.y_train), unseal(data.y_test)]).tolist()) == [0, 0, 1, 1]
    public = load_dataset(
        "csv", table=tmp_path / "f.csv", classes=("false", "true"), test_fraction=0.5, public_test_split=True
    )
    assert public.public_test and public.y_test.tolist() == unseal(data.y_test).tolist()


def test_embedded_digits_is_fixed_and_split_without_looking_at_labels(monkeypatch) -> None:
    first, second = load_dataset("digits"), load_dataset("digits")
    assert len(first.y_train) == 1347 and len(first.y_test) == 450
    assert np.array_equal(unseal(first.y_train), unseal(second.y_train))
    # the split depends on the images' positions only: other labels give the same split of the images
    import sklearn.datasets

    real = sklearn.datasets.load_digits

    def relabelled():
        bunch = real()
        bunch.target = (bunch.target + np.arange(bunch.target.size)) % 10
        return bunch

    monkeypatch.setattr("labeldp.data.digits.load_digits", relabelled)
    assert np.array_equal(load_dataset("digits").x_test, first.x_test)


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(x_train=np.full((3, 2), np.nan)), "NaN"),
        (dict(y_train=np.array([0, 1])), "length mismatch"),
        (dict(y_train=np.array([0, 1, 5])), "must lie in"),
        (dict(x_train=np.zeros((0, 2)), y_train=np.zeros(0, dtype=int)), "empty"),
    ],
)
def test_dataset_validation(change, message) -> None:
    arrays = dict(
        x_train=np.zeros((3, 2)), y_train=np.array([0, 1, 2]), x_test=np.zeros((2, 2)), y_test=np.array([0, 1])
    )
    arrays.update(change)
    with pytest.raises(ValueError, match=message):
        LabeledDataset("t", num_classes=3, **arrays)


def test_idx_files_of_another_dataset_are_recognised(tmp_path, monkeypatch) -> None:
    """The MNIST family share file names; the published checksums tell them apart: MNIST's files
    loaded as Fashion-MNIST are an error, not mislabelled results."""
    import hashlib

    import labeldp.data.idx as idx
    from labeldp.errors import DataError

    make_mnist_folder(tmp_path, compress=True)
    sums = {key: (hashlib.md5((tmp_path / f"{stem}.gz").read_bytes()).hexdigest(),) for key, stem in idx.FILES.items()}
    monkeypatch.setitem(idx.CHECKSUMS, "mnist", sums)  # pretend these are the published MNIST files
    assert load_dataset("mnist", tmp_path).num_classes == 10
    with pytest.raises(DataError, match="are the published mnist files, not fashion-mnist's"):
        load_dataset("fashion-mnist", tmp_path)


def test_a_download_without_network_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    import urllib.error
    import urllib.request

    from labeldp.cli import main

    def offline(*args, **kwargs):
        raise urllib.error.URLError("Name or service not known")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    assert main(["download", "mnist", "--data-dir", str(tmp_path)]) == 2
    error = capsys.readouterr().err
    assert "could not download" in error and "Traceback" not in error and not list(tmp_path.iterdir())


def test_tables_as_they_come(tmp_path) -> None:
    """Categorical, boolean and numeric columns with missing values, a gzip CSV, explicit features and
    dropped columns, an id: encoded by the fitted preprocessing, which the dataset carries."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "id": np.arange(60),
            "age": rng.integers(18, 90, 60).astype(float),
            "job": rng.choice(["a", "b", None], 60),
            "member": rng.choice([True, False], 60),
            "spend": rng.random(60),
            "label": rng.choice(["no", "yes"], 60),
        }
    )
    frame.loc[3, "age"] = np.nan
    frame.to_csv(tmp_path / "t.csv.gz", index=False)
    data = load_dataset(
        "csv", table=tmp_path / "t.csv.gz", label_column="label", classes=("no", "yes"), drop=("spend",), id_column="id"
    )
    names = data.preprocessor.encoded_names
    assert "spend" not in " ".join(names) and "id" not in names and any(n.startswith("job_") for n in names)
    assert any("missingindicator" in n for n in names) and np.isfinite(data.x_train).all()
    only = load_dataset(
        "csv", table=tmp_path / "t.csv.gz", label_column="label", classes=("no", "yes"), features=("age",)
    )
    assert only.input_shape == (2,)  # age and its missing indicator
    with pytest.raises(ValueError, match=r"columns \['salary'\] are not in the table"):
        load_dataset("csv", table=tmp_path / "t.csv.gz", label_column="label", classes=("no", "yes"), drop=("salary",))
