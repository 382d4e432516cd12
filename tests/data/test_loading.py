"""Loading a dataset by name (data/loading.py): a missing folder or file, a folder dataset without a
folder and an unknown name are refused with a clear message."""

from __future__ import annotations

import pytest

from labeldp.data import load_dataset


def test_missing_folder_and_files(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_dataset("mnist", tmp_path / "nowhere")
    with pytest.raises(FileNotFoundError, match="train-images-idx3-ubyte"):
        load_dataset("mnist", tmp_path)
    with pytest.raises(ValueError, match="needs a data folder"):
        load_dataset("mnist")
    with pytest.raises(ValueError, match="unknown dataset"):
        load_dataset("imagenet", tmp_path)
