"""The autoencoder encoder (priors/autoencoder.py): its codes of public inputs separate clusters."""

from __future__ import annotations

import numpy as np

from labeldp.boundary import unseal
from labeldp.priors import cluster, encode


def test_autoencoder_codes_separate_public_clusters(blobs) -> None:
    codes = encode(blobs.x_train, "autoencoder", n_components=8, seed=0)
    assert codes.shape == (600, 8) and codes.dtype == np.float32
    assert np.array_equal(codes, encode(blobs.x_train, "autoencoder", n_components=8, seed=0))
    groups = cluster(codes, 10, seed=0)
    counts = np.zeros((10, 10))
    np.add.at(counts, (groups, unseal(blobs.y_train)), 1)
    assert counts.max(axis=1).sum() / 600 > 0.9  # clusters of the codes are nearly pure
