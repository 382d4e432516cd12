"""CIFAR-10 and CIFAR-100 (data/cifar.py), read from small pickles in their real format."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from labeldp.boundary import unseal
from labeldp.data import load_dataset


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


@pytest.mark.parametrize("label", ["secret", 3.7])
def test_a_label_that_is_no_class_position_is_refused_unnamed(tmp_path, label) -> None:
    from labeldp.errors import DataError

    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = [1, label] if name == "data_batch_3" else [1, 2]
        (folder / name).write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": labels}))
    with pytest.raises(DataError, match="labels must be whole numbers") as refused:
        load_dataset("cifar10", tmp_path)
    assert str(label) not in str(refused.value)


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
