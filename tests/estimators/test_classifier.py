"""LabelDPClassifier (estimators/classifier.py): scikit-learn's conventions, private labels released
once and shared by every fold and candidate of a search (never by worker processes), the budget
charged what the fits record, scoring on released labels with the scorers of released_metrics, and
fits on a release of labeldp.privatize, per user too."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import clone
from sklearn.compose import ColumnTransformer
from sklearn.dummy import DummyClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, KFold, cross_validate
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import LabelBudget, PrivateLabelAccessError, PrivateLabels
from labeldp.errors import BudgetError, ConfigError
from labeldp.estimators import LabelDPClassifier, ReleasedLabels, released_log_likelihood
from labeldp.mechanisms import randomized_response, randomized_response_likelihood
from labeldp.released_metrics import released_scorer

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
    model.fit(frame, PrivateLabels(labels, CLASSES))
    assert list(model.classes_) == CLASSES and model.predict(frame[:3]).dtype == object
    assert model.predict_proba(frame).shape == (600, 2)
    assert model.ledger_.epsilon() == pytest.approx(2.0, abs=1e-3)
    with pytest.raises(ValueError, match="must be declared"):
        LabelDPClassifier(epsilon=1.0).fit(frame, PrivateLabels.from_indices((labels == "yes").astype(int), 2))


def test_true_labels_as_a_plain_array_are_refused_before_any_release(monkeypatch) -> None:
    """A plain array is public to labeldp: a fit cannot tell whether it was released before (every fold
    of a search would release it again), so it is refused and shows the route."""
    import labeldp.estimators.classifier as classifier

    monkeypatch.setattr(classifier, "release_stage_labels", None)  # any release would fail loudly
    frame, labels = _table()
    with pytest.raises(ConfigError, match="PrivateLabels"):
        LabelDPClassifier(_logistic(), classes=CLASSES).fit(frame, labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="fits failed"):  # every fold refused, before any release
            GridSearchCV(LabelDPClassifier(_logistic(), classes=CLASSES), {"em_iterations": [0, 1]}, cv=KFold(3)).fit(
                frame, labels
            )


def test_a_search_on_private_labels_shares_one_release_and_scores_on_it() -> None:
    """Every candidate and fold of a search trains on the one release of the labels (its ledger: one
    entry, epsilon 1 over every row) and is scored on the released labels of its held-out rows."""
    frame, labels = _table(900, seed=2)
    private = PrivateLabels(labels, CLASSES)
    model = LabelDPClassifier(_logistic(), epsilon=1.0, classes=CLASSES)
    grid = {"em_iterations": [0, 1], "estimator__logisticregression__C": [0.1, 1.0]}
    search = GridSearchCV(model, grid, cv=KFold(3)).fit(frame, private)
    assert len(private.ledger.entries) == 1 and private.ledger.epsilon() == pytest.approx(1.0, abs=1e-3)
    assert search.best_estimator_.ledger_.epsilon() == pytest.approx(1.0, abs=1e-3)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()
    scored = GridSearchCV(model, grid, cv=KFold(3), scoring=released_scorer("roc_auc")).fit(frame, private)
    assert 0.6 < scored.best_score_ <= 1 and len(private.ledger.entries) == 1
    errors = released_scorer("roc_auc", standard_error=True)
    with_errors = cross_validate(model, frame, private, cv=KFold(5), scoring=errors)
    assert np.all((with_errors["test_roc_auc"] >= 0) & (with_errors["test_roc_auc"] <= 1))
    assert np.all((with_errors["test_roc_auc_se"] > 0) & (with_errors["test_roc_auc_se"] < 0.2))
    refit = GridSearchCV(model, grid, cv=KFold(3), scoring=errors, refit="roc_auc").fit(frame, private)
    assert "mean_test_roc_auc_se" in refit.cv_results_ and len(private.ledger.entries) == 1
    folds = cross_validate(
        model, frame, private, cv=KFold(5), scoring={"acc": released_scorer("accuracy"), "ll": released_log_likelihood}
    )
    assert np.isfinite(folds["test_acc"]).all() and len(private.ledger.entries) == 1


@pytest.mark.parametrize(
    "search",
    [
        lambda model, grid: GridSearchCV(model, grid),  # stratified folds: the split would read the labels
        lambda model, grid: GridSearchCV(model, grid, cv=KFold(3), scoring="roc_auc"),  # a scorer on the labels
        lambda model, grid: GridSearchCV(model, grid, cv=KFold(3), scoring="accuracy"),
    ],
)
def test_no_scorer_or_split_of_a_search_ever_sees_private_labels(search) -> None:
    frame, labels = _table()
    private = PrivateLabels(labels, CLASSES)
    with pytest.raises(PrivateLabelAccessError, match="Release them once"):
        search(LabelDPClassifier(_logistic(), classes=CLASSES), {"em_iterations": [0, 1]}).fit(frame, private)
    assert len(private.ledger.entries) <= 1  # refused before a release, or after the one shared release


@pytest.mark.parametrize(
    "run",
    [
        lambda model, X, y: GridSearchCV(model, {"em_iterations": [0, 1]}, cv=KFold(5), n_jobs=2).fit(X, y),
        lambda model, X, y: cross_validate(model, X, y, cv=KFold(3), n_jobs=2),
    ],
)
def test_worker_processes_never_receive_private_labels(run) -> None:
    """With n_jobs > 1 joblib copies the estimator and the labels into each worker, where each copy
    would release them again with its own ledger and budget: refused before the search starts (it ended in
    joblib's PicklingError, the fix in the remote traceback), the fix named, nothing spent."""
    from labeldp.boundary import LabelsInAnotherProcessError

    frame, labels = _table()
    budget = LabelBudget(3.0)
    private = PrivateLabels(labels, CLASSES, budget=budget)
    with pytest.raises(LabelsInAnotherProcessError, match="Change n_jobs: n_jobs=2 would copy") as refused:
        run(LabelDPClassifier(_logistic(), classes=CLASSES), frame, private)
    assert "joblib.parallel_backend('threading')" in str(refused.value)
    assert budget.spent == 0 and private.ledger.entries == ()


def test_threads_share_the_labels_and_the_budget_reports_the_true_composition() -> None:
    """joblib's threading backend shares one set of labels: a search with n_jobs=2 makes one release,
    and the budget's spend is the composition of every release of the labels."""
    from joblib import parallel_backend

    frame, labels = _table()
    budget = LabelBudget(3.0)
    private = PrivateLabels(labels, CLASSES, budget=budget)
    with parallel_backend("threading"):
        GridSearchCV(
            LabelDPClassifier(_logistic(), classes=CLASSES), {"em_iterations": [0, 1]}, cv=KFold(5), n_jobs=2
        ).fit(frame, private)
    assert len(private.ledger.entries) == 1 and budget.spent == pytest.approx(1.0, abs=1e-3)


def test_a_budget_charges_what_multi_stage_fits_record() -> None:
    """Two-stage fits record RR over each stage's smallest k >= 2, whose profile at delta > 0 is worse
    than RR over K: the budget composes exactly what the fits record, row by row, and refuses the fit
    that could pass it before anything is drawn."""
    frame, _ = _table(400, seed=5)
    three = np.array(["no", "yes", "maybe"])[np.random.default_rng(0).integers(0, 3, 400)]
    budget = LabelBudget(6.2, delta=1e-3)
    private = PrivateLabels(three, ["no", "yes", "maybe"], budget=budget)
    fits = []
    with pytest.raises(BudgetError, match="refused before anything was drawn"):
        for seed in range(20):
            fits.append(
                LabelDPClassifier(
                    _logistic(), epsilon=1.0, stages=2, random_state=seed, classes=["no", "yes", "maybe"]
                ).fit(frame, private)
            )
    composed = PrivacyLedger(400)
    for fit in fits:
        for entry in fit.ledger_.entries:
            composed.record(entry.event, entry.members, entry.description)
    assert composed.epsilon(1e-3) == pytest.approx(budget.spent, abs=1e-6) and budget.spent <= 6.2
    assert len(fits) >= 2


def test_multi_stage_fits_cannot_be_shared_by_the_folds_of_a_search() -> None:
    frame, labels = _table()
    private = PrivateLabels(labels, CLASSES)
    with pytest.raises(ConfigError, match="multi-stage"):
        LabelDPClassifier(_logistic(), stages=2, classes=CLASSES).fit(frame[:300], private[:300])
    assert private.ledger.entries == ()


def test_score_reads_the_release_of_private_labels_and_plain_arrays_as_public() -> None:
    frame, labels = _table(2000, seed=3)
    private = PrivateLabels(labels, CLASSES)
    model = LabelDPClassifier(_logistic(), epsilon=2.0, classes=CLASSES).fit(frame[:1500], private[:1500])
    estimate = model.score(frame[1500:], private[1500:])  # the held-out rows' released labels
    exact = model.score(frame[1500:], labels[1500:])  # a plain array: public labels, exact
    assert abs(estimate - exact) < 0.15 and len(private.ledger.entries) == 1
    with pytest.raises(ConfigError, match="was not fitted on these labels"):
        model.score(frame, PrivateLabels(labels, CLASSES))


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
    search = GridSearchCV(
        LabelDPClassifier(_logistic(), classes=CLASSES),
        {"em_iterations": [0, 2]},
        scoring=released_log_likelihood,
        cv=3,
    ).fit(frame, release)
    assert np.isfinite(search.best_score_) and search.best_score_ < 0


def test_fits_on_a_release_of_labeldp_privatize() -> None:
    from labeldp.boundary import privatize
    from labeldp.randomness import NoiseSource

    frame, labels = _table()
    release = privatize(labels, classes=CLASSES, epsilon=2.0, noise=NoiseSource(insecure_seed=1))
    model = LabelDPClassifier(_logistic()).fit(frame, release)
    assert list(model.classes_) == CLASSES and model.ledger_ is release.ledger
    assert model.score(frame, labels) > 0.7  # a plain array: public test labels, exact
    assert abs(model.score(frame, release) - model.score(frame, labels)) < 0.15  # estimated on the release


def test_per_user_fit_on_a_release_per_user() -> None:
    """The route for a user's many rows: privatize per user (at most m rows each, each label at
    epsilon / c), then fit on the rows it kept; ledger_ is the release's, whose epsilon is each user's."""
    from labeldp import privatize

    frame, labels = _table(900)
    users = np.repeat(np.arange(300), 3)
    released = privatize(labels, classes=CLASSES, epsilon=3.0, units=users, max_rows_per_unit=2)
    assert released.ids.size == 600 and released.epsilon == pytest.approx(1.5)
    model = LabelDPClassifier(classes=CLASSES, estimator=_logistic()).fit(frame.iloc[released.ids], released)
    assert model.ledger_ is released.ledger and model.ledger_.units is not None
    assert model.ledger_.epsilon() == pytest.approx(3.0, abs=1e-2) and model.ledger_.row_epsilon() == pytest.approx(
        1.5, abs=1e-2
    )
    assert model.score(frame, labels) > 0.6  # public labels: exact accuracy
    with pytest.raises(TypeError):
        LabelDPClassifier(classes=CLASSES).fit(frame, PrivateLabels(labels, classes=CLASSES), units=users)


def test_counts_in_cells_release_each_row_once_and_learn_from_a_table() -> None:
    frame, labels = _table(3000, seed=7)
    private = PrivateLabels(labels, CLASSES)
    model = LabelDPClassifier(epsilon=1.0, stages=2, second_stage="counts", cell_rows=20, random_state=0)
    model.fit(frame.astype({"colour": "category"}), private)
    first, second = private.ledger.entries
    assert "randomized response" in first.description and "histogram" in second.description
    assert not (first.members & second.members).any() and (first.members | second.members).all()
    assert first.members.sum() == round(0.4 * 3000)
    assert model.ledger_.epsilon() == pytest.approx(1.0, abs=1e-3) and model.channel_ is None
    assert model.score(frame.astype({"colour": "category"}), labels) > 0.7  # public labels, exact
    with pytest.raises(ConfigError, match="counts in cells"):  # no released label per row
        model.score(frame, private)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"stages": 2, "second_stage": "labels"}, "second_stage must be"),
        ({"second_stage": "counts"}, "set stages=2"),
        ({"stages": 2, "second_stage": "counts", "cell_rows": 0}, "cell_rows"),
    ],
)
def test_counts_settings_are_refused_before_any_release(settings, message) -> None:
    frame, labels = _table()
    private = PrivateLabels(labels, CLASSES)
    with pytest.raises(ConfigError, match=message):
        LabelDPClassifier(_logistic(), epsilon=1.0, **settings).fit(frame, private)
    assert private.ledger.entries == ()


def test_counts_in_cells_take_a_table_of_categories_only() -> None:
    frame, labels = _table(800, seed=2)
    private = PrivateLabels(labels, CLASSES)
    categories = frame[["colour"]].astype("category")
    model = LabelDPClassifier(epsilon=1.0, stages=2, second_stage="counts", random_state=0).fit(categories, private)
    assert model.predict_proba(categories).shape == (800, 2) and len(private.ledger.entries) == 2
