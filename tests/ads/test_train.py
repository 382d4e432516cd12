"""The ads route's pieces (labeldp.ads.run_pieces): slots from words, the channel of released labels read off
their likelihood rows, and the rate estimated through it."""

from __future__ import annotations

import numpy as np
import pytest

from labeldp.ads.run_pieces import channel_matrix, channel_rate, hash_spec
from labeldp.data.hashing import Slot
from labeldp.errors import ConfigError
from labeldp.mechanisms import flip_channel


def test_slots_are_each_column_then_each_cross_with_their_bits() -> None:
    spec = hash_spec(["advertiser", "site"], [("advertiser", "site")], bits=10, slot_bits={"advertiser:site": 20})
    assert spec.slots == (Slot(("advertiser",), 10), Slot(("site",), 10), Slot(("advertiser", "site"), 20))
    with pytest.raises(ConfigError, match="not hashed"):
        hash_spec(["advertiser"], slot_bits={"site": 4})
    with pytest.raises(ConfigError, match="two or more"):
        hash_spec(["advertiser"], [("site",)])


def test_the_channel_and_the_rate_come_from_the_released_labels() -> None:
    matrix = np.array([[0.9, 0.1], [0.3, 0.7]])
    rng = np.random.default_rng(0)
    truth = rng.random(200_000) < 0.2
    released = np.where(rng.random(truth.size) < np.where(truth, 0.7, 0.1), 1, 0)
    likelihood = matrix[:, released].T
    assert np.allclose(channel_matrix(released, likelihood), matrix)
    assert channel_rate(released, matrix) == pytest.approx(0.2, abs=0.005)
    ones = np.ones(5, dtype=np.int64)  # a column no label shows is the other's complement
    assert np.allclose(channel_matrix(ones, flip_channel(0.1)[:, ones].T), flip_channel(0.1))
