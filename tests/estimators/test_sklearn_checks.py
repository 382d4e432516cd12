"""scikit-learn's own estimator checks (``check_estimator``'s), on the estimators and on test adapters.

The estimators' ``fit`` refuses a plain label array (labeldp treats it as public labels, and a fit on
one could not know whether they were released before), and scikit-learn's checks fit on plain arrays:
on the estimators themselves, every check that fits is an expected failure for that reason alone. To
check every other convention, the same checks run on adapters, defined here only, whose ``fit`` wraps
the check's plain labels in ``PrivateLabels`` as a user would, the classes read off them (which only a
test may do): there, every check passes but the one whose failure is a property of label DP itself.
"""

from __future__ import annotations

from unittest import SkipTest

import numpy as np
import pytest
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.utils import get_tags
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks
from sklearn.utils.validation import column_or_1d

from labeldp.boundary import PrivateLabels
from labeldp.errors import ConfigError
from labeldp.estimators import LabelDPClassifier, LabelDPLogisticRegression, LabelDPRegressor

PLAIN_LABELS = (
    "fit refuses a plain label array: labeldp treats plain arrays as public labels, and a fit on one could not know "
    "whether they were released before (a search would release them once per fold); this check fits on plain "
    "arrays, and runs on an adapter that wraps them in PrivateLabels instead"
)
REPEATED_ROWS = (
    "each row's label is released with noise of its own: a row repeated w times gets w independent releases where "
    "a row of weight w gets one, so the two fits differ (they agree in expectation, not draw by draw)"
)

#: the checks that fit on plain labels, for every estimator
FITS = [
    "check_dict_unchanged",
    "check_dont_overwrite_parameters",
    "check_dtype_object",
    "check_estimator_sparse_array",
    "check_estimator_sparse_matrix",
    "check_estimator_sparse_tag",
    "check_estimators_dtypes",
    "check_estimators_fit_returns_self",
    "check_estimators_overwrite_params",
    "check_estimators_pickle",
    "check_f_contiguous_array_estimator",
    "check_fit2d_1feature",
    "check_fit2d_1sample",
    "check_fit2d_predict1d",
    "check_fit_check_is_fitted",
    "check_fit_idempotent",
    "check_fit_score_takes_y",
    "check_n_features_in",
    "check_n_features_in_after_fitting",
    "check_positive_only_tag_during_fit",
    "check_readonly_memmap_input",
    "check_supervised_y_2d",
]
#: ... for an estimator with sample weights
WEIGHTED_FITS = [
    "check_sample_weight_equivalence_on_dense_data",
    "check_sample_weights_list",
    "check_sample_weights_not_an_array",
    "check_sample_weights_not_overwritten",
    "check_sample_weights_pandas_series",
    "check_sample_weights_shape",
]
CLASSIFIER_FITS = [
    "check_classifier_data_not_an_array",
    "check_classifiers_classes",
    "check_classifiers_regression_target",
    "check_classifiers_train",
]
REGRESSOR_FITS = [
    "check_regressor_data_not_an_array",
    "check_regressors_int",
    "check_regressors_no_decision_function",
    "check_regressors_train",
]
EXPECTED_FAILURES = {
    LabelDPClassifier: FITS + WEIGHTED_FITS + CLASSIFIER_FITS,
    LabelDPRegressor: FITS + WEIGHTED_FITS + REGRESSOR_FITS,
    LabelDPLogisticRegression: [*FITS, *CLASSIFIER_FITS, "check_decision_proba_consistency"],
}


def _private(y, classes: bool) -> PrivateLabels | None:
    """A check's plain labels wrapped as a user wraps them: 1-d (a column warns, as scikit-learn's
    estimators do), over the classes read off them (a test's liberty) or as numbers; None stays None
    (fit refuses it)."""
    if y is None:
        return None
    y = column_or_1d(y, warn=True)
    return PrivateLabels(y, classes=np.unique(y)) if classes else PrivateLabels(y)


class PlainLabelsClassifier(LabelDPClassifier):
    """LabelDPClassifier fitted on a check's plain labels, wrapped first (tests only)."""

    def fit(self, X, y, sample_weight=None):
        return super().fit(X, _private(y, classes=True), sample_weight)


class PlainLabelsRegressor(LabelDPRegressor):
    """LabelDPRegressor fitted on a check's plain values, wrapped first (tests only)."""

    def fit(self, X, y, sample_weight=None):
        return super().fit(X, _private(y, classes=False), sample_weight)


class PlainLabelsLogisticRegression(LabelDPLogisticRegression):
    """LabelDPLogisticRegression fitted on a check's plain labels, wrapped first (tests only)."""

    def fit(self, X, y):
        return super().fit(X, _private(y, classes=True))


#: the default model (histogram gradient boosting, which takes missing values; fewer trees, for speed), and
#: a model that takes sparse inputs. The regressors' values, on a range that holds the checks' values,
#: are released under a public uniform prior: the bins, and so the noise, do not depend on a check's few rows.
REGRESSION = {"label_range": (-10, 10), "grid": 21, "prior": "uniform", "insecure_noise_seed": 0}
ADAPTERS = [
    PlainLabelsClassifier(HistGradientBoostingClassifier(max_iter=10), insecure_noise_seed=0, random_state=0),
    PlainLabelsClassifier(LogisticRegression(), insecure_noise_seed=0),
    PlainLabelsRegressor(HistGradientBoostingRegressor(max_iter=10), random_state=0, **REGRESSION),
    PlainLabelsRegressor(Ridge(), **REGRESSION),
    PlainLabelsLogisticRegression(insecure_noise_seed=0),
]


def _expected_on_estimators(estimator) -> dict[str, str]:
    return dict.fromkeys(EXPECTED_FAILURES[type(estimator)], PLAIN_LABELS)


def _expected_on_adapters(estimator) -> dict[str, str]:
    if isinstance(estimator, LabelDPLogisticRegression):
        return {}  # no sample weights
    expected = {"check_sample_weight_equivalence_on_dense_data": REPEATED_ROWS}
    if get_tags(estimator).input_tags.sparse:
        expected["check_sample_weight_equivalence_on_sparse_data"] = REPEATED_ROWS
    return expected


class RefusedPlainLabels(Exception):
    """A check failed because the estimator's fit refused its plain labels."""


def _refuses_plain_labels(error: BaseException | None) -> bool:
    """Whether a check's failure comes from the refusal of plain labels (the error or one it came from)."""
    while error is not None:
        if isinstance(error, (ConfigError, AssertionError)) and "not a plain array" in str(error):
            return True
        error = error.__cause__ or error.__context__
    return False


ESTIMATORS = [LabelDPClassifier(), LabelDPRegressor(), LabelDPLogisticRegression()]


@parametrize_with_checks(ESTIMATORS, expected_failed_checks=_expected_on_estimators, xfail_strict=True)
def test_the_estimators_follow_scikit_learn_conventions_but_refuse_plain_labels(estimator, check) -> None:
    """A refusal is re-raised from here, without the frames of scikit-learn's 5,000-line checks module,
    which pytest parses once a frame to report an expected failure (a quarter of a second each)."""
    try:
        check(estimator)
    except SkipTest:
        raise
    except Exception as error:
        if not _refuses_plain_labels(error):
            raise
        raise RefusedPlainLabels(str(error)) from None


@parametrize_with_checks(ADAPTERS, expected_failed_checks=_expected_on_adapters, xfail_strict=True)
def test_on_private_labels_the_estimators_follow_every_other_convention(estimator, check) -> None:
    check(estimator)


def test_every_expected_failure_on_the_estimators_is_the_refusal_of_plain_labels() -> None:
    for estimator in ESTIMATORS:
        failures: dict[str, BaseException] = {}

        def record(check_name, exception, status, failures=failures, **_) -> None:
            if status == "failed":
                failures[check_name] = exception

        check_estimator(estimator, on_fail=None, on_skip=None, callback=record)
        assert sorted(failures) == sorted(EXPECTED_FAILURES[type(estimator)])
        assert all(_refuses_plain_labels(error) for error in failures.values()), type(estimator).__name__


def test_the_tags_say_what_the_fit_and_the_wrapped_estimator_do() -> None:
    """The default model, histogram gradient boosting, takes missing values and no sparse matrix."""
    assert get_tags(LabelDPClassifier()) == get_tags(LabelDPClassifier(HistGradientBoostingClassifier()))
    tags = get_tags(LabelDPClassifier())
    assert tags.non_deterministic and tags.input_tags.allow_nan and not tags.input_tags.sparse
    assert tags.classifier_tags.poor_score and tags.requires_fit and tags.target_tags.required
    assert not get_tags(LabelDPClassifier(insecure_noise_seed=0)).non_deterministic
    wrapped = get_tags(LabelDPClassifier(LogisticRegression())).input_tags
    assert wrapped.sparse and not wrapped.allow_nan
    regressor = get_tags(LabelDPRegressor(Ridge()))
    assert regressor.non_deterministic and regressor.input_tags.sparse and regressor.regressor_tags.poor_score
    logistic = get_tags(LabelDPLogisticRegression())
    assert logistic.input_tags.sparse and logistic.input_tags.allow_nan and logistic.input_tags.string


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_predicting_before_a_fit_says_so(estimator) -> None:
    with pytest.raises(NotFittedError):
        estimator.predict(np.zeros((2, 3)))
