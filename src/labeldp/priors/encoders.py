"""The encoders a cluster prior can cluster public features of, by name: no torch, no scikit-learn."""

from __future__ import annotations

ENCODERS = ("pca", "spectral", "autoencoder", "raw")
#: the suffix of a user's own encoder: a module saved with ``torch.export.save``
ENCODER_FILE_SUFFIX = ".pt2"


def is_encoder_file(encoder: str) -> bool:
    """Whether ``encoder`` is the path of a user's own encoder (ending in :data:`ENCODER_FILE_SUFFIX`)."""
    return encoder.endswith(ENCODER_FILE_SUFFIX)


__all__ = ["ENCODERS", "ENCODER_FILE_SUFFIX", "is_encoder_file"]
