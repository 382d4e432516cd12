"""The MNIST family's IDX files (data/idx.py): the four files read in either compression, corrupt
files refused, the published checksums telling the datasets apart, and a download without network is
a clear error."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.boundary import unseal
from labeldp.data import load_dataset, read_idx
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


@pytest.mark.filterwarnings("error")
def test_the_training_labels_are_never_checked_against_the_published_ones(tmp_path, monkeypatch) -> None:
    """A label changed from the published files' is no warning: a message that said so would tell of a
    label before any release."""
    import hashlib

    import labeldp.data.idx as idx

    labels, _ = make_mnist_folder(tmp_path, compress=True)
    sums = {key: (hashlib.md5((tmp_path / f"{stem}.gz").read_bytes()).hexdigest(),) for key, stem in idx.FILES.items()}
    monkeypatch.setitem(idx.CHECKSUMS, "mnist", sums)  # pretend these are the published MNIST files
    labels[0] = (labels[0] + 1) % 10
    write_idx(tmp_path / idx.FILES["train_labels"], labels, compress=True)
    assert np.array_equal(unseal(load_dataset("mnist", tmp_path).y_train), labels)


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
