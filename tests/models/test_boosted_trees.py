"""BoostedTrees: a fitted HistGradientBoostingClassifier's trees as a torch module, its predictions scikit-learn's
(raw scores bit for bit), its state loaded into an empty one, and the channel inverted as LabelDPClassifier does."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.ensemble import HistGradientBoostingClassifier

from labeldp.errors import ConfigError
from labeldp.models import build_model
from labeldp.models.boosted_trees import BoostedTrees


def _data(classes: int, rows: int = 1500, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(rows, 5)).astype(np.float32)
    x[rng.random(x.shape) < 0.1] = np.nan  # missing values go where each split learned to send them
    score = np.nan_to_num(x[:, 0]) * 2 + np.nan_to_num(x[:, 1]) + rng.normal(size=rows)
    return x, np.digitize(score, np.quantile(score, np.linspace(0, 1, classes + 1)[1:-1]))


def _fitted(classes: int, **settings) -> tuple[HistGradientBoostingClassifier, np.ndarray]:
    x, y = _data(classes)
    return HistGradientBoostingClassifier(max_iter=40, random_state=0, **settings).fit(x, y), x


@pytest.mark.parametrize("classes", [2, 3])
def test_its_predictions_are_scikit_learns(classes: int) -> None:
    estimator, x = _fitted(classes)
    model = BoostedTrees(classes)
    model.set_trees(estimator)
    new, _ = _data(classes, rows=700, seed=1)
    with torch.no_grad():
        raw = model.raw(torch.from_numpy(new)).numpy()
        probabilities = model.probabilities(torch.from_numpy(new)).numpy()
        logits = model(torch.from_numpy(new)).numpy()
    assert np.array_equal(raw, estimator._raw_predict(new))  # the same sums in the same order: bit for bit
    # the link (expit, softmax) is torch's: equal to within a unit in the last place
    np.testing.assert_allclose(probabilities, estimator.predict_proba(new), rtol=0, atol=1e-15)
    assert np.array_equal(probabilities.argmax(axis=1), estimator.predict(new))
    np.testing.assert_allclose(np.exp(logits), probabilities, rtol=1e-12, atol=1e-20)


def test_an_empty_model_loads_a_saved_one_by_name(tmp_path) -> None:
    estimator, x = _fitted(3)
    model = BoostedTrees(3)
    model.set_trees(estimator)
    torch.save(model.state_dict(), tmp_path / "model.pt")
    loaded = build_model("gbdt", (5,), 3)
    with torch.no_grad():
        assert torch.allclose(loaded(torch.from_numpy(x)), torch.full((len(x), 3), -np.log(3.0), dtype=torch.float64))
    loaded.load_state_dict(torch.load(tmp_path / "model.pt"))
    assert loaded.fitted and next(loaded.parameters()).requires_grad is False
    with torch.no_grad():
        assert torch.equal(loaded.raw(torch.from_numpy(x)), model.raw(torch.from_numpy(x)))
    with pytest.raises(ConfigError, match="table"):
        build_model("gbdt", (1, 8, 8), 3)


def test_the_channel_is_inverted_as_labeldp_classifier_inverts_it() -> None:
    estimator, x = _fitted(2)
    keep, other = np.e / (1 + np.e), 1 / (1 + np.e)
    model = BoostedTrees(2)
    model.set_trees(estimator, (keep, other))
    with torch.no_grad():
        inverted = model.probabilities(torch.from_numpy(x)).numpy()
    expected = np.clip((estimator.predict_proba(x) - other) / (keep - other), 0, None)
    np.testing.assert_allclose(inverted, expected / expected.sum(axis=1, keepdims=True), rtol=1e-12, atol=1e-15)


def test_classes_the_fit_never_saw_get_probability_zero() -> None:
    x, y = _data(2)
    estimator = HistGradientBoostingClassifier(max_iter=10).fit(x, np.where(y == 1, 3, 0))  # classes 0 and 3 of 4
    model = BoostedTrees(4)
    model.set_trees(estimator)
    with torch.no_grad():
        probabilities = model.probabilities(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(probabilities[:, [0, 3]], estimator.predict_proba(x), atol=1e-15)
    assert not probabilities[:, [1, 2]].any()


def test_categorical_splits_are_refused() -> None:
    x, y = _data(2)
    x[:, 4] = np.abs(np.nan_to_num(x[:, 4])).round()
    estimator = HistGradientBoostingClassifier(max_iter=5, categorical_features=[4]).fit(x, y)
    with pytest.raises(ValueError, match="numeric splits"):
        BoostedTrees(2).set_trees(estimator)
