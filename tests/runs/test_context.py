"""The run's context (runs/context.py): the trainer only ever sees released labels, in stage order."""

from __future__ import annotations

import numpy as np
import pytest

import labeldp.runs.context as run_module
from labeldp.boundary import unseal
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig

FAST = TrainConfig(epochs=3, batch_size=64, lr=0.05)


@pytest.mark.parametrize("loss", ["forward", "ce"])
def test_trainer_only_sees_released_labels(blobs, tmp_path, monkeypatch, loss) -> None:
    seen = []
    real = run_module.train_stage

    def spy(model, inputs, targets, *args, **kwargs):
        seen.append(np.array(targets))
        return real(model, inputs, targets, *args, **kwargs)

    monkeypatch.setattr(run_module, "train_stage", spy)
    config = RunConfig(
        dataset="csv", method="lp-mst", epsilon=0.5, stages=(0.3, 0.3, 0.4), loss=loss, first_release="rr", train=FAST
    )
    train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    released = []
    for stage in (1, 2, 3):
        with np.load(tmp_path / "run" / "noisy_labels" / f"stage{stage}.npz") as data:
            released.append({key: data[key] for key in ("indices", "labels", "likelihood", "evidence")})
    key = "evidence" if loss == "forward" else "labels"
    for stage in (1, 2, 3):
        own = released[stage - 1][key]
        assert np.array_equal(seen[stage - 1][: len(own)], own)  # its own noisy labels first
        earlier = [r[key] for r in released[: stage - 1]]
        rest = seen[stage - 1][len(own) :]
        if loss == "forward":  # every earlier release, unfiltered, in stage order
            assert np.array_equal(rest, np.concatenate(earlier) if earlier else rest)
        else:  # a filtered subset of the earlier noisy labels
            assert len(rest) <= sum(len(e) for e in earlier)
    # the likelihood rows are the channels of the released labels: the released label is the most likely
    stage1 = released[0]
    assert np.array_equal(stage1["likelihood"].argmax(axis=1), stage1["labels"])
    # stage 1 has a uniform prior: its evidence is the normalised channel
    np.testing.assert_allclose(
        stage1["evidence"], stage1["likelihood"] / stage1["likelihood"].sum(1, keepdims=True), rtol=1e-5
    )
    # at epsilon 0.5 the released labels differ from the truth for most examples
    assert np.mean(stage1["labels"] != unseal(blobs.y_train)[stage1["indices"]]) > 0.5
