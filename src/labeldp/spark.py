"""labeldp where the data lives: a label column released on Spark (``pip install labeldp[spark]``), into the
release folder every route reads; the guide: docs/guides/beyond-one-machine.md."""

from labeldp.boundary.on_spark import privatize, session

__all__ = ["privatize", "session"]
