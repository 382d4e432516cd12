"""``marginals``: a multinomial logistic regression over public feature bins, fitted from one release
of noisy label marginals (:class:`~labeldp.estimators.LabelDPLogisticRegression` as a run).

The bins come from the public training inputs alone (:mod:`labeldp.training.binned_model`). The
noise is per count, about B / epsilon for B features however many rows there are: the method for rare
positives and small budgets, where per-label noise drowns the signal (docs/methods.md).

epsilon-label-DP, one release of every label; the projection, fit and predictions are post-processing.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from labeldp.accounting import PrivacyLedger
from labeldp.boundary import Release, release_label_marginals
from labeldp.config.method_registry import BUILTIN_HELP, Method, register_method
from labeldp.errors import SECOND_RELEASE, ConfigError, RunDirectoryError
from labeldp.mechanisms.label_marginals import flat_bins
from labeldp.methods.protocol import MethodContext
from labeldp.training.binned_model import BinnedLogistic, binned_logistic
from labeldp.training.from_marginals import fit_from_marginals, project_marginals

#: the name of the one release
RELEASE = "marginals"


def public_bins(context: MethodContext) -> tuple[BinnedLogistic, np.ndarray]:
    """The run's model, coefficients still zero, and every training row's (rows, features) bins: public."""
    data = context.data
    groups = data.preprocessor.column_groups() if hasattr(data.preprocessor, "column_groups") else None
    model = binned_logistic(data.x_train, groups, context.config.options.bins, data.num_classes)
    with torch.no_grad():
        bins = model.bins(torch.as_tensor(np.asarray(data.x_train, dtype=np.float32))).numpy()
    return model, bins


def run_marginals(context: MethodContext) -> tuple[nn.Module, dict[str, Any]]:
    """Cut the public bins, release the label marginals once (``marginals``), fit the model from them.

    epsilon-label-DP: :func:`~labeldp.boundary.release_label_marginals` over every training example
    through :meth:`~labeldp.methods.protocol.MethodContext.spend`, saved with the bins' public sizes;
    the projection and the fit (ridge ``marginals.l2``) are post-processing.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If a saved release counts other bins than the training rows now fall in (the table changed).
    """
    config, data = context.config, context.data
    model, bins = public_bins(context)
    sizes = model.bins_per_feature
    bin_sizes = np.bincount(flat_bins(bins, sizes).ravel(), minlength=int(sizes.sum()))
    members = np.arange(len(data.y_train))
    epsilon = config.epsilon
    assert epsilon is not None, "a resolved configuration of a private method has its epsilon"

    def draw(ledger: PrivacyLedger) -> Release:
        release = release_label_marginals(
            ledger,
            data.y_train,
            members,
            bins,
            sizes,
            data.num_classes,
            epsilon,
            config.noise.generator("histogram"),
            RELEASE,
        )
        return release.with_arrays(bins_per_feature=sizes, bin_sizes=bin_sizes)  # public: to check a resume

    released = context.spend(RELEASE, draw)
    if not (
        np.array_equal(released.arrays["bins_per_feature"], sizes)
        and np.array_equal(released.arrays["bin_sizes"], bin_sizes)
    ):
        raise RunDirectoryError(
            "the saved release counts labels in other bins than the training rows' bins now are (has the table "
            "changed?): it cannot be fitted on them, and drawing it again would spend the budget a second time; "
            f"restore the table as it was, or start again in a new folder {SECOND_RELEASE}"
        )
    counts = project_marginals(released.arrays["counts"], bins, sizes)
    coef, intercept = fit_from_marginals(bins, sizes, counts, config.options.l2)
    model.set_coefficients(coef, intercept)
    return model.to(context.device), {
        "marginals": {
            "features": int(sizes.size),
            "total_bins": int(sizes.sum()),
            "released": int(members.size),
            # 1 / a per count, discrete Laplace's a = epsilon / (cells x c) as the release recorded it: with
            # a privacy unit of c rows the noise covers them all
            "noise_scale": 1.0 / released.event.noise_parameter,
        }
    }


def _check(config) -> None:
    """Refuse a network or training options (the fit from counts uses neither), and bad settings."""
    if config.model is not None:
        raise ConfigError(
            "method 'marginals' fits its own model, a logistic regression over the features' bins: leave --model out"
        )
    unused = config.train.changed()
    if unused:
        raise ConfigError(
            f"method 'marginals' fits from counts, with no training loop: it does not use the training options "
            f"{', '.join(unused)}; leave them at the default"
        )


def _plan(config, data) -> None:
    """Classes only: a numeric label's grid is the job of rr-on-bins and laplace-regression."""
    if data.is_regression:
        raise ConfigError(
            "method 'marginals' fits a classifier over classes; for numeric labels use rr-on-bins or laplace-regression"
        )


register_method(
    Method(
        RELEASE,
        BUILTIN_HELP["marginals"],
        run_marginals,
        check=_check,
        plan=_plan,
        # the penalty acts on the released counts; the bins decide what is counted
        independent_of={RELEASE: ("train", "model")},
        releases=lambda config: (RELEASE,),
        tuning=None,
        untunable="its release is label counts per bin, not labels: no held-out example has a released label to "
        "score a candidate on. Its bins shape the release (a sweep compares them, each with its own release), "
        "and its l2 acts after it",
        model_from_state=BinnedLogistic.from_state_dict,
    )
)
