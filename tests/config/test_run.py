"""The configuration of a run (config/run.py): RunConfig.resolved() refuses what cannot run before
anything is written or released (an option the method does not use left off its default, a missing
or spare epsilon, a prior's options, conflicting noise options, test labels of a public test set,
numeric labels declared for a dataset with its own), fills in what depends on the method, and a
configuration survives its dictionary round trip."""

from __future__ import annotations

import pytest

from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.pate import PATEConfig
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(prior="cluster", method="non-private", epsilon=None), "needs a private method"),
        (dict(prior="cluster", epsilon=1.0, prior_epsilon=1.0), "must be smaller than epsilon"),
        (dict(prior="uniform", epsilon=1.0, prior_epsilon=0.1), "only with prior 'cluster'"),
        (dict(prior="knn", epsilon=1.0), "prior must be one of"),
        (dict(prior="uniform", epsilon=1.0, prior_temperature=2.0), "only with prior 'cluster'"),
        (dict(prior="uniform", epsilon=1.0, encoder="autoencoder"), "only with prior 'cluster'"),
        (dict(prior="uniform", epsilon=1.0, combine_priors=True), "only with prior 'cluster'"),
        (dict(prior="uniform", epsilon=1.0, clusters=50), "clusters applies only with prior 'cluster'"),
        (
            dict(prior="cluster", method="lp-1st", epsilon=1.0, combine_priors=True),
            "'lp-1st' does not use combine_priors",
        ),
        (dict(prior="cluster", epsilon=1.0, encoder="vae"), "encoder must be one of"),
        (dict(prior="cluster", epsilon=1.0, prior_temperature=0.0), "prior_temperature must be > 0"),
    ],
)
def test_bad_prior_configuration(changes, message) -> None:
    with pytest.raises(ValueError, match=message):
        RunConfig(**{"method": "lp-1st", **changes}).resolved()


@pytest.mark.parametrize(
    "changes, message",
    [
        (dict(method="lp-2st"), "needs --epsilon"),
        (dict(method="lp-2st", epsilon=0.0), "epsilon must be a finite number > 0"),
        (dict(method="lp-2st", epsilon=float("nan")), "epsilon must be a finite number > 0"),
        (dict(method="lp-mst", epsilon=1.0, stages=(0.5, 0.6)), "summing to 1"),
        (dict(method="lp-2st", epsilon=1.0, stages=(0.2, 0.3, 0.5)), "has 2 stage"),
        (dict(method="non-private", epsilon=1.0), "takes no epsilon"),
        (dict(method="dp-magic", epsilon=1.0), "unknown method"),
        (dict(dataset="imagenet", epsilon=1.0), "unknown dataset"),
        (dict(epsilon=1.0, temperature=0.0), "temperature"),
        (dict(epsilon=1.0, train=TrainConfig(epochs=0)), "epochs"),
        (dict(method="dp-sgd", epsilon=1.0, temperature=2.0), "'dp-sgd' does not use temperature; leave it"),
        (
            dict(method="lp-1st", epsilon=1.0, reuse_labels=False, warm_start=False),
            "'lp-1st' does not use reuse_labels, warm_start; leave them",
        ),
        (dict(method="pate", epsilon=1.0, loss="ce"), "'pate' does not use loss"),
        (dict(method="non-private", secure_rng=True), "'non-private' does not use secure_rng"),
        (dict(method="lp-2st", epsilon=1.0, dpsgd=DPSGDConfig(max_grad_norm=0.1)), "does not use dpsgd.max_grad_norm;"),
        (
            dict(method="dp-sgd", epsilon=1.0, pate=PATEConfig(teachers=10, queries=5)),
            "does not use pate.teachers, pate.queries;",
        ),
    ],
)
def test_bad_configuration_is_refused_before_anything_is_written(blobs, tmp_path, changes, message) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        train_run(RunConfig(**{"dataset": "csv", **changes}), tmp_path / "run", progress=False, dataset=blobs)
    assert not (tmp_path / "run").exists()
