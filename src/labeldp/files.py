"""Writing files so that a crash never leaves half of one: write beside it, then rename over it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from labeldp.errors import RunLockedError


def write_atomic(path: str | os.PathLike, write: Callable[[Path], object]) -> Path:
    """Call ``write(tmp)`` on a temporary file beside ``path``, then ``os.replace`` it into place; ``path``.

    Readers see the old file or the new one, never a mix. The temporary name keeps the suffix, so
    writers that add one (numpy's ``savez``) do not.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`write_atomic`)."""
    return write_atomic(path, lambda tmp: tmp.write_text(text))


def write_json_atomic(path: str | os.PathLike, data: Any) -> Path:
    """``data`` as indented JSON with sorted keys and a final newline, written atomically."""
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike, holder: str | None = None) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the block: waited for where
    ``holder`` is None, else RunLockedError if another process is using ``holder``.

    The file is never removed: removed while held, a process that had opened it could lock the removed file
    while another locks a new one of the same name. Empty, it is harmless.
    """
    with open(path, "a") as handle:  # the lock goes when the file is closed
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if holder is None else fcntl.LOCK_NB))
        except BlockingIOError:
            raise RunLockedError(f"another process is using {holder}") from None
        yield
