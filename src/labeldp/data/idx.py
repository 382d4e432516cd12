"""The IDX format of MNIST, Fashion-MNIST and KMNIST (``*-images-idx3-ubyte[.gz]``, ``*-labels-idx1-ubyte[.gz]``)."""

from __future__ import annotations

import gzip
import shutil
import urllib.request
from pathlib import Path

import numpy as np

from labeldp.data.dataset import LabeledDataset, standardize_images
from labeldp.errors import DataError, MissingFileError

_IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
               0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}

#: The same four file names serve all three datasets; only the download address differs.
FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}
MIRRORS = {
    "mnist": "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "fashion-mnist": "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    "kmnist": "http://codh.rois.ac.jp/kmnist/dataset/kmnist/",
}
CLASS_NAMES = {
    "mnist": [str(d) for d in range(10)],
    "fashion-mnist": ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                      "Sneaker", "Bag", "Ankle boot"],
    "kmnist": ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"],
}


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (optionally gzip-compressed) into a numpy array."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DataError(f"{path} is not an IDX file (bad magic number)")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i: 8 + 4 * i], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    offset = 4 + 4 * ndim
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - offset != expected:
        raise DataError(f"{path}: header promises {expected} bytes of data, file has {len(data) - offset}")
    return np.frombuffer(data, dtype=dtype, offset=offset).reshape(shape)


def _find(data_dir: Path, stem: str) -> Path:
    for candidate in (data_dir / stem, data_dir / f"{stem}.gz"):
        if candidate.exists():
            return candidate
    raise MissingFileError(f"data folder {data_dir} has no {stem} or {stem}.gz")


def download_idx(name: str, data_dir: str | Path) -> None:
    """Download the four gzip files of ``name`` into ``data_dir`` (needs internet)."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    for stem in FILES.values():
        target = data_dir / f"{stem}.gz"
        if not target.exists():
            with urllib.request.urlopen(MIRRORS[name] + target.name) as response, open(target, "wb") as out:
                shutil.copyfileobj(response, out)


def load_idx_dataset(name: str, data_dir: str | Path) -> LabeledDataset:
    """Load MNIST, Fashion-MNIST or KMNIST from the four IDX files in ``data_dir``."""
    if name not in MIRRORS:
        raise DataError(f"unknown IDX dataset {name!r}; expected one of {sorted(MIRRORS)}")
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MissingFileError(f"data folder {data_dir} does not exist (download with: labeldp download {name} --data-dir {data_dir})")
    arrays = {key: read_idx(_find(data_dir, stem)) for key, stem in FILES.items()}
    for split in ("train", "test"):
        if arrays[f"{split}_images"].ndim != 3 or arrays[f"{split}_labels"].ndim != 1:
            raise DataError(f"{data_dir}: {split} images must be 3-d and labels 1-d")
    x_train, x_test = standardize_images(arrays["train_images"][:, None], arrays["test_images"][:, None])
    return LabeledDataset(name, x_train, arrays["train_labels"], x_test, arrays["test_labels"],
                          num_classes=10, augmentation="translate", class_names=CLASS_NAMES[name])
