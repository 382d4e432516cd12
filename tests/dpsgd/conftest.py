"""Fixtures of the DP-SGD tests: float64 as torch's default dtype, which the modules that compare
per-example gradients with a loop over examples to a tight tolerance ask for (``pytestmark``)."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture
def float64():
    """torch's default dtype is float64 during the test, and what it was afterwards."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(previous)
