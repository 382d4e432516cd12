"""LP-2ST with counts (methods/cell_counts.py): every label released once, by RR or in one cell's noisy counts;
the cells come from public inputs and the first model; refusals before anything is written."""

from __future__ import annotations

from functools import partial

import numpy as np
import pytest

from labeldp.accounting import PrivacyLedger
from labeldp.errors import ConfigError
from labeldp.priors import cells_of
from labeldp.runs import RunConfig, train_run
from labeldp.training import TrainConfig
from tests.helpers import config_of


def test_each_label_is_released_once_and_the_model_learns(blobs, tmp_path) -> None:
    config = RunConfig(
        dataset="csv",
        method="lp-2st-counts",
        epsilon=1.0,
        options={"cell_rows": 5},
        train=TrainConfig(epochs=3, batch_size=64),
        insecure_noise_seed=0,
    )
    summary = train_run(config, tmp_path / "run", progress=False, dataset=blobs)
    ledger = PrivacyLedger.load(tmp_path / "run" / "ledger.json")
    assert [e.tag for e in ledger.entries] == ["stage1", "stage2"]
    first, second = (np.flatnonzero(e.members) for e in ledger.entries)
    assert np.intersect1d(first, second).size == 0 and first.size + second.size == 600
    assert summary["epsilon"] == pytest.approx(1.0, abs=1e-3)
    with np.load(tmp_path / "run" / "noisy_labels" / "stage2.npz") as stage2:
        assert "labels" not in stage2.files  # counts, no label per row
        sizes = np.bincount(stage2["cells"])
        assert stage2["counts"].shape == (sizes.size, 10) and sizes.min() >= 5
    assert summary["stages"][1]["cells"] == sizes.size
    assert summary["test_accuracy"] > 0.6  # well-separated blobs


def test_cells_group_rows_the_model_scores_alike() -> None:
    rng = np.random.default_rng(0)
    inputs = rng.normal(size=(400, 3))
    scored_high = inputs[:, 0] > 0
    probabilities = np.where(scored_high[:, None], [0.1, 0.9], [0.8, 0.2])
    cells = cells_of(inputs, probabilities, 20, seed=0)
    assert np.bincount(cells).min() >= 20
    for cell in np.unique(cells):  # one score per cell
        assert np.unique(scored_high[cells == cell]).size == 1


@pytest.mark.parametrize(
    ("overrides", "message"),
    [({"cell_rows": 0}, "cell_rows"), ({"consensus": True}, "consensus"), ({"stages": (0.3, 0.3, 0.4)}, "stage")],
)
def test_refused_before_anything_is_written(overrides, message, tmp_path) -> None:
    with pytest.raises(ConfigError, match=message):  # (an option it does not have: when it is made)
        train_run(config_of(dataset="digits", method="lp-2st-counts", epsilon=1.0, **overrides), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_numeric_labels_are_refused(toy, tmp_path) -> None:
    config = RunConfig(dataset="csv", method="lp-2st-counts", epsilon=1.0, label_range=(0, 20), label_grid=11)
    with pytest.raises(ConfigError, match="numeric"):
        train_run(config, tmp_path / "run", progress=False, dataset=toy)
    assert not (tmp_path / "run").exists()


class _Stop(Exception):
    pass


def _cells_handed_to_the_count(monkeypatch, module, run) -> np.ndarray:
    """The cells a run hands to ``release_noisy_histogram``; the run stops there, before the counts are drawn."""
    seen = []

    def stop(ledger, labels, members, groups, *args, **kwargs):
        seen.append(np.array(groups))
        raise _Stop

    monkeypatch.setattr(module, "release_noisy_histogram", stop)
    with pytest.raises(_Stop):
        run()
    return seen[0]


def test_the_cells_do_not_depend_on_the_second_stages_labels(blobs, tmp_path, monkeypatch) -> None:
    """A second-stage label changed (the same first release): the same cells, in the run and in the estimator."""
    import labeldp.methods.stage_release as stage_release
    from labeldp import LabelDPClassifier, PrivateLabels
    from labeldp.boundary import unseal
    from labeldp.data import LabeledDataset
    from labeldp.data.splits import split_stages

    config = RunConfig(
        dataset="csv", method="lp-2st-counts", epsilon=1.0, train=TrainConfig(epochs=1), insecure_noise_seed=0
    )
    row = split_stages(600, (0.4, 0.6), 0)[1][0]
    labels = unseal(blobs.y_train)
    changed = labels.copy()
    changed[row] = (labels[row] + 1) % 10
    cells = []
    for n, y in enumerate((labels, changed)):
        data = LabeledDataset("blobs", blobs.x_train, y, blobs.x_test, blobs.y_test, num_classes=10)
        run = partial(train_run, config, tmp_path / f"run{n}", progress=False, dataset=data)
        cells.append(_cells_handed_to_the_count(monkeypatch, stage_release, run))
    assert np.array_equal(*cells)

    order = np.random.default_rng(3).permutation(600)
    row = np.sort(order[240:])[0]
    changed = labels.copy()
    changed[row] = (labels[row] + 1) % 10
    cells = []
    for y in (labels, changed):
        model = LabelDPClassifier(
            epsilon=1.0, stages=2, second_stage="counts", random_state=3, insecure_noise_seed=0, classes=range(10)
        )
        fit = partial(model.fit, blobs.x_train, PrivateLabels.from_indices(y, 10))
        cells.append(_cells_handed_to_the_count(monkeypatch, stage_release, fit))
    assert np.array_equal(*cells)


def test_a_fit_that_fails_between_its_releases_is_charged_for_the_first_and_keeps_no_model(monkeypatch) -> None:
    import labeldp.methods.stage_release as stage_release
    from labeldp import LabelDPClassifier, PrivateLabels

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(300, 3)), rng.integers(0, 2, 300)
    private = PrivateLabels.from_indices(y, 2)
    model = LabelDPClassifier(epsilon=1.0, stages=2, second_stage="counts", random_state=0, classes=[0, 1])
    _cells_handed_to_the_count(monkeypatch, stage_release, lambda: model.fit(x, private))
    (first,) = private.ledger.entries  # the first stage's RR, drawn and charged
    assert "randomized response" in first.description and first.members.sum() == 120
    assert not hasattr(model, "estimator_") and not hasattr(model, "ledger_")


def test_inputs_a_tree_cannot_take_are_refused_before_any_release() -> None:
    from labeldp import LabelDPClassifier, PrivateLabels

    rng = np.random.default_rng(0)
    x, y = rng.normal(size=(300, 3)), rng.integers(0, 2, 300)
    private = PrivateLabels.from_indices(y, 2)
    with pytest.raises(ValueError):  # the tree takes no Generator as its random_state
        LabelDPClassifier(
            epsilon=1.0, stages=2, second_stage="counts", random_state=np.random.default_rng(0), classes=[0, 1]
        ).fit(x, private)
    with pytest.raises(ConfigError, match="weigh zero"):
        weights = np.zeros(300)
        weights[np.sort(np.random.default_rng(0).permutation(300)[120:])] = 1.0
        LabelDPClassifier(epsilon=1.0, stages=2, second_stage="counts", random_state=0, classes=[0, 1]).fit(
            x, private, weights
        )
    assert private.ledger.entries == ()
    x[0, 0] = np.inf  # a tree reads the ranks: infinite values are fine
    LabelDPClassifier(epsilon=1.0, stages=2, second_stage="counts", random_state=0, classes=[0, 1]).fit(x, private)
