"""labeldp's version, stated once: the package's metadata reads it from here (pyproject.toml's dynamic version)."""

__version__ = "0.1.0"
