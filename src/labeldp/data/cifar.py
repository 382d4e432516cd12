"""CIFAR-10 and CIFAR-100 from the python pickle batches (``cifar-10-batches-py``, ``cifar-100-python``)."""

from __future__ import annotations

import os
import pickle
import tarfile
from pathlib import Path
from typing import TypedDict

import numpy as np

from labeldp.boundary import PrivateLabels
from labeldp.data.dataset import LabeledDataset, standardize_images
from labeldp.data.idx import fetch
from labeldp.errors import DataError, MissingFileError


class _Layout(TypedDict):
    folder: str
    train: list[str]
    test: list[str]
    labels: bytes
    meta: tuple[str, bytes]
    url: str


_LAYOUT: dict[int, _Layout] = {
    10: {
        "folder": "cifar-10-batches-py",
        "train": [f"data_batch_{i}" for i in range(1, 6)],
        "test": ["test_batch"],
        "labels": b"labels",
        "meta": ("batches.meta", b"label_names"),
        "url": "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz",
    },
    100: {
        "folder": "cifar-100-python",
        "train": ["train"],
        "test": ["test"],
        "labels": b"fine_labels",
        "meta": ("meta", b"fine_label_names"),
        "url": "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz",
    },
}


def _folder(data_dir: Path, num_classes: int) -> Path:
    layout = _LAYOUT[num_classes]
    for candidate in (data_dir / layout["folder"], data_dir):
        if (candidate / layout["train"][0]).exists():
            return candidate
    raise MissingFileError(
        f"data folder {data_dir} has no {layout['folder']}/{layout['train'][0]} "
        f"(download with: labeldp download cifar{num_classes} --data-dir {data_dir})"
    )


def _read_batches(folder: Path, names: list[str], label_key: bytes) -> tuple[np.ndarray, np.ndarray]:
    images, labels = [], []
    for name in names:
        with open(folder / name, "rb") as handle:
            batch = pickle.load(handle, encoding="bytes")
        images.append(np.asarray(batch[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32))
        values = np.asarray(batch[label_key])
        if values.dtype.kind not in "iu":  # np.int64 would name a word and cut a fraction
            raise DataError(f"{folder / name}: labels must be whole numbers; some are not (which is not said)")
        labels.append(values.astype(np.int64))
    return np.concatenate(images), np.concatenate(labels)


def download_cifar(num_classes: int, data_dir: str | Path) -> None:
    """Download and unpack the CIFAR-``num_classes`` python archive into ``data_dir`` (needs internet); an
    archive already there is unpacked without downloading it again.
    """
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    archive = data_dir / Path(_LAYOUT[num_classes]["url"]).name
    if not archive.exists():
        fetch(_LAYOUT[num_classes]["url"], archive)
    with tarfile.open(archive) as tar:
        extract_safely(tar, data_dir)


def extract_safely(tar: tarfile.TarFile, data_dir: Path) -> None:
    """Unpack ``tar`` into ``data_dir``, refusing members that would land outside it, links and devices: by the
    ``data`` filter where this Python has it, else checked here first.
    """
    archive = os.fsdecode(tar.name) if tar.name else "the archive"
    if hasattr(tarfile, "data_filter"):
        try:
            tar.extractall(data_dir, filter="data")
        except tarfile.FilterError as error:
            raise DataError(f"{archive} holds a member that is unsafe to unpack ({error})") from None
        return
    root = data_dir.resolve()
    for member in tar.getmembers():
        target = (root / member.name).resolve()
        if not (member.isfile() or member.isdir()) or (target != root and root not in target.parents):
            raise DataError(f"{archive} holds a member that is unsafe to unpack: {member.name!r}")
    tar.extractall(data_dir)


def load_cifar_dataset(num_classes: int, data_dir: str | Path) -> LabeledDataset:
    """CIFAR-10 or CIFAR-100 (fine labels) from the python batches in ``data_dir`` or its standard subfolder:
    images standardised per channel with the training statistics, private training labels, public test
    labels, crop-and-flip augmentation.
    """
    if num_classes not in _LAYOUT:
        raise DataError(f"num_classes must be 10 or 100 for CIFAR, got {num_classes}")
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MissingFileError(f"data folder {data_dir} does not exist")
    layout = _LAYOUT[num_classes]
    folder = _folder(data_dir, num_classes)
    x_train, y_train = _read_batches(folder, layout["train"], layout["labels"])
    x_test, y_test = _read_batches(folder, layout["test"], layout["labels"])
    names: list[str] = []
    meta_file, meta_key = layout["meta"]
    if (folder / meta_file).exists():
        with open(folder / meta_file, "rb") as handle:
            names = [n.decode() for n in pickle.load(handle, encoding="bytes")[meta_key]]
    x_train, x_test = standardize_images(x_train, x_test)
    return LabeledDataset(
        f"cifar{num_classes}",
        x_train,
        PrivateLabels.from_indices(y_train, num_classes),
        x_test,
        y_test,
        num_classes=num_classes,
        augmentation="crop-flip",
        class_names=names,
    )
