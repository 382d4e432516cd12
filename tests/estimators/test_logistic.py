"""The logistic regression fitted from noisy label marginals (estimators/logistic.py): with exact
marginals the fit is scikit-learn's penalised logistic regression; the estimator follows
scikit-learn's conventions, charges its budget (folds on disjoint rows in parallel), refuses bad
input before any spend, and keeps rare positives that randomized response drowns."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import OneHotEncoder

from labeldp.boundary import LabelBudget, PrivateLabelAccessError, PrivateLabels
from labeldp.errors import BudgetError, ConfigError, DataError
from labeldp.estimators import LabelDPClassifier, LabelDPRegressor, ReleasedLabels
from labeldp.estimators.logistic import LabelDPLogisticRegression, fit_from_marginals
from labeldp.estimators.public_bins import PublicBins
from labeldp.mechanisms import noisy_marginals, randomized_response


def _table(n: int, positive_rate: float, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Public features (numeric, categorical with missing values, boolean) and a label whose log-odds
    are additive in them."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "age": rng.uniform(18, 80, n),
            "region": rng.choice(["north", "south", "east", None], n),
            "member": rng.random(n) < 0.3,
        }
    )
    logit = (
        np.log(positive_rate / (1 - positive_rate))
        + 1.5 * ((frame.age - 18) / 62) ** 2
        + frame.region.map({"north": 1.0, "south": -0.5, "east": 0.0}).fillna(0.5)
        + 1.0 * frame.member
    )
    return frame, (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)


def test_with_exact_marginals_the_fit_is_scikit_learns_penalised_logistic_regression() -> None:
    """Noiseless counts: the fit maximises the same penalised multinomial likelihood as scikit-learn's
    LogisticRegression on the bins' indicators (C = 1 / l2, free intercepts)."""
    frame, _ = _table(3000, 0.3, seed=1)
    labels = np.random.default_rng(2).integers(0, 3, len(frame)) + (frame.age.to_numpy() > 50)  # 4 classes
    bins = PublicBins(8).fit(frame)
    codes, sizes = bins.transform(frame), bins.bins_per_feature_
    counts = noisy_marginals(labels, codes, sizes, 4, 1e9, rng=0)  # noiseless at this epsilon
    coef, intercept = fit_from_marginals(codes, sizes, counts.astype(float), l2=3.0)
    design = OneHotEncoder(categories=[list(range(s)) for s in sizes]).fit_transform(codes)
    reference = LogisticRegression(C=1 / 3.0, tol=1e-10, max_iter=10_000).fit(design, labels)
    ours = design @ coef + intercept
    ours = np.exp(ours - ours.max(1, keepdims=True))
    assert np.allclose(ours / ours.sum(1, keepdims=True), reference.predict_proba(design), atol=2e-4)


def test_estimator_follows_scikit_learns_conventions_and_charges_its_budget() -> None:
    frame, labels = _table(4000, 0.2, seed=3)
    model = LabelDPLogisticRegression(epsilon=1.0, classes=[0, 1], insecure_noise_seed=0)
    assert clone(model).get_params() == model.get_params()
    model.fit(frame, PrivateLabels(labels, [0, 1]))
    probabilities = model.predict_proba(frame)
    assert probabilities.shape == (len(frame), 2) and np.allclose(probabilities.sum(1), 1.0)
    assert set(model.predict(frame)) <= {0, 1} and model.ledger_.epsilon() == pytest.approx(1.0, abs=1e-3)
    assert model.counts_.min() >= 0  # projected onto the bins' sizes
    budget = LabelBudget(epsilon=1.5)
    private = PrivateLabels(labels, [0, 1], budget=budget)
    LabelDPLogisticRegression(epsilon=1.0, classes=[0, 1]).fit(frame, private)
    with pytest.raises(BudgetError, match="refused before anything was drawn"):
        LabelDPLogisticRegression(epsilon=1.0, classes=[0, 1]).fit(frame, private)
    assert budget.spent == pytest.approx(1.0, abs=1e-3)
    with pytest.raises(PrivateLabelAccessError, match="released already"):  # without a budget: once
        unbudgeted = PrivateLabels(labels, [0, 1])
        for _ in range(2):
            LabelDPLogisticRegression(epsilon=1.0, classes=[0, 1]).fit(frame, unbudgeted)


def test_folds_on_disjoint_rows_compose_in_parallel() -> None:
    """Each fit releases the marginals of its own rows: two fits on disjoint halves spend epsilon 1 on
    every row, which the labels' ledger computes row by row."""
    frame, labels = _table(2000, 0.2, seed=3)
    private = PrivateLabels(labels, [0, 1])
    LabelDPLogisticRegression(epsilon=1.0, classes=[0, 1]).fit(frame[:1000], private[:1000])
    LabelDPLogisticRegression(epsilon=1.0, classes=[0, 1]).fit(frame[1000:], private[1000:])
    assert private.ledger.epsilon() == pytest.approx(1.0, abs=1e-3) and len(private.ledger.entries) == 2
    with pytest.raises(ConfigError, match="counts, not labels"):  # nothing released to score on
        LabelDPLogisticRegression(epsilon=1.0, classes=[0, 1]).fit(
            frame[:10], PrivateLabels(labels[:10], [0, 1])
        ).score(frame[:10], private[:10])


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (dict(classes=[0, 2]), ConfigError, "differ"),
        (dict(epsilon=0.0), ConfigError, "epsilon"),
        (dict(l2_regularization=0.0), ConfigError, "l2_regularization"),
        (dict(n_bins=1), ConfigError, "n_bins"),
    ],
)
def test_bad_input_is_refused_before_any_spend(bad, error, message) -> None:
    frame, labels = _table(200, 0.3, seed=4)
    budget = LabelBudget(epsilon=5.0)
    options = dict(epsilon=1.0, classes=[0, 1]) | bad
    private = PrivateLabels(labels, [0, 1], budget=budget)
    with pytest.raises(error, match=message):
        LabelDPLogisticRegression(**options).fit(frame, private)
    assert budget.spent == 0.0 and private.ledger.entries == ()


def test_labels_outside_the_domain_are_refused_without_saying_which() -> None:
    with pytest.raises(DataError, match="outside the declared classes") as refused:
        PrivateLabels(np.array([0, 1, 7, 1]), [0, 1])
    assert "7" not in str(refused.value) and "2" not in str(refused.value)  # neither the value nor its row


@pytest.mark.parametrize(
    "bad, error, message",
    [
        (dict(secure_rng=True, insecure_noise_seed=0), ConfigError, "secure"),
    ],
)
@pytest.mark.parametrize("estimator", ["marginals", "classifier", "regressor"])
def test_a_fit_that_cannot_release_spends_nothing(estimator, bad, error, message) -> None:
    """Checks that come with the noise source (conflicting noise options) run before anything is
    recorded, in every estimator."""
    frame, labels = _table(200, 0.3, seed=8)
    budget = LabelBudget(epsilon=5.0)
    private = (
        PrivateLabels(labels.astype(float), budget=budget)
        if estimator == "regressor"
        else PrivateLabels(labels, [0, 1], budget=budget)
    )
    make = {
        "marginals": lambda: LabelDPLogisticRegression(classes=[0, 1], **bad),
        "classifier": lambda: LabelDPClassifier(classes=[0, 1], **bad),
        "regressor": lambda: LabelDPRegressor(label_range=(0, 1), prior="uniform", **bad),
    }[estimator]
    with pytest.raises((error, DataError), match=message):
        make().fit(frame.assign(region=frame.region.astype("category")), private)
    assert budget.spent == 0.0 and private.ledger.entries == ()


def test_a_table_without_features_is_refused() -> None:
    with pytest.raises(ConfigError, match="no feature columns"):
        LabelDPLogisticRegression(classes=[0, 1]).fit(pd.DataFrame(index=range(3)), PrivateLabels([0, 1, 0], [0, 1]))


def test_three_classes_come_out_in_the_declared_order() -> None:
    """K = 3 through the estimator: the released counts sum to the bins' sizes and predict_proba's
    columns follow ``classes`` (here not sorted): at a large epsilon the model finds the class that
    age decides."""
    frame, _ = _table(6000, 0.3, seed=9)
    labels = np.where(frame.age < 40, "young", np.where(frame.age < 60, "middle", "old"))
    model = LabelDPLogisticRegression(epsilon=50.0, classes=["old", "young", "middle"], insecure_noise_seed=0)
    model.fit(frame, PrivateLabels(labels, ["old", "young", "middle"]))
    assert list(model.classes_) == ["old", "young", "middle"]
    assert model.predict_proba(frame).shape == (len(frame), 3)
    assert np.mean(model.predict(frame) == labels) > 0.9
    assert np.allclose(
        model.counts_.sum(axis=1).reshape(-1)[:5],
        np.bincount(model.bins_.transform(frame)[:, 0], minlength=model.bins_.bins_per_feature_[0])[:5],
    )


def test_released_labels_are_refused() -> None:
    frame, labels = _table(200, 0.3, seed=5)
    released = ReleasedLabels(labels, np.full((len(labels), 2), 0.5), [0, 1])
    with pytest.raises(ConfigError, match="releases label marginals"):
        LabelDPLogisticRegression(classes=[0, 1]).fit(frame, released)


def test_rare_positives_survive_where_randomized_response_drowns_them() -> None:
    """1.2 % positives at epsilon 1: randomized response turns about 27 % of all labels into noise, the
    marginals' noise is a few counts per bin. Over 3 noise draws each, the marginals' AUC (0.73, as
    without noise) beats gradient boosting on labels flipped by RR (0.56) by a wide margin."""
    frame, labels = _table(40_000, 0.003, seed=6)
    test, test_labels = _table(20_000, 0.003, seed=7)
    ours, flipped = [], []
    for draw in range(3):
        model = LabelDPLogisticRegression(epsilon=1.0, classes=[0, 1], insecure_noise_seed=draw).fit(
            frame, PrivateLabels(labels, [0, 1])
        )
        ours.append(roc_auc_score(test_labels, model.predict_proba(test)[:, 1]))
        noisy = randomized_response(labels, 2, 1.0, rng=draw)
        boosted = HistGradientBoostingClassifier(max_iter=50).fit(
            frame.assign(region=frame.region.astype("category")), noisy
        )
        flipped.append(
            roc_auc_score(test_labels, boosted.predict_proba(test.assign(region=test.region.astype("category")))[:, 1])
        )
    assert np.mean(ours) > np.mean(flipped) + 0.1, (ours, flipped)
    assert np.mean(ours) > 0.70, ours
