"""Private helpers of the estimators of :mod:`labeldp.estimators`: what a fit takes, the classes of a
classifier, the public inputs and weights checked as scikit-learn checks them, the tags a wrapper takes
from the estimator it wraps, the key of a shared release's noise, whether released labels share one
randomized response channel, the wrapped estimator and its weighted fit, and rows of any input."""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd
from sklearn.base import BaseEstimator, clone
from sklearn.compose import ColumnTransformer
from sklearn.metrics import accuracy_score
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OrdinalEncoder
from sklearn.utils import Tags, _safe_indexing, get_tags
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import _check_sample_weight, _num_samples, column_or_1d, validate_data

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import LabelDomain, PrivateLabels, Release, ReleasedLabels, class_array, fit_classes, load_release
from labeldp.errors import ConfigError


def fit_labels(
    y,
    estimator: BaseEstimator,
    declared: Sequence[Any] | None,
    wrapped: str = "labeldp.PrivateLabels(y, classes=[...])",
) -> PrivateLabels | ReleasedLabels:
    """What a fit takes: private labels (released by the fit) or released ones, as
    :class:`ReleasedLabels`, a :class:`~labeldp.boundary.Release` of labels (over the ``declared``
    classes; it carries none) or the path of a release folder. A plain array, or None, is refused with
    a message that shows how the true labels are ``wrapped``."""
    name = type(estimator).__name__
    if isinstance(y, (PrivateLabels, ReleasedLabels)):
        return y
    if isinstance(y, (str, os.PathLike)):
        return load_release(y)
    if isinstance(y, Release):
        if declared is None:
            raise ConfigError(f"a Release carries no classes: declare them, {name}(classes=[...]), to fit on it")
        rows = np.arange(len(y.members))
        ledger = PrivacyLedger(rows.size)  # the release's spend, on the rows of the fit
        ledger.record(y.event, rows, y.description)
        return ReleasedLabels.from_release(y, declared, ledger)
    if y is None:
        raise ConfigError(
            f"{name} requires y to be passed, but the target y is None: give the true labels wrapped "
            f"({wrapped}) or labels released once"
        )
    raise ConfigError(
        f"{name}.fit takes private labels or released ones, not a plain array: labeldp treats plain arrays as "
        "public, and a fit on one could not know whether those labels were released before (a search would release "
        f"them once per fold). Wrap the true labels once: {name}(...).fit(X, {wrapped}) (every fit and fold on them "
        "then shares one release); or fit on labels released once "
        "(labeldp.privatize(y, classes=..., epsilon=...), a release folder of `labeldp privatize`)."
    )


def estimator_classes(estimator: BaseEstimator, labels: PrivateLabels | ReleasedLabels) -> np.ndarray:
    """A classifier's ``classes_``: its declared ``classes`` or those the labels carry (which must agree),
    in their own dtype (:func:`~labeldp.boundary.class_array`). Numeric labels and classes that are
    numbers but not whole ones are a regression's, refused as scikit-learn refuses them."""
    name = type(estimator).__name__
    if isinstance(labels, PrivateLabels) and labels.is_numeric:
        raise ConfigError(
            f"Unknown label type: continuous (numeric labels, without classes). {name} needs labels over "
            "classes: PrivateLabels(y, classes=[...]); a numeric label is LabelDPRegressor's"
        )
    classes = class_array(fit_classes(estimator.classes, labels.classes))
    if type_of_target(classes) == "continuous":
        raise ConfigError(
            f"Unknown label type: continuous (classes {list(classes)} are numbers that are not whole). {name} "
            "needs classes; a numeric label is LabelDPRegressor's"
        )
    if labels.num_classes != len(classes):
        raise ConfigError(f"the labels have {labels.num_classes} classes, the estimator {len(classes)}")
    return classes


def public_accuracy(classes: np.ndarray, predicted: np.ndarray, y, sample_weight) -> float:
    """The accuracy of ``predicted`` (class positions) on public labels ``y``, each matched to
    ``classes`` as text (``1``, ``1.0`` and ``"1"`` are one class; a value outside them is no class)."""
    truth = LabelDomain(classes).matched(column_or_1d(y, warn=True))
    return float(accuracy_score(truth, predicted, sample_weight=sample_weight))


def checked_inputs(estimator: BaseEstimator, X, *, reset: bool):
    """The public inputs, checked as scikit-learn checks them, ``n_features_in_`` (and
    ``feature_names_in_``) recorded by a fit (``reset``) and compared afterwards. A table passes as it is
    (the wrapped estimator encodes its columns); anything else becomes a 2-d array or a CSR/CSC matrix,
    not complex, with at least one row and one column. Missing values, sparse matrices and text are the
    wrapped estimator's to accept or refuse (its tags say which)."""
    if isinstance(X, pd.DataFrame):
        validate_data(estimator, X, skip_check_array=True, reset=reset)
        return X
    return validate_data(estimator, X, reset=reset, accept_sparse=["csr", "csc"], dtype=None, ensure_all_finite=False)


def checked_weights(sample_weight, X) -> np.ndarray | None:
    """Public row weights as a float array, checked (one per row, non-negative, not all zero); None stays None."""
    return None if sample_weight is None else _check_sample_weight(sample_weight, X, ensure_non_negative=True)


def check_rows(X, labels) -> None:
    if _num_samples(X) != len(labels):
        raise ConfigError(f"X has {_num_samples(X)} rows but y has {len(labels)} labels")


def wrapper_tags(tags: Tags, wrapped: BaseEstimator, insecure_noise_seed: int | None) -> Tags:
    """The tags of an estimator that wraps ``wrapped``: the inputs it takes (sparse matrices, missing
    values) are the wrapped estimator's; a fit draws fresh noise unless its seed is fixed; and its
    scores on noisy labels are poorer than the wrapped estimator's own."""
    inner = get_tags(wrapped).input_tags
    tags.input_tags.sparse, tags.input_tags.allow_nan = inner.sparse, inner.allow_nan
    tags.non_deterministic = insecure_noise_seed is None
    for task in (tags.classifier_tags, tags.regressor_tags):
        if task is not None:
            task.poor_score = True
    return tags


def noise_key(secure_rng: bool, insecure_noise_seed: int | None) -> Hashable:
    """What a shared release's noise depends on: fresh entropy is as good as any other fresh entropy."""
    return (
        ("insecure", int(insecure_noise_seed))
        if insecure_noise_seed is not None
        else ("secure" if secure_rng else "fresh")
    )


def shared_rr_channel(labels: np.ndarray, likelihood: np.ndarray) -> tuple[float, float] | None:
    """(keep, other) when every row's channel is one randomized response's, else None."""
    rows = np.arange(len(labels))
    keep = likelihood[rows, labels]
    other = (likelihood.sum(axis=1) - keep) / max(likelihood.shape[1] - 1, 1)
    if len(labels) and np.allclose(keep, keep[0]) and np.allclose(other, other[0]) and keep[0] > other[0]:
        if np.allclose(likelihood, np.where(np.eye(likelihood.shape[1], dtype=bool)[labels], keep[0], other[0])):
            return float(keep[0]), float(other[0])
    return None


def base_estimator(estimator, default, random_state, X=None):
    """A fresh clone of the user's ``estimator`` (else ``default`` with native categorical support, its
    text columns, as a CSV file gives them, encoded as categories), with ``random_state`` where it takes one."""
    text = _text_columns(X)
    if estimator is not None:
        base = clone(estimator)
    elif text:
        encode = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=np.nan, encoded_missing_value=np.nan)
        columns = ColumnTransformer([("text", encode, text)], remainder="passthrough", verbose_feature_names_out=False)
        base = Pipeline(
            [("encode", columns.set_output(transform="pandas")), ("model", default(categorical_features=text))]
        )
    else:
        base = default(categorical_features="from_dtype")
    if "random_state" in base.get_params():
        base.set_params(random_state=random_state)
    elif "model__random_state" in base.get_params():
        base.set_params(model__random_state=random_state)
    return base


def _text_columns(X) -> list[str]:
    """The columns of a table that hold text (objects or strings), as ``pandas.read_csv`` gives them."""
    if not isinstance(X, pd.DataFrame):
        return []
    return [c for c in X.columns if pd.api.types.is_object_dtype(X[c]) or pd.api.types.is_string_dtype(X[c])]


def probe(estimator, X, stand_in: np.ndarray) -> None:
    """Fit a copy of ``estimator`` on the first rows of ``X`` with public stand-in labels, before any
    release: inputs it cannot take are refused before the spend, with the fix. Reads no private label."""
    rows = min(_num_samples(X), 500)
    try:
        clone(estimator).fit(take_rows(X, np.arange(rows)), stand_in[np.arange(rows) % stand_in.size])
    except (ValueError, TypeError) as error:
        text = _text_columns(X)
        fix = (
            f" X has text columns {text}: give them as categories (X.astype({{{text[0]!r}: 'category'}})) to a "
            "HistGradientBoosting model, or encode them in the estimator (make_pipeline(make_column_transformer("
            "(OneHotEncoder(handle_unknown='ignore'), [...]), remainder='passthrough'), estimator)); the default "
            "estimator (estimator=None) takes them as they are."
            if text
            else ""
        )
        # scikit-learn's own error type and words, as its conventions expect, and what labeldp adds
        said = f"{error} ({type(estimator).__name__} cannot fit these inputs: nothing was released.{fix})"
        raise type(error)(said) from None


def fit_weighted(model, X, y: np.ndarray, weights: np.ndarray | None):
    """``model.fit`` with sample weights (a Pipeline takes them for its last step); the fitted model."""
    if weights is None:
        return model.fit(X, y)
    if isinstance(model, Pipeline):
        return model.fit(X, y, **{f"{model.steps[-1][0]}__sample_weight": weights})
    return model.fit(X, y, sample_weight=weights)


def take_rows(X, rows):
    """The rows ``rows`` of a table, an array or a sparse matrix (None stays None)."""
    return None if X is None else _safe_indexing(X, rows)


def stack_rows(X, copies: int):
    """``copies`` copies of the rows of a table, an array or a sparse matrix, one after the other."""
    stacked = _safe_indexing(X, np.tile(np.arange(_num_samples(X)), copies))
    return stacked.reset_index(drop=True) if isinstance(stacked, pd.DataFrame) else stacked
