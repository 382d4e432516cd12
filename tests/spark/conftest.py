"""One local Spark session for the tests of a process (``local[2]``, the cores of the machine)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from labeldp import spark

    return spark.session("local[2]")
