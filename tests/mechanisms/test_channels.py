"""The channels of labels randomized outside labeldp (labeldp.mechanisms.channels): the guarantee a
channel implies, and the words that name one."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labeldp.errors import ConfigError
from labeldp.mechanisms import channel_epsilon, check_channel, flip_channel, parse_channel


def test_a_channels_epsilon_is_the_largest_factor_a_true_label_moves_a_report_by() -> None:
    assert channel_epsilon(flip_channel(0.1)) == pytest.approx(math.log(9))
    asymmetric = check_channel([[0.9, 0.1], [0.3, 0.7]], 2)
    assert channel_epsilon(asymmetric) == pytest.approx(max(math.log(3), math.log(7)))
    assert channel_epsilon(check_channel([[1.0, 0.0], [0.5, 0.5]], 2)) == math.inf
    assert np.allclose(parse_channel("[[0.8, 0.2], [0.2, 0.8]]", 2), flip_channel(0.2))
    for words in ("flip:0.7", "flip", "rr:x", "[[1, 2]]"):
        with pytest.raises(ConfigError):
            parse_channel(words, 2)
