"""The defaults of releasing a label column once (``labeldp privatize``), stated once."""

from __future__ import annotations

#: rows drawn (and written, as one Parquet row group) at a time; they set the memory used, about
#: 60 bytes a row plus 8 a class for RR-with-prior's priors
DEFAULT_BATCH_ROWS = 1 << 20

__all__ = ["DEFAULT_BATCH_ROWS"]
