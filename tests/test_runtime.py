import ctypes
import os

import pytest
import torch

from labeldp import runtime


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
