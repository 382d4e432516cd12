"""labeldp where the data lives: a label column released on Dask (``pip install labeldp[dask]``), into the
release folder every route reads; the guide: docs/guides/beyond-one-machine.md."""

from labeldp.boundary.on_dask import privatize

__all__ = ["privatize"]
