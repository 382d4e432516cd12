"""A release folder written once: refused where one is, written under a hidden name (``.OUT.partial``, its
owner's only) while a lock (``.OUT.lock``, never removed: ``labeldp.files.exclusive_lock``) keeps a second
writer out, flushed to disk and renamed into place (:func:`publish`). Plumbing of files only: nothing here
reads a label; the release drawn into the folder is :mod:`labeldp.boundary.release_folder`'s.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from labeldp.accounting.datasets import folder_release
from labeldp.errors import SECOND_RELEASE, ReleaseExistsError
from labeldp.files import exclusive_lock


@contextlib.contextmanager
def system_allocator() -> Iterator[None]:
    """Arrow allocates from the C library's malloc meanwhile, pyarrow's default pool restored after.

    pyarrow's default, mimalloc, hands freed memory back to the system, so every block pays its page faults
    again. Buffers remember their pool, so the switch is safe; it is process-wide while it lasts.
    """
    previous = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(previous)


def refuse_existing(out: Path) -> None:
    if out.exists() or out.is_symlink():
        raise ReleaseExistsError(
            f"{out} already exists. A label column is released once: releasing it again would spend its privacy "
            "budget a second time. Train on the release that is there (labeldp.load_release), or write "
            "a release of other labels to a new folder"
        )


def fsync(path: Path) -> None:
    """Flush the file or folder ``path`` to disk."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def folder_lock(out: Path) -> contextlib.AbstractContextManager[None]:
    """The lock of a release into ``out`` (``.OUT.lock`` beside it), held while it is drawn and published:
    two writers would be two draws; RunLockedError if another process holds it."""
    return exclusive_lock(out.parent / f".{out.name}.lock", f"the release {out}")


def partial_folder(out: Path) -> Path:
    """The hidden folder a release is written into, new and its owner's only; refused if a killed release
    left one (its labels were drawn).
    """
    refuse_existing(out)
    partial = out.parent / f".{out.name}.partial"
    if partial.exists():
        raise ReleaseExistsError(
            f"{partial} was left by a release into {out} that was killed before it finished: it holds labels "
            "drawn then, and drawing them again would spend their budget a second time for whoever can read "
            "it. If nobody else has read it (it is readable by its owner only), delete it to release afresh "
            f"{SECOND_RELEASE}"
        )
    partial.mkdir()
    partial.chmod(0o700)  # the noisy labels of an unfinished release are its owner's only
    return partial


def publish(partial: Path, out: Path) -> None:
    """Make the finished ``partial`` folder the release ``out``: as readable as the umask lets a new folder be,
    renamed, and its release id no longer pending for the path (a folder made there again is a new release)."""
    mask = os.umask(0)
    os.umask(mask)
    partial.chmod(0o777 & ~mask)
    refuse_existing(out)
    os.rename(partial, out)
    folder_release(out)
    fsync(out.parent)
