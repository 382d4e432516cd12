"""The configuration of a run (config/run.py): RunConfig.resolved() refuses what cannot run before
anything is written or released (an option the method does not use left off its default, a missing
or spare epsilon, a prior's options, conflicting noise options, test labels of a public test set,
numeric labels declared for a dataset with its own), fills in what depends on the method, and a
configuration survives its dictionary round trip."""

from __future__ import annotations

import pytest

from labeldp.runs import RunConfig


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
