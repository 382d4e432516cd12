"""The IDX format of MNIST, Fashion-MNIST and KMNIST (``*-images-idx3-ubyte[.gz]``, ``*-labels-idx1-ubyte[.gz]``)."""

from __future__ import annotations

import gzip
import hashlib
import http.client
import urllib.error
import urllib.request
import warnings
from pathlib import Path

import numpy as np

from labeldp.boundary import PrivateLabels
from labeldp.data.dataset import LabeledDataset, standardize_images
from labeldp.errors import DataError, MissingFileError
from labeldp.files import write_atomic

_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}

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
#: The published MD5 checksums of each dataset's four files, gzip-compressed (as distributed) and, for
#: MNIST, uncompressed: they tell the datasets apart, since all three use the same file names.
CHECKSUMS: dict[str, dict[str, tuple[str, ...]]] = {
    "mnist": {
        "train_images": ("f68b3c2dcbeaaa9fbdd348bbdeb94873", "6bbc9ace898e44ae57da46a324031adb"),
        "train_labels": ("d53e105ee54ea40749a09fcbcd1e9432", "a25bea736e30d166cdddb491f175f624"),
        "test_images": ("9fb629c4189551a2d022fa330f9573f3", "2646ac647ad5339dbf082846283269ea"),
        "test_labels": ("ec29112dd5afa0611ce80d1b7f02629c", "27ae3e4e09519cfbb04c329615203637"),
    },
    "fashion-mnist": {
        "train_images": ("8d4fb7e6c68d591d4c3dfef9ec88bf0d",),
        "train_labels": ("25c81989df183df01b3e8a0aad5dffbe",),
        "test_images": ("bef4ecab320f06d8554ea6380940ec79",),
        "test_labels": ("bb300cfdad3c16e7a12a480ee83cd310",),
    },
    "kmnist": {
        "train_images": ("bdb82020997e1d708af4cf47b453dcf7",),
        "train_labels": ("e144d726b3acfaa3e44228e80efcd344",),
        "test_images": ("5c965bf0a639b31b8f53240b1b52f4d7",),
        "test_labels": ("7320c461ea6c1c855c0b718fb2a4b134",),
    },
}
CLASS_NAMES = {
    "mnist": [str(d) for d in range(10)],
    "fashion-mnist": [
        "T-shirt/top",
        "Trouser",
        "Pullover",
        "Dress",
        "Coat",
        "Sandal",
        "Shirt",
        "Sneaker",
        "Bag",
        "Ankle boot",
    ],
    "kmnist": ["o", "ki", "su", "tsu", "na", "ha", "ma", "ya", "re", "wo"],
}


def read_idx(path: str | Path) -> np.ndarray:
    """One IDX file (gzip-compressed with a ``.gz`` suffix) as a read-only array of the header's dtype and shape."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise DataError(f"{path} is not an IDX file (bad magic number)")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
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


def recognise(name: str, files: dict[str, Path]) -> None:
    """Check IDX dataset ``name``'s public ``files`` (by their :data:`FILES` key) against the published checksums.

    The three datasets share file names: files of another one are a :class:`~labeldp.errors.DataError`;
    files matching no published checksum (a copy of one's own) pass with a warning. The training labels are
    never hashed: whether they are the published ones would tell of a label before any release.
    """
    files = {key: path for key, path in files.items() if key != "train_labels"}
    found = {key: hashlib.md5(path.read_bytes()).hexdigest() for key, path in files.items()}
    owners = {dataset for dataset, sums in CHECKSUMS.items() for key, digest in found.items() if digest in sums[key]}
    if owners and name not in owners:
        raise DataError(
            f"the files in {next(iter(files.values())).parent} are the published {' and '.join(sorted(owners))} "
            f"files, not {name}'s: point --data-dir at {name}'s files, or name the dataset they hold"
        )
    judged = [key for key, path in files.items() if path.suffix == ".gz" or name == "mnist"]  # published sums
    unknown = [files[key].name for key in judged if found[key] not in CHECKSUMS[name][key]]
    if unknown:
        warnings.warn(
            f"{', '.join(unknown)} in {next(iter(files.values())).parent} match no published checksum of "
            f"{name}: loaded as {name} all the same",
            stacklevel=3,
        )


def download_idx(name: str, data_dir: str | Path) -> None:
    """Download ``name``'s four gzip files into ``data_dir`` (needs internet), skipping those already there."""
    data_dir = Path(data_dir)
    data_dir.mkdir(parents=True, exist_ok=True)
    for stem in FILES.values():
        target = data_dir / f"{stem}.gz"
        if not target.exists():
            fetch(MIRRORS[name] + target.name, target)


def fetch(url: str, target: Path) -> None:
    """Download ``url`` to ``target``, written whole or not at all (60 seconds' timeout); a failure is a
    :class:`~labeldp.errors.DataError` saying what to do without a network.
    """
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            write_atomic(target, lambda tmp: tmp.write_bytes(response.read()))
    except (urllib.error.URLError, http.client.HTTPException, OSError) as error:
        reason = getattr(error, "reason", error)
        raise DataError(
            f"could not download {url} ({reason}); without a network, copy the dataset's standard "
            f"files into {target.parent} yourself"
        ) from None


def load_idx_dataset(name: str, data_dir: str | Path) -> LabeledDataset:
    """MNIST, Fashion-MNIST or KMNIST from the four IDX files in ``data_dir`` (:data:`FILES`, gzipped or not),
    checked first (:func:`recognise`): (n, 1, H, W) images standardised with the training statistics,
    private training labels, public test labels, translation augmentation.
    """
    if name not in MIRRORS:
        raise DataError(f"unknown IDX dataset {name!r}; expected one of {sorted(MIRRORS)}")
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise MissingFileError(
            f"data folder {data_dir} does not exist (download with: labeldp download {name} --data-dir {data_dir})"
        )
    files = {key: _find(data_dir, stem) for key, stem in FILES.items()}
    recognise(name, files)
    arrays = {key: read_idx(path) for key, path in files.items()}
    for split in ("train", "test"):
        if arrays[f"{split}_images"].ndim != 3 or arrays[f"{split}_labels"].ndim != 1:
            raise DataError(f"{data_dir}: {split} images must be 3-d and labels 1-d")
    x_train, x_test = standardize_images(arrays["train_images"][:, None], arrays["test_images"][:, None])
    return LabeledDataset(
        name,
        x_train,
        PrivateLabels.from_indices(arrays["train_labels"], 10),
        x_test,
        arrays["test_labels"],
        num_classes=10,
        augmentation="translate",
        class_names=CLASS_NAMES[name],
    )
