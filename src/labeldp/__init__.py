"""labeldp: deep learning with label differential privacy (public inputs, private labels).

The names below are imported on first use, so that ``import labeldp`` (and ``labeldp --help``) stays
light: ``labeldp.PrivateLabels`` loads :mod:`labeldp.boundary`, ``labeldp.LabelDPClassifier``
the estimators, ``labeldp.tune(RunConfig(method="lp-1st", epsilon=2), {"lr": [0.01, 0.03]}, "runs/tuned")``
the tuning on one release.

Importing it applies the thread policy of :mod:`labeldp.runtime` (idle OpenMP threads spin briefly, then
sleep, unless the environment says how they wait), as the ``labeldp`` command does.
"""

from __future__ import annotations

import importlib
from typing import Any

from labeldp import runtime as _runtime

_runtime.prefer_short_waits()  # before the OpenMP runtimes load where labeldp comes first

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "PrivateLabels": "labeldp.boundary",
    "LabelBudget": "labeldp.boundary",
    "PrivateLabelAccessError": "labeldp.boundary",
    "privatize": "labeldp.boundary",
    "LabelDPClassifier": "labeldp.estimators",
    "LabelDPRegressor": "labeldp.estimators",
    "LabelDPLogisticRegression": "labeldp.estimators",
    "ReleasedLabels": "labeldp.boundary",
    "released_log_likelihood": "labeldp.released_metrics",
    "released_scorer": "labeldp.released_metrics",
    "load_release": "labeldp.boundary",
    "privatize_table": "labeldp.boundary",
    "RunConfig": "labeldp.runs",
    "train_run": "labeldp.runs",
    "tune": "labeldp.experiments.release_tuning",
    "fit_hashed": "labeldp.ads",
    "predict_hashed": "labeldp.ads",
    "fit_from_noisy_source": "labeldp.ads",
    "fit_from_reports": "labeldp.ads",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'labeldp' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


__all__ = ["__version__", *_EXPORTS]
