"""Process-wide settings for fast CPU training.

glibc's allocator serves each large block (by default from 128 KB up to a threshold that adapts up
to 32 MB) with fresh pages from the operating system and returns them when the block is freed. A
training step allocates and frees many large activations and gradients, so it pays a page fault
(and the kernel's zeroing) for every 4 KB page it touches, at every step (measured in docs/dpsgd.md).
The remedy PyTorch's CPU tuning guide gives is another allocator (jemalloc, tcmalloc) loaded with
``LD_PRELOAD``; :func:`reuse_freed_memory` gets the same effect from glibc itself, inside a running
process, by making it keep freed memory for the next allocation.

The ``labeldp`` command and the processes of a sweep call it at start. Library users can call it
once at the start of their own training script.

The thread policy, for a machine labeldp may share with other jobs, is declared here and applied on every
entry point (the user's guide: docs/guides/scaling.md, "Threads on a shared machine"):

1. **Threads: the free cores.** A computation uses the cores that no other process keeps busy
   (:func:`free_cores`), never more than it was set to use (``OMP_NUM_THREADS``, ``--threads``, a
   ``threadpoolctl`` limit of the user's). The ``labeldp`` command sets torch's threads so when a run
   starts and follows the free cores during training (:func:`set_threads`, :func:`recheck_threads`); the
   estimators' ``fit``, ``predict``, ``predict_proba``, ``decision_function`` and ``score`` lower the
   OpenMP and BLAS thread pools loaded in the process (scikit-learn's, torch's, numpy's) to them for the
   call (:func:`on_free_cores`). More threads than free cores wait, at every parallel region, for the
   thread the other process displaced (docs/results.md, "Threads beside a busy process").
2. **Idle OpenMP threads spin briefly, then sleep** (:func:`prefer_short_waits`): set by ``import
   labeldp`` and by the command first thing, unless the environment says how they wait. It reaches the
   OpenMP runtimes loaded after it (torch's, and scikit-learn's when labeldp is imported first) and the
   processes started from this one; a runtime loaded earlier keeps its own waits, and rule 1 still holds.

What the user set in the environment is kept: ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` as they are,
``OMP_NUM_THREADS`` as the most threads used.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

#: ``mallopt`` parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: the largest value ``mallopt`` takes (a C int): blocks up to 2 GB come from reusable heap memory
_LARGEST = 2**31 - 1


def reuse_freed_memory() -> bool:
    """Make glibc keep freed memory for reuse instead of returning it to the operating system.

    Blocks up to 2 GB are then taken from the heap (not mapped afresh), and up to 2 GB of free heap
    memory is kept. The cost: the process's resident memory stays near its peak until it exits
    (memory freed by one step is reused by the next, as with jemalloc or tcmalloc). It changes
    nothing that is computed. False where the C library is not glibc (macOS, musl, Windows): nothing done.
    """
    try:
        mallopt = ctypes.CDLL(None).mallopt  # the C library the process runs with
    except (OSError, AttributeError, TypeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, _LARGEST)) and bool(mallopt(_M_TRIM_THRESHOLD, _LARGEST))


#: datasets whose small MLP steps run fastest on one thread (tables; the embedded 8x8 digits): two
#: threads were several times slower than one on a busy 2-core machine
ONE_THREAD_DATASETS = ("csv", "digits")
#: seconds over which the runnable tasks are counted, at start and when re-checked during training
SAMPLE_SECONDS, RECHECK_SAMPLE_SECONDS = 0.2, 0.05
#: at least this many seconds between two re-checks of the free cores during a run (a check costs
#: :data:`RECHECK_SAMPLE_SECONDS`: half a percent of the time)
RECHECK_INTERVAL = 10.0
#: spins of an idle GNU OpenMP thread before it sleeps (GNU's default is 300,000; measured in
#: docs/guides/scaling.md)
WAIT_SPINS = 10_000
#: the automatic threads of this process while the command line chose them (None: fixed threads):
#: (the most to use, the time of the last check)
_AUTO: list[float] | None = None


def prefer_short_waits() -> bool:
    """Make OpenMP's idle threads spin briefly, then sleep, unless the environment already says how they
    wait (``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT``).

    Sets ``OMP_WAIT_POLICY=PASSIVE`` (every OpenMP runtime: sleep) and ``GOMP_SPINCOUNT`` to
    :data:`WAIT_SPINS` (GNU OpenMP, torch's on Linux, spins that long first: it takes precedence over
    the policy): threads spinning long wait for a core another process holds, threads that sleep at once
    pay a wake-up at every parallel layer (docs/guides/scaling.md). It acts only if called before
    torch is first imported (the OpenMP runtime reads it when it loads): ``import labeldp`` and the
    ``labeldp`` command call it first thing, and the processes started from this one inherit it. False
    where the environment had said how threads wait already.
    """
    if "OMP_WAIT_POLICY" in os.environ or "GOMP_SPINCOUNT" in os.environ:
        return False
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ["GOMP_SPINCOUNT"] = str(WAIT_SPINS)
    return True


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity, within a cgroup's CPU quota where one is set."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        cores = os.cpu_count() or 1
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, math.ceil(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def _runnable_tasks() -> int | None:
    """The machine's runnable tasks now (``procs_running`` of ``/proc/stat``), less this process's own
    running threads but one (this thread, which counts them; an idle OpenMP thread of this process that
    still spins is no other process's load), or None where the file does not exist."""
    try:
        with open("/proc/stat") as handle:
            for line in handle:
                if line.startswith("procs_running"):
                    return int(line.split()[1]) - _own_running_threads() + 1
    except (OSError, ValueError, IndexError):
        return None
    return None


def _own_running_threads() -> int:
    """This process's threads that are running or runnable now (at least 1: this one)."""
    running = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return 1
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/stat", "rb") as handle:
                state = handle.read().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        running += state == b"R"
    return max(1, running)


def busy_cores(sample_seconds: float = SAMPLE_SECONDS) -> float:
    """How many cores other processes keep busy now: the runnable tasks other than this thread,
    counted every 10 ms over ``sample_seconds`` and averaged (Linux), else the load average of the last minute.
    """
    counts = []
    deadline = time.monotonic() + sample_seconds
    while True:
        count = _runnable_tasks()
        if count is None:
            break
        counts.append(count - 1)  # this thread is running while it counts
        if time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    if counts:
        return max(0.0, sum(counts) / len(counts))
    try:
        return max(0.0, os.getloadavg()[0])
    except (AttributeError, OSError):  # no load average (Windows): assume an idle machine
        return 0.0


def free_cores(sample_seconds: float = SAMPLE_SECONDS) -> int:
    """The cores this process can use without waiting for another process: its usable cores
    (:func:`usable_cores`), less those other processes keep busy (:func:`busy_cores`, rounded) where
    the machine has no spare ones; at least 1.
    """
    busy = math.floor(busy_cores(sample_seconds) + 0.5)
    machine = max(os.cpu_count() or 1, usable_cores())
    return max(1, min(usable_cores(), machine - busy))


def _environment_limit(wanted: int) -> int:
    """``wanted``, at most ``OMP_NUM_THREADS`` where the environment sets it."""
    limit = os.environ.get("OMP_NUM_THREADS", "")
    return min(wanted, int(limit)) if limit.isdigit() and int(limit) > 0 else wanted


def default_threads(dataset: str, cores: int | None = None) -> int:
    """Threads for torch when none are asked for.

    One for tables and the embedded digits (:data:`ONE_THREAD_DATASETS`), whose small MLP steps are
    too short to share between cores; for the others the cores that are free when the run starts
    (:func:`free_cores`: a core another process keeps busy is left to it), or ``cores``; at most
    ``OMP_NUM_THREADS`` where the environment sets it (as torch itself reads it: a job scheduler's or a
    test runner's share of the machine). ``cores``: a sweep worker's share.
    """
    if dataset in ONE_THREAD_DATASETS:
        return 1
    return max(1, _environment_limit(free_cores() if cores is None else cores))


def set_threads(threads: int | None, dataset: str, cores: int | None = None) -> int:
    """Set torch's CPU threads: ``threads`` where given, else :func:`default_threads`, which is then
    re-checked during the run (:func:`recheck_threads`) within the same limit, at most ``cores`` (a sweep
    worker's share; default: every usable one). Returns the threads set.
    """
    import torch

    global _AUTO
    if threads is not None:
        _AUTO = None
        torch.set_num_threads(threads)
        return threads
    if dataset in ONE_THREAD_DATASETS:
        _AUTO = None
        torch.set_num_threads(1)
        return 1
    limit = _environment_limit(cores or usable_cores())
    chosen = 1 if limit == 1 else default_threads(dataset, min(limit, free_cores()))  # one: nothing to count
    _AUTO = [limit, time.monotonic()]
    torch.set_num_threads(chosen)
    return chosen


def recheck_threads() -> None:
    """Between training steps: where the threads were chosen automatically (:func:`set_threads` without
    ``threads``) and :data:`RECHECK_INTERVAL` seconds have passed since the last check, count the free
    cores again (briefly) and follow them, within the same limit. Otherwise nothing (a library user's
    threads are never changed)."""
    if _AUTO is None or _AUTO[0] == 1 or time.monotonic() - _AUTO[1] < RECHECK_INTERVAL:
        return
    import torch

    wanted = _environment_limit(min(int(_AUTO[0]), free_cores(RECHECK_SAMPLE_SECONDS)))
    _AUTO[1] = time.monotonic()
    if wanted != torch.get_num_threads():
        torch.set_num_threads(max(1, wanted))


#: the free cores last counted for :func:`on_free_cores` and when: (cores, time.monotonic())
_COUNTED: tuple[int, float] | None = None
#: threadpoolctl's controller of the thread pools loaded, and how many modules were imported when it looked
_POOLS: tuple[int, Any] | None = None
#: each thread's calls of :func:`free_core_threads` under way: the first one's pools lowered (with their
#: threads before) and the most threads it allowed, then None for each call within it
_CALLS = threading.local()
_Call = TypeVar("_Call", bound=Callable[..., Any])


def _thread_pools() -> list[Any]:
    """threadpoolctl's controllers of the OpenMP and BLAS thread pools loaded in this process (read again
    once a module has been imported since; empty without threadpoolctl)."""
    global _POOLS
    if _POOLS is None or _POOLS[0] != len(sys.modules):
        try:
            from threadpoolctl import ThreadpoolController

            controllers = ThreadpoolController().lib_controllers
        except Exception:  # noqa: BLE001  (no threadpoolctl, or one it cannot read: threads as they are)
            controllers = []
        _POOLS = (len(sys.modules), controllers)
    return _POOLS[1]


def estimator_threads() -> int:
    """The threads an estimator's call may use: the free cores (:func:`free_cores`, counted over
    :data:`RECHECK_SAMPLE_SECONDS`, and again once :data:`RECHECK_INTERVAL` seconds have passed), at most
    ``OMP_NUM_THREADS`` where the environment sets it; at least 1.
    """
    global _COUNTED
    if _environment_limit(usable_cores()) == 1:  # one core, or OMP_NUM_THREADS=1: nothing to count
        return 1
    if _COUNTED is None or time.monotonic() - _COUNTED[1] >= RECHECK_INTERVAL:
        _COUNTED = (free_cores(RECHECK_SAMPLE_SECONDS), time.monotonic())
    return max(1, _environment_limit(_COUNTED[0]))


@contextlib.contextmanager
def free_core_threads() -> Iterator[int]:
    """Within: the OpenMP and BLAS thread pools loaded in this process use at most
    :func:`estimator_threads` threads (a pool set to fewer keeps its own), each set back on leaving.
    Calls within calls (a fit that predicts) count and set once; each thread that calls sets its own
    (OpenMP's threads are set for the calling thread). Yields the most threads a pool uses within.
    """
    calls = _CALLS.__dict__.setdefault("calls", [])
    if calls:  # within a call of this thread's: as it set
        calls.append(None)
        try:
            yield calls[0][1]
        finally:
            calls.pop()
        return
    wanted, lowered = estimator_threads(), []
    if wanted < (os.cpu_count() or 1):  # else no pool has more (a quiet machine: nothing to read)
        for pool in _thread_pools():
            with contextlib.suppress(Exception):
                before = pool.num_threads
                if before > wanted:
                    pool.set_num_threads(wanted)
                    lowered.append((pool, before))
    calls.append((lowered, wanted))
    try:
        yield wanted
    finally:
        calls.pop()
        for pool, before in reversed(lowered):
            with contextlib.suppress(Exception):
                pool.set_num_threads(before)


def on_free_cores(method: _Call) -> _Call:
    """An estimator's method that runs with :func:`free_core_threads` (the thread policy's rule 1)."""

    @functools.wraps(method)
    def call(*args: Any, **kwargs: Any) -> Any:
        with free_core_threads():
            return method(*args, **kwargs)

    return call  # type: ignore[return-value]


def requested() -> bool:
    """Whether the environment asks for more than one process (``torchrun``: ``WORLD_SIZE`` above 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def env_rank() -> int:
    """This process's rank as the environment states it (``RANK``, 0 when unset; before any process group)."""
    return int(os.environ.get("RANK", "0"))
