"""The ads route's settings (labeldp.config.hashed_config): refused before any spend, the route's training
defaults where the user leaves them."""

from __future__ import annotations

import pytest

from labeldp.config.hashed_config import ROUTE_TRAINING, HashedConfig
from labeldp.errors import ConfigError


def test_settings_that_cannot_work_are_refused() -> None:
    for bad in (
        {"route": "counts", "model": "fm"},
        {"route": "reports", "model": "fm"},
        {"max_rows_per_unit": 5},
        {"unit_column": "user", "max_rows_per_unit": 0},
        {"epochs": 0},
        {"lr": 0.0},
        {"route": "dp-sgd"},
    ):
        with pytest.raises(ConfigError):
            HashedConfig(**bad)


def test_the_training_settings_are_the_routes_unless_given() -> None:
    assert HashedConfig().training("counts")["epochs"] == ROUTE_TRAINING["counts"]["epochs"]
    assert HashedConfig(route="rr", model="fm").training("fm")["lr"] == ROUTE_TRAINING["fm"]["lr"]
    assert HashedConfig(epochs=3, lr=0.5).training("lr") | {"l2": 0} == {
        "epochs": 3,
        "lr": 0.5,
        "l2": 0,
        "batch_rows": 8192,
        "seed": 0,
    }
