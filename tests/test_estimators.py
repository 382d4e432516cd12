"""The scikit-learn estimators: conventions, the budget shared by fits, tuning on a release for free,
clean probabilities from noisy labels, and the unbiased clean-accuracy estimate."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from labeldp.accounting import PrivacyLedger
from labeldp.errors import BudgetError
from labeldp.estimators import (
    LabelBudget,
    LabelDPClassifier,
    ReleasedLabels,
    clean_accuracy_estimate,
    released_log_likelihood,
)
from labeldp.mechanisms import keep_probability, randomized_response, randomized_response_likelihood

CLASSES = ["no", "yes"]


def _table(n: int = 600, seed: int = 0) -> tuple[pd.DataFrame, np.ndarray]:
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({"x": rng.normal(size=n), "colour": rng.choice(["red", "green", "blue"], n)})
    logit = 2.0 * frame["x"] + (frame["colour"] == "red") * 1.5 - 0.5
    labels = np.where(rng.random(n) < 1 / (1 + np.exp(-logit)), "yes", "no")
    return frame, labels


def _logistic() -> object:
    encode = ColumnTransformer([("num", StandardScaler(), ["x"]), ("cat", OneHotEncoder(), ["colour"])])
    return make_pipeline(encode, LogisticRegression())


def test_follows_scikit_learn_conventions() -> None:
    frame, labels = _table()
    model = LabelDPClassifier(_logistic(), epsilon=2.0, classes=CLASSES, random_state=0, insecure_noise_seed=0)
    copy = clone(model)
    assert copy.get_params()["epsilon"] == 2.0 and copy is not model
    model.fit(frame, labels)
    assert list(model.classes_) == CLASSES and model.predict(frame[:3]).dtype == object
    assert model.predict_proba(frame).shape == (600, 2)
    assert model.ledger_.epsilon() == pytest.approx(2.0, abs=1e-3)
    with pytest.raises(ValueError, match="needs the label domain"):
        LabelDPClassifier(epsilon=1.0).fit(frame, labels)


def test_predict_proba_estimates_the_clean_probabilities() -> None:
    """On labels flipped by RR at epsilon 0.5 (keep 62 %), a model that learned the noisy labels would
    predict probabilities squeezed towards 1/2; the estimator's are those of the clean labels."""
    frame, labels = _table(4000, seed=1)
    clean = LabelDPClassifier(_logistic(), epsilon=50.0, classes=CLASSES, insecure_noise_seed=2).fit(frame, labels)
    private = LabelDPClassifier(_logistic(), epsilon=0.5, classes=CLASSES, insecure_noise_seed=2).fit(frame, labels)
    reference, estimate = clean.predict_proba(frame)[:, 1], private.predict_proba(frame)[:, 1]
    naive = private.estimator_.predict_proba(frame)[:, 1]  # what learning the released labels gives
    assert np.mean(np.abs(estimate - reference)) < 0.08 < 0.15 < np.mean(np.abs(naive - reference))
    assert estimate.std() > 0.8 * reference.std() > 1.5 * naive.std()  # not squeezed towards 1/2


def test_cross_validation_on_true_labels_pays_per_fit_and_stops_at_the_cap() -> None:
    frame, labels = _table()
    budget = LabelBudget(epsilon=3.0)
    model = LabelDPClassifier(_logistic(), epsilon=1.0, classes=CLASSES, budget=budget)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn warns about the refused fits
        scores = cross_val_score(model, frame, labels, cv=5)
    assert np.isfinite(scores).sum() == 3 and budget.spent == pytest.approx(3.0, abs=1e-3)
    with pytest.raises(BudgetError, match="refused before any release"):
        clone(model).fit(frame, labels)
    assert budget.spent == pytest.approx(3.0, abs=1e-3)


def test_grid_search_on_a_release_costs_nothing() -> None:
    frame, labels = _table()
    true = (labels == "yes").astype(int)
    noisy = randomized_response(true, 2, 1.0, rng=3)
    ledger = PrivacyLedger(len(true))
    release = ReleasedLabels(noisy, randomized_response_likelihood(noisy, 2, 1.0), CLASSES, ledger)
    search = GridSearchCV(LabelDPClassifier(_logistic(), classes=CLASSES), {"em_iterations": [0, 1]}, cv=3)
    search.fit(frame, release)
    assert search.best_estimator_.ledger_ is ledger and ledger.entries == ()
    assert 0.5 < search.best_score_ < 1.0


def test_released_log_likelihood_scores_a_release_through_its_channel() -> None:
    """The score is the log-likelihood of the released labels under the model's clean probabilities
    pushed through the channel: a constant model's score is computable by hand, an informative
    model scores higher, and a grid search with it as the scorer runs on the release alone."""
    frame, labels = _table(2000, seed=4)
    noisy = randomized_response((labels == "yes").astype(int), 2, 1.0, rng=5)
    release = ReleasedLabels(noisy, randomized_response_likelihood(noisy, 2, 1.0), CLASSES, PrivacyLedger(2000))
    informative = LabelDPClassifier(_logistic(), classes=CLASSES).fit(frame, release)
    constant = LabelDPClassifier(DummyClassifier(strategy="prior"), classes=CLASSES, em_iterations=0)
    constant.fit(frame, release)
    prior = constant.predict_proba(frame[:1])[0]
    by_hand = np.mean(np.log(release.likelihood @ prior))
    assert released_log_likelihood(constant, frame, release) == pytest.approx(by_hand)
    assert released_log_likelihood(informative, frame, release) > by_hand + 0.02
    search = GridSearchCV(LabelDPClassifier(_logistic(), classes=CLASSES), {"em_iterations": [0, 2]},
                          scoring=released_log_likelihood, cv=3).fit(frame, release)
    assert np.isfinite(search.best_score_) and search.best_score_ < 0


def test_fits_on_a_release_of_labeldp_privatize() -> None:
    from labeldp.privatize import privatize
    from labeldp.randomness import NoiseSource
    frame, labels = _table()
    release = privatize(labels, classes=CLASSES, epsilon=2.0, noise=NoiseSource(insecure_seed=1))
    model = LabelDPClassifier(_logistic()).fit(frame, release)
    assert list(model.classes_) == CLASSES and model.ledger_ is release.ledger
    assert model.score(frame, labels) > 0.7


def test_clean_accuracy_estimate_is_unbiased() -> None:
    """Over many RR releases of the same labels, the estimate averages to the accuracy on the clean
    labels (and the agreement with the released labels does not)."""
    rng = np.random.default_rng(4)
    true = rng.integers(0, 3, 2000)
    predictions = np.where(rng.random(2000) < 0.7, true, (true + 1) % 3)
    accuracy = float(np.mean(predictions == true))
    estimates, agreements = [], []
    for seed in range(300):
        noisy = randomized_response(true, 3, 1.0, rng=seed)
        release = ReleasedLabels(noisy, randomized_response_likelihood(noisy, 3, 1.0), ["a", "b", "c"])
        estimates.append(clean_accuracy_estimate(predictions, release))
        agreements.append(np.mean(predictions == noisy))
    spread = np.std(estimates) / math.sqrt(len(estimates))
    assert abs(np.mean(estimates) - accuracy) < 4 * spread
    assert abs(np.mean(agreements) - accuracy) > 20 * spread
    assert keep_probability(1.0, 3) < 1
