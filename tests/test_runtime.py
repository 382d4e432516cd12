"""The runtime settings (runtime.py): freed memory is reused for large tensors where glibc allows, and
the default thread count respects the environment."""

import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from sklearn.dummy import DummyClassifier
from threadpoolctl import threadpool_info, threadpool_limits

from labeldp import runtime
from labeldp.cli import main


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mapped_bytes() -> int:
    """Bytes glibc holds in blocks mapped one by one from the operating system (not heap memory)."""
    mallinfo2 = ctypes.CDLL(None).mallinfo2
    mallinfo2.restype = _MallInfo2
    return mallinfo2().hblkhd


def test_reuse_freed_memory_serves_large_tensors_from_reusable_heap_memory():
    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("needs glibc 2.33 or later")
    assert runtime.reuse_freed_memory()
    before = _mapped_bytes()
    block = torch.empty(64 << 20, dtype=torch.uint8)  # above glibc's own largest mapping threshold (32 MB)
    assert _mapped_bytes() == before
    del block


def test_reuse_freed_memory_does_nothing_without_glibc(monkeypatch):
    class NoMallopt:
        def __init__(self, name):
            pass

    monkeypatch.setattr(runtime.ctypes, "CDLL", NoMallopt)
    assert runtime.reuse_freed_memory() is False


def test_default_threads_respect_the_environment(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0: os.cpu_count() or 1)  # an idle machine
    assert runtime.default_threads("csv") == 1
    assert runtime.default_threads("mnist") == (os.cpu_count() or 1)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # a scheduler's share of the machine, or pytest-xdist's
    assert runtime.default_threads("mnist") == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "not a number")
    assert runtime.default_threads("mnist") == (os.cpu_count() or 1)


def test_free_cores_leave_a_busy_core_to_its_process(monkeypatch) -> None:
    monkeypatch.setattr(runtime, "usable_cores", lambda: 2)
    monkeypatch.setattr(runtime.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(runtime, "_runnable_tasks", lambda: 2)  # this thread and one busy process
    assert runtime.busy_cores(0.02) == 1
    assert runtime.free_cores(0.02) == 1
    monkeypatch.setattr(runtime, "_runnable_tasks", lambda: 1)  # this thread alone
    assert runtime.free_cores(0.02) == 2
    monkeypatch.setattr(runtime, "_runnable_tasks", lambda: 9)  # a crowd: still one thread
    assert runtime.free_cores(0.02) == 1


def test_free_cores_fall_back_on_the_load_average(monkeypatch) -> None:
    monkeypatch.setattr(runtime, "_runnable_tasks", lambda: None)  # no /proc/stat (macOS)
    monkeypatch.setattr(runtime.os, "getloadavg", lambda: (3.0, 1.0, 1.0))
    assert runtime.busy_cores(0.02) == 3.0


def test_on_a_busy_machine_an_image_run_takes_the_free_cores_only(monkeypatch, restore_threads) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0: 3)
    monkeypatch.setattr(runtime, "usable_cores", lambda: 8)
    assert runtime.default_threads("mnist") == 3
    assert runtime.default_threads("csv") == runtime.default_threads("digits") == 1
    assert runtime.set_threads(None, "mnist") == 3 and torch.get_num_threads() == 3
    assert runtime.set_threads(None, "mnist", cores=2) == 2  # a sweep worker's share
    assert runtime.set_threads(5, "csv") == 5 and runtime._AUTO is None  # --threads as typed


def test_automatic_threads_follow_the_free_cores_during_training(monkeypatch, restore_threads) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "usable_cores", lambda: 4)
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0: 4)
    runtime.set_threads(None, "mnist")
    assert torch.get_num_threads() == 4
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0: 1)  # another process started
    runtime.recheck_threads()
    assert torch.get_num_threads() == 4  # not yet: at most one check per interval
    runtime._AUTO[1] -= runtime.RECHECK_INTERVAL
    runtime.recheck_threads()
    assert torch.get_num_threads() == 1
    runtime.set_threads(2, "mnist")  # threads a user chose are never changed
    runtime.recheck_threads()
    assert torch.get_num_threads() == 2


def test_one_thread_allowed_counts_no_cores(monkeypatch, restore_threads) -> None:
    """OMP_NUM_THREADS=1 (a scheduler's share, this suite's): no 0.2 s count of the busy cores at a run's start."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0: pytest.fail("counted"))
    assert runtime.set_threads(None, "mnist") == 1
    runtime._AUTO[1] -= runtime.RECHECK_INTERVAL
    runtime.recheck_threads()


def test_the_command_makes_idle_openmp_threads_spin_briefly_then_sleep_unless_told_otherwise(monkeypatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    main(["profiles", "^digits/e1/lp-1st/run0$"])
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"
    assert os.environ["GOMP_SPINCOUNT"] == str(runtime.WAIT_SPINS)
    for name, value in (("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "300000")):
        monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
        monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
        monkeypatch.setenv(name, value)
        assert runtime.prefer_short_waits() is False
        assert os.environ[name] == value and len({"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"} & set(os.environ)) == 1


def test_import_labeldp_makes_idle_openmp_threads_spin_briefly_and_keeps_what_the_user_set() -> None:
    """In a fresh process: ``import labeldp`` sets the wait policy (before an OpenMP runtime loads);
    a value the user set in the environment is kept, and nothing is added beside it."""
    show = "import os, labeldp; print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
    bare = {key: value for key, value in os.environ.items() if key not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    for given, expected in (
        ({}, f"PASSIVE {runtime.WAIT_SPINS}"),
        ({"GOMP_SPINCOUNT": "300000"}, "None 300000"),
        ({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE None"),
    ):
        said = subprocess.run(
            [sys.executable, "-c", show], env={**bare, **given}, capture_output=True, text=True, check=True
        )
        assert said.stdout.split() == expected.split()


class _Recorder(DummyClassifier):
    """Records the threads of the loaded thread pools while it fits."""

    seen: list[int] = []

    def fit(self, X, y, sample_weight=None):
        _Recorder.seen.extend(pool["num_threads"] for pool in threadpool_info())
        return super().fit(X, y, sample_weight)


def test_the_estimators_use_the_free_cores_and_never_more_threads_than_set(monkeypatch) -> None:
    from labeldp import LabelDPClassifier, PrivateLabels

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(runtime, "usable_cores", lambda: 2)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    X, labels = np.arange(40.0).reshape(20, 2), np.array(["no", "yes"] * 10)
    model = LabelDPClassifier(_Recorder(), epsilon=1.0, insecure_noise_seed=0)
    for free, expected in ((1, {1}), (2, {2})):  # another process keeps a core busy; a quiet machine
        monkeypatch.setattr(runtime, "free_cores", lambda sample_seconds=0, free=free: free)
        monkeypatch.setattr(runtime, "_COUNTED", None)
        _Recorder.seen.clear()
        with threadpool_limits(2):
            model.fit(X, PrivateLabels(labels, ["no", "yes"]))
            assert {pool["num_threads"] for pool in threadpool_info()} == {2}  # set back after the fit
        assert set(_Recorder.seen) == expected
    _Recorder.seen.clear()
    with threadpool_limits(1):  # a user's limit below the free cores is kept
        model.fit(X, PrivateLabels(labels, ["no", "yes"]))
    assert set(_Recorder.seen) == {1}
