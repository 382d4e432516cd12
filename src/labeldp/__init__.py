"""labeldp: deep learning with label differential privacy (public inputs, private labels)."""

__version__ = "0.1.0"
