"""LabelDPRegressor (estimators/regressor.py): scikit-learn conventions, the ledger and the shared
budget, the checks before any release, and RR-on-bins beating the Laplace mechanism at epsilon 1 with
a flexible learner."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import KFold, cross_val_score
from sklearn.neighbors import KNeighborsRegressor
from sklearn.tree import DecisionTreeRegressor

from labeldp.boundary import LabelBudget, PrivateLabelAccessError, PrivateLabels
from labeldp.errors import BudgetError, ConfigError, DataError
from labeldp.estimators import LabelDPRegressor

RANGE = (0.0, 100.0)


def _problem(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A smooth, non-linear regression on [0, 100] with noise of 5."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-2, 2, size=(n, 2))
    y = np.clip(50 + 25 * np.sin(2 * x[:, 0]) + 10 * x[:, 1] + rng.normal(scale=5, size=n), *RANGE)
    return x, y


def _tree() -> DecisionTreeRegressor:
    return DecisionTreeRegressor(min_samples_leaf=100, random_state=0)


def test_follows_scikit_learn_conventions_and_spends_the_requested_epsilon() -> None:
    x, y = _problem(1000, 0)
    model = LabelDPRegressor(_tree(), epsilon=2.0, label_range=RANGE, grid=21, insecure_noise_seed=0)
    copy = clone(model)
    assert copy is not model and copy.get_params()["epsilon"] == 2.0 and copy.get_params()["grid"] == 21
    model.fit(x, PrivateLabels(y))
    predictions = model.predict(x[:50])
    assert predictions.shape == (50,) and predictions.min() >= 0.0 and predictions.max() <= 100.0
    assert model.grid_.size == 21 and model.ledger_.epsilon() == pytest.approx(2.0, abs=1e-3)
    assert model.prior_.sum() == pytest.approx(1.0) and model.bin_values_.size >= 2
    assert np.isin(model.released_, model.bin_values_).all()
    laplace = LabelDPRegressor(
        _tree(), epsilon=2.0, label_range=RANGE, grid=21, mechanism="laplace", insecure_noise_seed=0
    ).fit(x, PrivateLabels(y))
    assert laplace.ledger_.epsilon() == pytest.approx(2.0, abs=1e-3)
    given = LabelDPRegressor(
        _tree(), epsilon=2.0, grid=np.linspace(0, 100, 11), prior=np.ones(11), insecure_noise_seed=0
    ).fit(x, PrivateLabels(y))  # a public prior costs nothing
    assert given.ledger_.epsilon() == pytest.approx(2.0, abs=1e-3) and given.prior_ == pytest.approx(np.ones(11) / 11)


def test_refuses_what_it_cannot_do_before_any_release() -> None:
    x, y = _problem(200, 0)
    budget = LabelBudget(epsilon=10.0)
    private = PrivateLabels(y, budget=budget)
    for bad, match in (
        ({"label_range": None}, "needs the label domain"),
        ({"prior_epsilon": 1.0}, "prior_epsilon"),
        ({"mechanism": "gaussian"}, "mechanism"),
        ({"prior": np.ones(3)}, "non-negative weights over the grid"),
        ({"grid": np.array([0.0, 10.0, 100.0]), "mechanism": "laplace"}, "evenly spaced"),
    ):
        model = LabelDPRegressor(_tree(), **{"epsilon": 1.0, "label_range": RANGE, **bad})
        with pytest.raises(ValueError, match=match):
            model.fit(x, private)
        assert not hasattr(model, "ledger_")
    with pytest.raises(DataError, match="missing or infinite"):
        PrivateLabels(np.where(y > 90, np.nan, y))
    with pytest.raises(ConfigError, match="private numeric labels"):
        LabelDPRegressor(_tree(), label_range=RANGE).fit(x, y)  # a plain array is public to labeldp
    assert budget.spent == 0.0 and private.ledger.entries == ()


def test_folds_share_one_release_and_a_new_one_needs_the_budget() -> None:
    """Cross-validation on private values spends epsilon once: every fold trains on the one release;
    a fit with other release settings is a second release, refused without a budget and charged to one."""
    x, y = _problem(600, 0)
    private = PrivateLabels(y)
    model = LabelDPRegressor(_tree(), epsilon=1.0, label_range=RANGE, grid=11)
    scores = cross_val_score(model, x, private, cv=KFold(5), scoring=lambda est, X, _: -np.mean(est.predict(X)))
    assert np.isfinite(scores).all() and len(private.ledger.entries) == 2  # the histogram and RR-on-bins
    assert private.ledger.epsilon() == pytest.approx(1.0, abs=1e-3)
    with pytest.raises(PrivateLabelAccessError, match="released already"):
        LabelDPRegressor(_tree(), epsilon=2.0, label_range=RANGE, grid=11).fit(x, private)
    budget = LabelBudget(epsilon=2.001)  # PLD composition of the histogram and RR-on-bins: 1.0001 per fit
    capped = PrivateLabels(y, budget=budget)
    model.fit(x, capped)
    LabelDPRegressor(_tree(), epsilon=1.0, label_range=RANGE, grid=21).fit(x, capped)
    assert budget.spent == pytest.approx(2.0, abs=1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(BudgetError, match="past their budget"):
            LabelDPRegressor(_tree(), epsilon=1.0, label_range=RANGE, grid=31).fit(x, capped)
    assert budget.spent == pytest.approx(2.0, abs=1e-3)


@pytest.mark.parametrize("learner", [_tree(), KNeighborsRegressor(n_neighbors=100)], ids=["tree", "knn"])
def test_rr_on_bins_beats_the_laplace_mechanism_at_epsilon_1(learner) -> None:
    """At epsilon 1 the Laplace noise on [0, 100] has a standard deviation of 141, many times the
    label's spread (21): a flexible learner fitted on it is worse than predicting the mean. RR-on-bins
    under a noisy histogram prior (with its shrinkage undone) roughly halves the error of the mean.
    The learning on the released values without undoing the shrinkage is no better than the mean."""
    x, y = _problem(2000, 0)
    x_test, y_test = _problem(1000, 1)
    errors = {}
    for name, options in (("bins", {}), ("laplace", {"mechanism": "laplace"}), ("shrunk", {"debias": False})):
        errors[name] = np.mean(
            [
                np.mean(
                    (
                        LabelDPRegressor(
                            learner, epsilon=1.0, label_range=RANGE, grid=21, insecure_noise_seed=seed, **options
                        )
                        .fit(x, PrivateLabels(y))
                        .predict(x_test)
                        - y_test
                    )
                    ** 2
                )
                for seed in range(3)
            ]
        )
    variance = y_test.var()
    assert errors["bins"] < 0.5 * variance and errors["bins"] < 0.75 * errors["laplace"]
    assert errors["bins"] < 0.5 * errors["shrunk"]


def test_its_score_on_private_labels_estimates_r2_as_the_classifier_s_estimates_accuracy() -> None:
    """score(X, PrivateLabels) refused with a message written for classifiers; it now estimates R^2 from the
    release the fit made, against each label's bin (close to the exact R^2 on the bins' values), and says so
    where there is no release to read."""
    x, y = _problem(4000, 1)
    private = PrivateLabels(y)
    model = LabelDPRegressor(_tree(), epsilon=4.0, label_range=RANGE, grid=21, insecure_noise_seed=0).fit(x, private)
    estimate = model.score(x, private)
    binned = model.bin_values_[np.abs(y[:, None] - model.bin_values_[None, :]).argmin(axis=1)]
    exact = 1 - np.mean((model.predict(x) - binned) ** 2) / np.var(binned)
    assert estimate == pytest.approx(exact, abs=0.1) and -1.0 < estimate <= 1.0
    assert model.score(x, y) == pytest.approx(model.score(x, y))  # public values: scikit-learn's exact R^2
    with pytest.raises(ConfigError, match="reads the release its fit made of them"):
        model.score(x, PrivateLabels(y))
    other = PrivateLabels(y[:400])
    laplace = LabelDPRegressor(_tree(), epsilon=4.0, label_range=RANGE, mechanism="laplace").fit(x[:400], other)
    with pytest.raises(ConfigError, match="Laplace mechanism"):
        laplace.score(x[:400], other)
