"""The recommender model (models/recommender.py), built for MovieLens's categorical codes."""

from __future__ import annotations

import pytest
import torch

from labeldp.data import load_dataset
from labeldp.errors import ConfigError
from labeldp.models import RecommenderMLP, build_model
from tests.helpers import write_movielens


def test_recommender_model(tmp_path) -> None:
    write_movielens(tmp_path)
    data = load_dataset("movielens", tmp_path)
    model = build_model(None, data.input_shape, data.num_classes, seed=0, categorical=data.categorical)
    assert isinstance(model, RecommenderMLP)
    assert model(torch.as_tensor(data.x_test)).shape == (30, 5)
    again = build_model(None, data.input_shape, data.num_classes, seed=0, categorical=data.categorical)
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), again.parameters()))
    with pytest.raises(ConfigError, match="categorical codes"):
        build_model("recommender", (10,), 5)
