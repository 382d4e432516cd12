"""A method and a dataset of your own, registered from outside labeldp.

Run it with ``--recipes``, which executes this file before the command line is read, so that
``--method rr-ce`` and ``--dataset blobs`` are choices like labeldp's own::

    labeldp train --recipes examples/custom_method.py --dataset blobs --method rr-ce --epsilon 2 --out runs/blobs

(or ``import`` it in your own code before calling ``labeldp.train_run``). Everything else follows from
the two registrations: the run folder, the ledger and its epsilon, resuming without a second draw,
the summary's test metrics, ``labeldp sweep`` and ``labeldp tune``.

``rr-ce`` is the textbook baseline: every training label released once by K-ary randomized response,
and the model trained on the noisy labels with plain cross-entropy (``lp-1st`` trains on the same
release with the forward loss, which corrects for the noise). Privacy: epsilon-label-DP, from the
one release it makes through the run's boundary. Its options are a frozen dataclass, here of one option,
``--train-share``: the share of the training rows whose labels are released and trained on (``labeldp train``
takes its flag, ``config.json`` records it; the method reads it as ``config.options.train_share``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from labeldp.boundary import release_randomized_response
from labeldp.config.method_registry import Method, register_method
from labeldp.data import Dataset, register_dataset
from labeldp.data.dataset import LabeledDataset
from labeldp.errors import ConfigError
from labeldp.options import option


@dataclass(frozen=True)
class RRCEOptions:
    """rr-ce's options."""

    train_share: float = option(
        1.0, help="the share of the training rows whose labels are released and trained on (the others are left out)"
    )

    def validate(self) -> None:
        """Refuse a share outside (0, 1] before anything is released."""
        if not 0 < self.train_share <= 1:
            raise ConfigError(f"--train-share must lie in (0, 1], got {self.train_share}")


def load_blobs(request) -> LabeledDataset:
    """Three Gaussian blobs in five dimensions: 600 training rows (private labels) and 300 test rows
    (public labels), the same on every call."""
    rng = np.random.default_rng(7)
    centres = rng.normal(scale=2.0, size=(3, 5))
    labels = rng.integers(0, 3, size=900)
    inputs = (centres[labels] + rng.normal(size=(900, 5))).astype(np.float32)
    return LabeledDataset(
        "blobs", inputs[:600], labels[:600], inputs[600:], labels[600:], num_classes=3, class_names=["a", "b", "c"]
    )


def run_rr_ce(context):
    """Release every training label once by randomized response (the step ``stage1``), then train
    one model on the noisy labels with cross-entropy."""
    config, data = context.config, context.data
    members = np.arange(round(config.options.train_share * len(data.y_train)))

    def draw(ledger):
        return release_randomized_response(
            ledger,
            data.y_train[members],
            members,
            data.num_classes,
            config.epsilon,
            config.noise.generator("label-release", 1),
            "stage1",
        )

    released = context.spend("stage1", draw)
    model = context.new_model(1)
    context.train(model, 1, 1, members, released.labels)
    return model, {"stages": [{"stage": 1, "released": int(members.size), "reused": 0}]}


register_dataset(Dataset("blobs", "embedded", load_blobs, help="three Gaussian blobs (an example)"))
register_method(
    Method(
        "rr-ce",
        "randomized response, trained with plain cross-entropy (an example)",
        run_rr_ce,
        options=RRCEOptions,
        independent_of={"stage1": ("train", "model")},
        releases=lambda config: ("stage1",),
    )
)
