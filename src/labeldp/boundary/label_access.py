"""What code that reads private labels outside the release boundary meets: the errors a
:class:`~labeldp.boundary.labels.PrivateLabels` raises, the route their messages show (release once, compute
on the release), and the argument of a scikit-learn search that made it read them.
"""

from __future__ import annotations

#: how to release labels once and search on the release: shown wherever code tries to read private labels
RELEASE_ONCE_ROUTE = (
    "Release them once and compute on the release, which is free:\n"
    "    released = labeldp.privatize(y, classes=classes, epsilon=1.0)   # one release, one spend\n"
    "    GridSearchCV(LabelDPClassifier(...), grid, scoring=labeldp.released_scorer('roc_auc')).fit(X, released)"
)


class PrivateLabelAccessError(BaseException):
    """Code tried to compute on private labels outside the release boundary.

    A ``BaseException``, not an ``Exception``, so that code catching ``Exception`` and carrying on
    (scikit-learn's ``error_score``, which turns a failed scorer into a NaN score) cannot swallow it. Its
    message says what was tried and, where it helps, :data:`RELEASE_ONCE_ROUTE`.
    """


class LabelsInAnotherProcessError(PrivateLabelAccessError, Exception):
    """Private labels were pickled for another process, or reached one without pickling (a fork).

    Also an ``Exception``: a process pool hands it back to the caller (a ``BaseException`` kills a pool's
    worker or its task thread, and the caller waits forever). Swallowing it is harmless: nothing was drawn.
    """


#: where in scikit-learn a search reads its labels, and the argument that makes it read none
_SEARCH_ARGUMENTS = (
    ("sklearn.model_selection._split", "cv: a stratified split (cv=5 on a classifier) reads the labels; pass "
     "cv=KFold(5) (or any split that reads no label). "),
    ("sklearn.metrics._scorer", "scoring: a metric of scikit-learn reads the labels; pass "
     "scoring=labeldp.released_scorer('roc_auc') (or 'accuracy'), which scores the fold's released labels. "),
    ("sklearn.metrics", "a metric of scikit-learn reads the labels; score released labels with "
     "labeldp.released_scorer. "),
)  # fmt: skip


def the_argument_to_change() -> str:
    """The argument of a scikit-learn search that made it read private labels, from the call stack."""
    import traceback

    modules = [frame.filename for frame in traceback.extract_stack()]
    for module, advice in _SEARCH_ARGUMENTS:
        if any(module.replace(".", "/") in path for path in modules):
            return "Change " + advice
    return ""


def refuse_parallel_search() -> None:
    """Refuse, before it starts, a scikit-learn search or cross-validation (from the call stack) that would copy
    private labels into worker processes (``n_jobs`` above 1 without joblib's threading backend), naming the fix."""
    import sys
    from types import FrameType

    from joblib import effective_n_jobs
    from joblib.parallel import ThreadingBackend, get_active_backend

    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith("sklearn.model_selection"):
            owner = frame.f_locals.get("self")
            n_jobs = frame.f_locals.get("n_jobs", getattr(owner, "n_jobs", None))
            threads = isinstance(get_active_backend()[0], ThreadingBackend)
            if not threads and effective_n_jobs(n_jobs) > 1:
                raise LabelsInAnotherProcessError(
                    f"Change n_jobs: n_jobs={n_jobs} would copy these private labels into each worker process, "
                    "where each copy would be released again under a ledger of its own, so labeldp refuses it "
                    "before the search starts. Use n_jobs=1, or run it under joblib's threading backend (with "
                    "joblib.parallel_backend('threading'): the threads share one release). " + RELEASE_ONCE_ROUTE
                )
            return
        frame = frame.f_back
