"""DP-SGD's private selection of training options (dpsgd/selection.py, with its run side in
experiments/private_selection.py, which shares this module): the number of trials has its accounted
mean, one RepeatAndSelect event is recorded and meets the budget, held-out coins depend on an
example's position alone, the folder is written only after the last trial, an interrupted selection
stays accounted and is refused, and candidates may vary training options only."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest

from labeldp.boundary import PrivateLabels
from labeldp.data import LabeledDataset
from labeldp.dpsgd import selection
from labeldp.errors import ConfigError, RunDirectoryError
from labeldp.experiments.release_tuning import tune
from labeldp.randomness import public_rng
from labeldp.runs import RunConfig, RunDirectory, config_dataset
from labeldp.training import TrainConfig


def test_the_number_of_selection_trials_has_the_accounted_mean() -> None:
    rng = np.random.default_rng(0)
    for shape in (1.0, 0.5, math.inf):
        draws = np.array([selection.draw_trials(rng, 3.0, shape) for _ in range(3000)])
        assert abs(draws.mean() - 3.0) < 5 * draws.std() / math.sqrt(draws.size)
        assert draws.min() >= (0 if math.isinf(shape) else 1)


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_dpsgd_is_tuned_by_private_selection_with_one_accounted_event(tmp_path) -> None:
    """DP-SGD's tune records one RepeatAndSelectDpEvent, calibrated so that the ledger's epsilon
    (dp_accounting's RDP accountant) meets the budget; only the chosen trial is kept; a finished tune is
    read back, and a damaged one is not selected again in its folder."""
    from dp_accounting import dp_event
    from dp_accounting.rdp import rdp_privacy_accountant

    from labeldp.accounting import DPSGD_RELATION

    config = RunConfig(
        method="dp-sgd", epsilon=4.0, insecure_noise_seed=2, train=TrainConfig(epochs=1, batch_size=128, lr=0.5)
    )
    grid = {"lr": ["0.5", "1"], "max_grad_norm": ["1"]}
    outcome = tune(config, grid, tmp_path / "sel", progress=False, selection={"mean": 2.0})
    ledger = RunDirectory(tmp_path / "sel").read_ledger()
    (entry,) = ledger.entries
    assert entry.tag == "selection" and isinstance(entry.event, dp_event.RepeatAndSelectDpEvent)
    assert entry.event.mean == 2.0 and entry.event.shape == 1.0 and entry.members.all()
    accountant = rdp_privacy_accountant.RdpAccountant(neighboring_relation=DPSGD_RELATION)
    expected = accountant.compose(entry.event).get_epsilon(1e-5)
    assert ledger.epsilon(1e-5) == pytest.approx(expected) and expected <= 4.0 + 1e-9 and expected > 3.5
    assert outcome["ledger_epsilon"] == pytest.approx(expected, abs=1e-6)
    assert outcome["chosen"] in ("lr=0.5,max_grad_norm=1.0", "lr=1.0,max_grad_norm=1.0")
    saved = RunDirectory(tmp_path / "sel").read_config()
    assert saved["train"]["lr"] == outcome["chosen_options"]["lr"] and saved["noise_multiplier"] is None
    assert not (tmp_path / "sel" / "candidates").exists() and not (tmp_path / "sel" / "private").exists()
    assert tune(config, grid, tmp_path / "sel", progress=False, selection={"mean": 2.0}) == outcome
    assert outcome["final"]["seconds"] is None  # the trials' duration would tell their number
    assert not selection.scratch_folder(tmp_path / "sel").exists()
    (tmp_path / "sel" / "tune.json").unlink()
    (tmp_path / "sel" / "summary.json").unlink()
    with pytest.raises(RunDirectoryError, match="is in the way"):
        tune(config, grid, tmp_path / "sel", progress=False, selection={"mean": 2.0})


DPSGD_CONFIG = RunConfig(
    method="dp-sgd", epsilon=4.0, insecure_noise_seed=2, train=TrainConfig(epochs=1, batch_size=128, lr=0.5)
)


def test_holdout_coins_depend_on_the_position_alone() -> None:
    """The first n uniforms of numpy's Generator do not depend on how many are drawn, so each example's
    held-out coin depends on its position only: the coins of n examples are those of n + k cut to n."""
    for n in (1, 7, 64, 1000, 4097):
        uniforms = public_rng(3, "tune-holdout").random(n)
        for more in (1, 2, 1000):
            assert np.array_equal(public_rng(3, "tune-holdout").random(n + more)[:n], uniforms)
            assert np.array_equal(selection.holdout_coins(n + more, 0.2, 3)[:n], selection.holdout_coins(n, 0.2, 3))


def _numbered(data: LabeledDataset, extra: int = 0) -> LabeledDataset:
    """``data`` with its first ``extra`` training examples appended again at its end, and every training
    input's first entry set to its position (to tell which examples a trial trains on)."""
    x = np.concatenate([data.x_train, data.x_train[:extra]])
    x.reshape(len(x), -1)[:, 0] = np.arange(len(x))
    if not extra:
        return dataclasses.replace(data, x_train=x)
    appended = PrivateLabels.public(np.zeros(extra, dtype=int), data.num_classes)  # another example's label
    return dataclasses.replace(data, x_train=x, y_train=PrivateLabels.concatenate([data.y_train, appended]))


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_appending_an_example_moves_no_other_between_training_and_scoring(tmp_path, monkeypatch) -> None:
    """Add-or-remove neighbours: with one example appended, every trial trains on the same examples of
    the original dataset (plus, maybe, the new one), so every other example stays held out or not."""
    data = config_dataset(DPSGD_CONFIG.resolved())
    trained: dict[str, set[int]] = {}

    def recording(model, inputs, *args, **kwargs):
        trained.setdefault(name, set()).update(np.asarray(inputs).reshape(len(inputs), -1)[:, 0].astype(int).tolist())
        return model, []

    monkeypatch.setattr(selection, "train_dpsgd", recording)
    for name, extra in (("d", 0), ("d+1", 1)):
        tune(
            DPSGD_CONFIG,
            {"lr": ["0.5", "1"]},
            tmp_path / name,
            progress=False,
            dataset=_numbered(data, extra),
            selection={"mean": 2.0},
        )
    n = len(data.y_train)
    assert trained["d+1"] - {n} == trained["d"] and 0 < len(trained["d"]) < n


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_a_private_selection_writes_its_folder_after_the_last_trial(tmp_path, monkeypatch) -> None:
    """Nothing in the tune folder was written before the secret trials ended (their duration would tell
    their number): every file's and folder's mtime and ctime come after a file written once the last
    trial was over; the summary holds no duration; no metrics or checkpoints are written."""
    trial, marker = selection._trial, tmp_path / "after-the-trials"

    def timed(*args, **kwargs):
        result = trial(*args, **kwargs)
        marker.write_text("")  # the filesystem's clock, after this trial
        return result

    monkeypatch.setattr(selection, "_trial", timed)
    out = tmp_path / "sel"
    outcome = tune(DPSGD_CONFIG, {"lr": ["0.5", "1"]}, out, progress=False, selection={"mean": 2.0})
    after = marker.stat().st_mtime_ns
    written = [out, *out.rglob("*")]
    assert {path.name for path in written} >= {"config.json", "ledger.json", "model.pt", "summary.json", "tune.json"}
    for path in written:
        status = path.lstat()
        assert status.st_mtime_ns >= after and status.st_ctime_ns >= after, path
    assert not any(path.name in ("metrics.jsonl", "checkpoints", "elapsed.json") for path in written)
    assert outcome["final"]["seconds"] is None and json.loads((out / "summary.json").read_text())["seconds"] is None
    assert not selection.scratch_folder(out).exists()


@pytest.mark.filterwarnings("ignore::labeldp.errors.InsecureNoiseWarning")
def test_an_interrupted_private_selection_stays_accounted_and_is_refused(tmp_path, monkeypatch) -> None:
    """A selection stopped during its trials leaves no tune folder, only its recorded ledger in the
    owner-only scratch folder beside it; running it again is refused (it cannot be resumed without a
    second spend) by a message that says where that ledger is."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(selection, "_trial", interrupted)
    out = tmp_path / "sel"
    with pytest.raises(KeyboardInterrupt):
        tune(DPSGD_CONFIG, {"lr": ["0.5", "1"]}, out, progress=False, selection={"mean": 2.0})
    scratch = selection.scratch_folder(out)
    assert not out.exists() and scratch.stat().st_mode & 0o777 == 0o700
    (entry,) = RunDirectory(scratch).read_ledger().entries
    assert entry.tag == "selection"
    monkeypatch.undo()
    with pytest.raises(RunDirectoryError, match="cannot be resumed") as refused:
        tune(DPSGD_CONFIG, {"lr": ["0.5", "1"]}, out, progress=False, selection={"mean": 2.0})
    assert str(scratch / "ledger.json") in str(refused.value) and not out.exists()


@pytest.mark.parametrize("holdout, message", [(1e-6, "fewer than two to score on"), (1 - 1e-6, "none to train on")])
def test_a_private_selection_refuses_a_holdout_that_leaves_nothing(tmp_path, holdout, message) -> None:
    with pytest.raises(ConfigError, match=message):
        tune(
            DPSGD_CONFIG,
            {"lr": ["0.5", "1"]},
            tmp_path / "sel",
            holdout=holdout,
            progress=False,
            selection={"mean": 2.0},
        )
    assert not (tmp_path / "sel").exists() and not selection.scratch_folder(tmp_path / "sel").exists()


@pytest.mark.parametrize(
    "grid",
    [
        {"delta": ["0.1", "0.2"]},
        {"epsilon": ["1", "50"]},
        {"insecure_noise_seed": ["7", "8"]},
        {"noise_multiplier": ["1", "2"]},
    ],
)
def test_a_private_selection_varies_training_options_only(tmp_path, grid) -> None:
    """A candidate's delta would make the printed epsilon another delta's, its epsilon another budget, its
    noise seed reproducible noise inside the selection, its noise multiplier one never used: refused
    before anything is written."""
    config = RunConfig(method="dp-sgd", epsilon=4.0, train=TrainConfig(epochs=1, batch_size=128, lr=0.5))
    with pytest.raises(ConfigError):
        tune(config, {"lr": ["0.5", "1"], **grid}, tmp_path / "sel", progress=False)
    with pytest.raises(ConfigError, match="mean number of trials"):
        tune(config, {"lr": ["0.5", "1"]}, tmp_path / "sel", progress=False, selection={"mean": 1.0})
    assert not (tmp_path / "sel").exists()


def test_a_private_selection_without_candidates_is_a_config_error() -> None:
    from labeldp.dpsgd.selection import plan_selection
    from labeldp.errors import ConfigError

    with pytest.raises(ConfigError, match="at least one candidate"):
        plan_selection([], 1000, epsilon=1.0, delta=1e-5, seed=0, holdout=0.2, mean=5.0, shape=1.0, score_noise=10.0)


@pytest.mark.parametrize("mean", [3.0, 1000.0])
def test_a_poisson_number_of_trials_has_its_mean_even_where_exp_underflows(mean) -> None:
    from labeldp.dpsgd.selection import draw_trials

    rng = np.random.default_rng(0)
    draws = np.array([draw_trials(rng, mean, float("inf")) for _ in range(400)])
    assert abs(draws.mean() - mean) < 5 * np.sqrt(mean / draws.size)
    assert abs(draws.var() - mean) < 0.3 * mean
