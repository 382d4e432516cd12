"""labeldp: deep learning with label differential privacy (public inputs, private labels).

The names below are imported on first use, so that ``import labeldp`` (and ``labeldp --help``) stays
light: ``labeldp.PrivateLabels`` loads :mod:`labeldp.boundary`, ``labeldp.LabelDPClassifier``
the estimators, ``labeldp.tune(RunConfig(method="lp-1st", epsilon=2), {"lr": [0.01, 0.03]}, "runs/tuned")``
the tuning on one release.

Importing it applies the thread policy of :mod:`labeldp.runtime` (idle OpenMP threads spin briefly, then
sleep, unless the environment says how they wait), as the ``labeldp`` command does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labeldp import runtime as _runtime
from labeldp._lazy import lazy_exports
from labeldp._version import __version__

_runtime.prefer_short_waits()  # before the OpenMP runtimes load where labeldp comes first

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.ads import fit_from_noisy_source as fit_from_noisy_source
    from labeldp.ads import fit_from_reports as fit_from_reports
    from labeldp.ads import fit_hashed as fit_hashed
    from labeldp.ads import predict_hashed as predict_hashed
    from labeldp.boundary import LabelBudget as LabelBudget
    from labeldp.boundary import PrivateLabelAccessError as PrivateLabelAccessError
    from labeldp.boundary import PrivateLabels as PrivateLabels
    from labeldp.boundary import ReleasedLabels as ReleasedLabels
    from labeldp.boundary import load_release as load_release
    from labeldp.boundary import privatize as privatize
    from labeldp.boundary import privatize_table as privatize_table
    from labeldp.estimators import LabelDPClassifier as LabelDPClassifier
    from labeldp.estimators import LabelDPLogisticRegression as LabelDPLogisticRegression
    from labeldp.estimators import LabelDPRegressor as LabelDPRegressor
    from labeldp.experiments.release_tuning import tune as tune
    from labeldp.released_metrics import released_log_likelihood as released_log_likelihood
    from labeldp.released_metrics import released_scorer as released_scorer
    from labeldp.runs import RunConfig as RunConfig
    from labeldp.runs import train_run as train_run


__getattr__, _dir, _names = lazy_exports(__name__)


def __dir__() -> list[str]:
    return sorted([*globals(), *_names])


__all__ = ["__version__", *_names]
