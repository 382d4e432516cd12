"""Process-wide settings for fast CPU training.

glibc's allocator serves each large block (by default from 128 KB up to a threshold that adapts up
to 32 MB) with fresh pages from the operating system and returns them when the block is freed. A
training step allocates and frees many large activations and gradients, so it pays a page fault
(and the kernel's zeroing) for every 4 KB page it touches, at every step: a 64 MB tensor costs
about 20 ms to create that way against 2.5 ms from reused memory on the 2-core development machine,
and a WRN-16-4 step at batch 256 runs about 1.6x faster once memory is reused (see the README).
The remedy PyTorch's CPU tuning guide gives is another allocator (jemalloc, tcmalloc) loaded with
``LD_PRELOAD``; :func:`reuse_freed_memory` gets the same effect from glibc itself, inside a running
process, by making it keep freed memory for the next allocation.

The ``labeldp`` command and the processes of a sweep call it at start. Library users can call it
once at the start of their own training script.
"""

from __future__ import annotations

import ctypes
import os

#: ``mallopt`` parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: the largest value ``mallopt`` takes (a C int): blocks up to 2 GB come from reusable heap memory
_LARGEST = 2**31 - 1


def reuse_freed_memory() -> bool:
    """Make glibc keep freed memory for reuse instead of returning it to the operating system.

    Blocks up to 2 GB are then taken from the heap (not mapped afresh), and up to 2 GB of free heap
    memory is kept. The cost: the process's resident memory stays near its peak until it exits
    (memory freed by one step is reused by the next, as with jemalloc or tcmalloc). It changes
    nothing that is computed.

    Returns
    -------
    bool
        True when applied, False where the C library is not glibc (e.g. macOS, musl, Windows), where it
        does nothing.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process runs with
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST)) and bool(mallopt(_M_TRIM_THRESHOLD, _LARGEST))


def default_threads(dataset: str) -> int:
    """Threads for torch when none are asked for.

    One for tables, whose small MLP steps are too short to share between cores (two threads were
    several times slower than one on a busy 2-core machine), every core for images; at most
    ``OMP_NUM_THREADS`` where the environment sets it (as torch itself reads it: a job scheduler's or a
    test runner's share of the machine).

    Parameters
    ----------
    dataset : str
        The run's dataset name; ``"csv"`` means a table.

    Returns
    -------
    int
        The number of threads, >= 1.
    """
    wanted = 1 if dataset == "csv" else os.cpu_count() or 1
    limit = os.environ.get("OMP_NUM_THREADS", "")
    return min(wanted, int(limit)) if limit.isdigit() and int(limit) > 0 else wanted


def requested() -> bool:
    """Whether the environment asks for more than one process (``torchrun`` with N > 1).

    Returns
    -------
    bool
        True when ``WORLD_SIZE`` is above 1.
    """
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def env_rank() -> int:
    """This process's rank as the environment states it (before any process group exists).

    Returns
    -------
    int
        ``RANK``, 0 when unset.
    """
    return int(os.environ.get("RANK", "0"))
