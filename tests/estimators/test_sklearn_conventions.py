"""The estimators with scikit-learn's tools: classes in their own dtype, scikit-learn's scorers on public
and on released labels (and refused private ones), fits on a release in any of its forms, sparse
inputs, and scikit-learn's input checks before any release."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import get_scorer
from sklearn.model_selection import GridSearchCV, KFold, cross_val_score

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import (
    PrivateLabelAccessError,
    PrivateLabels,
    privatize,
    privatize_table,
    release_randomized_response,
)
from labeldp.errors import ConfigError
from labeldp.estimators import LabelDPClassifier, LabelDPLogisticRegression, LabelDPRegressor
from labeldp.randomness import NoiseSource
from labeldp.released_metrics import released_scorer

CLASSIFIER_SCORERS = ["accuracy", "balanced_accuracy", "f1", "roc_auc", "neg_log_loss", "neg_brier_score"]
REGRESSOR_SCORERS = ["r2", "neg_mean_squared_error", "neg_mean_absolute_error"]
SEED = NoiseSource(insecure_seed=0)


def _data(n: int = 240, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Public inputs and integer labels 0 / 1 that depend on them."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    return X, (X[:, 0] + 0.5 * rng.normal(size=n) > 0).astype(int)


def _classifier(**params) -> LabelDPClassifier:
    return LabelDPClassifier(LogisticRegression(), epsilon=2.0, insecure_noise_seed=0, **params)


@pytest.mark.parametrize(
    "model",
    [_classifier(classes=[0, 1]), LabelDPLogisticRegression(epsilon=2.0, classes=[0, 1], insecure_noise_seed=0)],
)
def test_integer_classes_are_predicted_as_integers_and_scored_whichever_way_round(model) -> None:
    X, y = _data()
    model.fit(X, PrivateLabels(y, classes=[0, 1]))
    assert model.classes_.dtype == np.int64 and model.predict(X).dtype == np.int64
    accuracy = model.score(X, y)
    assert 0.6 < accuracy == model.score(X, y.astype(str)) == model.score(X, list(y.astype(float)))
    for name in CLASSIFIER_SCORERS:  # a public test set, scored by scikit-learn's own scorers
        assert np.isfinite(get_scorer(name)(model, X, y)), name
    texts = model.set_params(classes=["0", "1"]).fit(X, PrivateLabels(y.astype(str), classes=["0", "1"]))
    assert texts.classes_.dtype == object and list(texts.classes_) == ["0", "1"]
    assert texts.score(X, y) == texts.score(X, y.astype(str)) > 0.6
    assert texts.score(X, np.full(len(y), "maybe")) == 0.0  # a label outside the classes is never predicted


@pytest.mark.parametrize("scoring", CLASSIFIER_SCORERS)
def test_scikit_learns_scorers_work_on_released_labels_in_a_cross_validation_and_a_search(scoring) -> None:
    """Released labels are public: scikit-learn's scorers score on them (the released values, noise
    and all; ``released_scorer`` estimates the clean labels' metrics instead)."""
    X, y = _data()
    released = privatize(y, classes=[0, 1], epsilon=2.0, noise=SEED)
    scores = cross_val_score(_classifier(classes=[0, 1]), X, released, scoring=scoring, error_score="raise")
    assert np.all(np.isfinite(scores))
    search = GridSearchCV(
        _classifier(classes=[0, 1]), {"estimator__C": [0.001, 1.0]}, scoring=scoring, error_score="raise"
    ).fit(X, released)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.best_index_ == int(np.argmax(search.cv_results_["mean_test_score"]))


@pytest.mark.parametrize("scoring", REGRESSOR_SCORERS)
def test_scikit_learns_regression_scorers_work_on_released_values(scoring) -> None:
    """Values released once over a grid of numbers (RR over the grid's values) fit the regressor for
    free, and scikit-learn's regression scorers score on them."""
    X, _ = _data()
    values = np.clip(np.round(2 * X[:, 0] + 5), 0, 10).astype(int)
    released = privatize(values, classes=list(range(11)), epsilon=2.0, noise=SEED)
    model = LabelDPRegressor(Ridge())
    assert np.all(np.isfinite(cross_val_score(model, X, released, scoring=scoring, cv=KFold(3), error_score="raise")))
    search = GridSearchCV(model, {"estimator__alpha": [0.1, 10.0]}, scoring=scoring, cv=KFold(3), error_score="raise")
    assert np.all(np.isfinite(search.fit(X, released).cv_results_["mean_test_score"]))


def test_a_regressor_on_released_values_learns_the_clean_values_through_their_channel() -> None:
    """On RR over the grid's values, the debiased targets (channel weights times the values) have the
    clean value as expectation: the fit is far closer to the clean values than one on the released ones."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(3000, 2))
    values = np.clip(np.round(X[:, 0] + 2), 0, 4).astype(int)
    released = privatize(values, classes=[0, 1, 2, 3, 4], epsilon=1.0, noise=SEED)
    debiased = LabelDPRegressor(Ridge(), label_range=(0, 4), grid=5).fit(X, released)
    plain = LabelDPRegressor(Ridge(), debias=False).fit(X, released)
    assert debiased.ledger_.epsilon() == pytest.approx(1.0, abs=1e-3) and debiased.release_key_ is None
    assert list(debiased.grid_) == [0, 1, 2, 3, 4] and debiased.score(X, values) > plain.score(X, values) + 0.2
    with pytest.raises(ConfigError, match="not the declared grid"):
        LabelDPRegressor(label_range=(0, 4)).fit(X, released)  # 50 grid points, not the release's 5
    with pytest.raises(ConfigError, match="grid's values"):
        texts = np.array(list("abcde"))[values]
        LabelDPRegressor().fit(X, privatize(texts, classes=list("abcde"), epsilon=1.0, noise=SEED))


def test_private_labels_are_scored_by_released_scorer_and_refused_by_scikit_learns_scorers() -> None:
    X, y = _data()
    private = PrivateLabels(y, classes=[0, 1])
    search = GridSearchCV(
        _classifier(classes=[0, 1]), {"estimator__C": [0.001, 1.0]}, cv=KFold(3), scoring=released_scorer("roc_auc")
    ).fit(X, private)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"])) and len(private.ledger.entries) == 1
    for scoring in CLASSIFIER_SCORERS:
        with pytest.raises(PrivateLabelAccessError):
            cross_val_score(_classifier(classes=[0, 1]), X, private, cv=KFold(3), scoring=scoring)
    values = PrivateLabels(X[:, 0])
    for scoring in REGRESSOR_SCORERS:
        with pytest.raises(PrivateLabelAccessError):
            cross_val_score(LabelDPRegressor(Ridge(), label_range=(-3, 3)), X, values, cv=KFold(3), scoring=scoring)


def test_a_release_fits_in_any_of_its_forms(tmp_path) -> None:
    """A Release of the boundary (over the declared classes, its spend on the fit's rows) and the path
    of a release folder written by ``labeldp privatize`` fit for free, as ReleasedLabels do."""
    X, y = _data()
    private = PrivateLabels.from_indices(y, 2)
    release = release_randomized_response(PrivacyLedger(len(y)), private, np.arange(len(y)), 2, 2.0, 0, "labels")
    model = _classifier(classes=[0, 1]).fit(X, release)
    assert model.ledger_.epsilon() == pytest.approx(2.0, abs=1e-3) and model.predict(X).dtype == np.int64
    with pytest.raises(ConfigError, match="declare them"):
        _classifier().fit(X, release)
    table = pd.DataFrame({"id": np.arange(len(y)), "label": y})
    privatize_table(table, tmp_path / "release", label_column="label", id_column="id", classes=[0, 1], epsilon=2.0)
    for path in (tmp_path / "release", str(tmp_path / "release")):
        fitted = _classifier().fit(X, path)
        assert list(fitted.classes_) == [0, 1] and fitted.ledger_.epsilon() == pytest.approx(2.0, abs=1e-3)
    with pytest.raises(ConfigError, match="marginals, not labels"):
        LabelDPLogisticRegression().fit(X, tmp_path / "release")
    grid_release = release_randomized_response(
        PrivacyLedger(len(y)), PrivateLabels.from_indices(y * 4, 5), np.arange(len(y)), 5, 2.0, 0, "values"
    )
    regressor = LabelDPRegressor(Ridge(), label_range=(0, 4), grid=5).fit(X, grid_release)
    assert regressor.released_.max() <= 4 and regressor.ledger_.epsilon() == pytest.approx(2.0, abs=1e-3)


def test_sparse_inputs_fit_where_the_model_takes_them() -> None:
    X, y = _data()
    matrix = sp.csr_matrix(np.where(X > 0.5, X, 0.0))
    for model in (_classifier(classes=[0, 1]), LabelDPLogisticRegression(classes=[0, 1], insecure_noise_seed=0)):
        dense = model.fit(matrix.toarray(), PrivateLabels(y, classes=[0, 1])).predict_proba(matrix.toarray())
        assert np.allclose(model.fit(matrix, PrivateLabels(y, classes=[0, 1])).predict_proba(matrix), dense)
    regressor = LabelDPRegressor(Ridge(), label_range=(-3, 3), insecure_noise_seed=0)
    assert regressor.fit(matrix, PrivateLabels(X[:, 0])).predict(matrix).shape == (len(y),)
    with pytest.raises(TypeError, match="Sparse data was passed"):  # the default model takes no sparse matrix
        LabelDPClassifier(classes=[0, 1], insecure_noise_seed=0).fit(matrix, PrivateLabels(y, classes=[0, 1]))


def test_inputs_are_checked_as_scikit_learn_checks_them() -> None:
    X, y = _data()
    labels = PrivateLabels(y, classes=[0, 1])
    with pytest.raises(ValueError, match="Complex data not supported"):
        _classifier().fit(X + 1j, labels)
    with pytest.raises(ValueError, match="Expected 2D array"):
        _classifier().fit(X[:, 0], labels)
    with pytest.raises(ConfigError, match="requires y to be passed"):
        _classifier().fit(X, None)
    assert len(labels.ledger.entries) == 0  # nothing released
    model = _classifier().fit(pd.DataFrame(X, columns=["a", "b", "c"]), labels)
    assert model.n_features_in_ == 3 and list(model.feature_names_in_) == ["a", "b", "c"]
    with pytest.raises(ValueError, match="yet now missing:\n- c"):
        model.predict(pd.DataFrame(X[:, :2], columns=["a", "b"]))
    with pytest.raises(ValueError, match="Sample weights must contain at least one non-zero number"):
        _classifier().fit(X, labels, sample_weight=np.zeros(len(y)))


@pytest.mark.parametrize("model", [_classifier(), LabelDPLogisticRegression()])
def test_a_regressions_target_is_an_unknown_label_type_for_a_classifier(model) -> None:
    X, y = _data()
    with pytest.raises(ConfigError, match="Unknown label type: continuous"):
        model.fit(X, PrivateLabels(X[:, 0]))
    with pytest.raises(ConfigError, match="Unknown label type: continuous"):
        model.fit(X, PrivateLabels(y + 0.5, classes=[0.5, 1.5]))
