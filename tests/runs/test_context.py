"""The run's context (runs/context.py): the trainer only ever sees released labels, in stage order; a saved
release holds for a configuration that would draw it again, in whatever layout its inputs were recorded."""

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
        dataset="csv",
        method="lp-mst",
        epsilon=0.5,
        stages=(0.3, 0.3, 0.4),
        train=FAST,
        options={"loss": loss, "first_release": "rr"},
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


def test_a_release_holds_where_it_would_be_drawn_the_same_in_any_recorded_layout() -> None:
    """The inputs saved with a release, recorded when config.json held every method's options (the others at
    their defaults, DP-SGD's in a section), hold for the same configuration; an option it depends on changed,
    another method's option set, or no record at all, do not."""
    from labeldp.config.run_config import release_holds, release_inputs

    config = RunConfig(method="lp-2st", epsilon=1.0, options={"first_release": "rr"}).resolved()
    saved = release_inputs(config, "stage2", 10)
    old = {**saved, "cell_rows": 10, "dpsgd": {"max_grad_norm": 1.0}, "marginals": {}, "method_options": {}}
    assert release_holds(saved, config, "stage2", 10) and release_holds(old, config, "stage2", 10)
    assert not release_holds({**old, "temperature": 2.0}, config, "stage2", 10)  # stage 2's prior depends on it
    assert release_holds({**old, "warm_start": False}, config, "stage2", 10)  # it acts after stage 2's release
    assert not release_holds({**old, "cell_rows": 3}, config, "stage2", 10)
    assert not release_holds(None, config, "stage2", 10)
    rr = RunConfig(method="lp-1st", epsilon=1.0).resolved()  # a saved stage 1 of VLP's vectors is no RR release
    assert not release_holds({**release_inputs(rr, "stage1", 10), "first_release": "vlp"}, rr, "stage1", 10)
