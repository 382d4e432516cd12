"""What a method works with while a run executes: the data, the run folder, the ledger, and the one way to
release (:meth:`RunContext.spend`), which never draws the same release twice.

Under ``torchrun`` rank 0 draws the releases, keeps the ledger and writes the folder; the other ranks receive
each release and share the training, predictions and evaluation."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from labeldp import distributed
from labeldp.accounting import PrivacyLedger
from labeldp.accounting.datasets import folder_release
from labeldp.accounting.policy import Guarantee
from labeldp.accounting.rounding import stored_epsilon
from labeldp.accounting.spending import Spending
from labeldp.boundary import Release, release_randomized_response, release_true_labels
from labeldp.config.run_config import RunConfig, release_inputs
from labeldp.data import LabeledDataset
from labeldp.errors import SECOND_RELEASE, RunDirectoryError
from labeldp.evaluation import classification_metrics, regression_metrics
from labeldp.files import write_json_atomic
from labeldp.models import build_model
from labeldp.models.boosted_trees import BoostedTrees
from labeldp.randomness import public_rng, public_seed
from labeldp.recipes.applied import AS_GIVEN, AppliedRecipe
from labeldp.released_metrics import estimated_classification_metrics, estimated_regression_metrics
from labeldp.runs.plan import table_features
from labeldp.runs.rundir import RunDirectory
from labeldp.training.checkpoint import save_atomic
from labeldp.training.fit_trees import TREE_SETTINGS, fit_trees
from labeldp.training.predictions import predict_proba
from labeldp.training.records import EpochRecord
from labeldp.training.stage import train_stage


def initial_model(config: RunConfig, data: LabeledDataset, stage: int, device: torch.device) -> nn.Module:
    """The untrained model of ``stage`` (from 1), initialised from the public stream ``model-init`` of the seed."""
    seed = public_seed(config.seed, "model-init", stage)
    name = config.model_name(data.input_shape, data.categorical)
    return build_model(name, data.input_shape, data.num_classes, seed, data.categorical).to(device)


class RunContext:
    """One run while it executes: the :class:`~labeldp.methods.protocol.MethodContext` a method is given (see
    it for each method's contract).

    :func:`~labeldp.runs.run.train_run` makes one once the run folder is locked and prepared.

    Parameters
    ----------
    out : RunDirectory
        The run folder (read-only on the ranks other than 0 of a ``torchrun`` run).
    spending : Spending or None, optional
        The run's spend on the dataset ledgers, reserved (None: recorded nowhere, a finished run's).
    recipe : AppliedRecipe or None, optional
        The recipe the configuration's options came from, which the summary names (None:
        :data:`~labeldp.recipes.applied.AS_GIVEN`).

    Attributes
    ----------
    ledger : PrivacyLedger
        The run's ledger over its private rows, under the method's neighbouring relation: on rank 0 read
        back from ``ledger.json``, on the other ranks an empty one that is never written.
    elapsed_before : float
        The seconds the run spent before this start (0.0 off rank 0).
    """

    def __init__(
        self,
        config: RunConfig,
        out: RunDirectory,
        data: LabeledDataset,
        device: torch.device,
        progress: bool,
        spending: Spending | None = None,
        recipe: AppliedRecipe | None = None,
    ):
        self.config, self.out, self.data, self.device, self.progress = config, out, data, device, progress
        self.recipe = recipe or AS_GIVEN
        #: the run's spend on the dataset ledgers; its id is written into its folder at its first release
        self.spending = spending
        #: whether this process is one of several (torchrun), and whether it is the one that releases and writes
        self.parallel, self.main = distributed.active(), distributed.is_main()
        self.started = time.perf_counter()
        if self.main:  # over the training rows, then the test rows where their labels are private
            self.ledger = out.read_ledger(data.private_rows, config.method_spec.neighboring_relation, data.units)
            self.elapsed_before = out.elapsed()
        else:  # rank 0 keeps the ledger; the other ranks never read nor write the run folder
            self.ledger = PrivacyLedger(data.private_rows, config.method_spec.neighboring_relation, data.units)
            self.elapsed_before = 0.0
        self._releases: dict[str, Release] = {}

    def seconds(self) -> float:
        """The seconds the run has spent, before this start (rank 0) and since."""
        return self.elapsed_before + time.perf_counter() - self.started

    def spend(self, name: str, draw: Callable[[PrivacyLedger], Release]) -> Release:
        """Release ``name`` as :meth:`MethodContext.spend <labeldp.methods.protocol.MethodContext.spend>`
        says: saved as ``noisy_labels/<name>.npz`` (with
        :func:`~labeldp.config.run_config.release_inputs`) before ``ledger.json`` is written, so a crash
        between the two is recorded from the saved file on resume; only rank 0 calls ``draw``, so it must not
        call collective operations.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the ledger records ``name`` but its file is missing or damaged (never a second draw), or
            ``draw`` did not record its release under ``name``.
        """
        if self.parallel:

            def release_on_main() -> dict[str, np.ndarray]:
                self._releases[name] = self._spend(name, draw)
                return self._releases[name].to_arrays()

            arrays = distributed.on_main(release_on_main)
            release = self._releases[name] if self.main else Release.from_arrays(arrays)
        else:
            release = self._spend(name, draw)
        self._releases[name] = release
        return release

    def will_draw(self, name: str) -> bool:
        """See :meth:`MethodContext.will_draw <labeldp.methods.protocol.MethodContext.will_draw>`."""
        return distributed.on_main(lambda: not self.out.release_path(name).exists())

    def predict_proba(self, model: nn.Module, inputs: np.ndarray, temperature: float = 1.0) -> np.ndarray:
        """See :meth:`MethodContext.predict_proba <labeldp.methods.protocol.MethodContext.predict_proba>`."""
        return predict_proba(model, inputs, temperature, sharded=self.parallel)

    def discard_private(self) -> None:
        """See :meth:`MethodContext.discard_private <labeldp.methods.protocol.MethodContext.discard_private>`."""
        if self.main:
            self.out.discard_private()

    def checkpoint_path(self, stage: int) -> Path:
        """See :meth:`MethodContext.checkpoint_path <labeldp.methods.protocol.MethodContext.checkpoint_path>`."""
        return self.out.checkpoint_path(stage)

    def private_path(self, name: str) -> Path | None:
        """See :meth:`MethodContext.private_path <labeldp.methods.protocol.MethodContext.private_path>`."""
        return self.out.private_path(name) if self.main else None

    def _spend(self, name: str, draw: Callable[[PrivacyLedger], Release]) -> Release:
        saved = self.out.load_release(name)
        if saved is not None:
            release = Release.from_arrays(saved)
            if not self.ledger.has(name):  # crashed between saving the release and the ledger
                release.record(self.ledger, name)
                self.ledger.save(self.out.ledger_path, self.config.delta or 0.0)
            self.record_on_dataset(final=False)
            return release
        if self.ledger.has(name):
            raise RunDirectoryError(
                f"{self.out.ledger_path} records the release {name!r}, but {self.out.release_path(name)} is missing. "
                "Drawing those labels again would spend their budget a second time: restore the file from a copy "
                f"of the run folder, or start again in a new folder {SECOND_RELEASE}"
            )
        if self.spending is not None and self.records_spend:  # before the draw: a release interrupted from here on
            folder_release(self.out.root, self.spending.release)  # stays on the dataset ledgers (never fewer)
        release = draw(self.ledger)  # recorded here, in memory: the ledger file is written after the release's
        if not self.ledger.has(name):
            raise RunDirectoryError(
                f"release {name!r} was not recorded under its name: its draw must pass {name!r} "
                "as the tag of its release_* call"
            )
        self.out.save_release(
            name,
            **release.to_arrays(),
            config=np.array(json.dumps(release_inputs(self.config, name, self.data.num_classes), sort_keys=True)),
        )
        self.ledger.save(self.out.ledger_path, self.config.delta or 0.0)
        self.record_on_dataset(final=False)
        return release

    #: whether this context's ledger is a release of its own (not a tune candidate's copy)
    records_spend = True

    def record_on_dataset(self, final: bool = True) -> dict[str, Any] | None:
        """Put the run's spend on its dataset ledgers and return its group's figure; not ``final`` (between
        releases) the whole run's spend stays reserved."""
        if self.spending is None:
            return None
        if self.records_spend:
            folder_release(self.out.root, self.spending.release)
            unit = (self.data.unit_bound or {}).get("column")
            self.spending.record(Guarantee.of_ledger(self.ledger, self.config.delta or 0.0, unit), final=final)
        return self.spending.summary()

    def saved_release(self, name: str) -> Release:
        """See :meth:`MethodContext.saved_release <labeldp.methods.protocol.MethodContext.saved_release>`.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the run has not saved ``name``, or its file is damaged.
        """
        if name in self._releases:
            return self._releases[name]
        saved = self.out.load_release(name)
        if saved is None:
            raise RunDirectoryError(f"{self.out.release_path(name)} is missing: the run has not released {name!r}")
        return Release.from_arrays(saved)

    def new_model(self, stage: int) -> nn.Module:
        """See :meth:`MethodContext.new_model <labeldp.methods.protocol.MethodContext.new_model>`."""
        return initial_model(self.config, self.data, stage, self.device)

    def on_epoch_end(self, stage: int, stages: int, description: str | None = None) -> Callable[[EpochRecord], None]:
        """See :meth:`MethodContext.on_epoch_end <labeldp.methods.protocol.MethodContext.on_epoch_end>`:
        appends to ``metrics.jsonl`` and writes ``elapsed.json`` (rank 0)."""

        def record(row: EpochRecord) -> None:
            self.out.append_metrics({"stage": stage, **asdict(row)})
            self.out.write_elapsed(self.seconds())
            if self.progress:
                acc = f"  test accuracy {row.test_accuracy:.4f}" if row.test_accuracy is not None else ""
                acc += f"  test RMSE {row.test_rmse:.4f}" if row.test_rmse is not None else ""
                loss = f"  loss {row.train_loss:.4f}" if row.train_loss is not None else ""
                tqdm.write(
                    f"{description or f'stage {stage}/{stages}'} epoch {row.epoch}/{self.config.train.epochs}:"
                    f"{loss}{acc}  "
                    f"({row.seconds:.1f}s)"
                )

        return record

    def train(
        self,
        model: nn.Module,
        stage: int,
        stages: int,
        indices: np.ndarray,
        targets: np.ndarray,
        description: str | None = None,
        soft_labels: bool = False,
    ) -> None:
        """See :meth:`MethodContext.train <labeldp.methods.protocol.MethodContext.train>`.

        It trains on :meth:`training_part` of ``indices``; with ``train.validation`` > 0 that fraction is held
        out (by the public stream ``validation-split``) to score epochs on their released targets for early
        stopping; fitted trees (:class:`~labeldp.models.boosted_trees.BoostedTrees`) are fitted instead
        (:meth:`fit_trees`). Post-processing of released targets: it releases nothing."""
        data, fraction = self.data, self.config.train.validation
        indices, targets = self.training_part(np.asarray(indices), np.asarray(targets))
        if isinstance(model, BoostedTrees):
            self.fit_trees(model, stage, indices, targets, description or f"stage {stage}/{stages}", soft_labels)
            return
        test = self.evaluation_set()
        validation = None
        if fraction > 0:  # held out by position, from the seed: the validation examples' releases score epochs
            order = public_rng(self.config.seed, "validation-split", stage).permutation(len(indices))
            held = order[: max(1, int(round(fraction * len(indices))))]
            kept = np.setdiff1d(np.arange(len(indices)), held)
            validation = (data.x_train[indices[held]], np.asarray(targets)[held])
            indices, targets = indices[kept], np.asarray(targets)[kept]
        train_stage(
            model,
            data.x_train[indices],
            targets,
            data.num_classes,
            self.config.train,
            augmentation=data.augmentation,
            test=test,
            seed=public_seed(self.config.seed, "training", stage),
            checkpoint=self.out.checkpoint_path(stage),
            on_epoch_end=self.on_epoch_end(stage, stages, description),
            progress=self.progress,
            description=description or f"stage {stage}/{stages}",
            label_values=data.label_values,
            validation=validation,
            data_parallel=self.parallel,
            soft_labels=soft_labels,
        )

    def fit_trees(
        self, model: BoostedTrees, stage: int, indices: np.ndarray, targets: np.ndarray, description: str, soft: bool
    ) -> None:
        """Fit ``model`` on the released ``targets`` of ``indices`` (:func:`~labeldp.training.fit_trees.fit_trees`,
        its early-stopping split from the public stream ``training``); the fit's facts are one row of
        ``metrics.jsonl``. No checkpoint: a resumed run fits the same trees again from the saved releases."""
        started = time.perf_counter()
        seed = public_seed(self.config.seed, "training", stage)
        facts = fit_trees(model, self.data.x_train[indices], targets, soft_labels=soft, seed=seed)
        test = self.evaluation_set()
        accuracy = None
        if test is not None and self.data.label_values is None:
            accuracy = float((self.predict_proba(model, test[0]).argmax(axis=1) == test[1]).mean())
        if self.main:  # one row as an epoch's, with what the fit did
            row = EpochRecord(1, None, accuracy, TREE_SETTINGS["learning_rate"], time.perf_counter() - started)
            self.out.append_metrics({"stage": stage, **asdict(row), "fit": facts})
            self.out.write_elapsed(self.seconds())
        if self.progress:
            shown = f"  test accuracy {accuracy:.4f}" if accuracy is not None else ""
            tqdm.write(
                f"{description}: gbdt fitted on {facts['fitted_on']}, {facts['iterations']} iterations{shown}  "
                f"({time.perf_counter() - started:.1f}s)"
            )

    def training_part(self, indices: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The positions and targets a stage trains on: all of them in a run (a tune candidate holds some out)."""
        return indices, targets

    def evaluation_set(self) -> tuple[np.ndarray, np.ndarray] | None:
        """What each epoch is evaluated on: the public test set, or None where the test labels are private
        (their one release is :meth:`finish`'s)."""
        data = self.data
        if not data.public_test:
            return None
        return data.x_test, data.test_values if data.is_regression else data.public_test_labels

    def finish(self, model: nn.Module, facts: dict[str, Any]) -> dict[str, Any]:
        """Save the final model and ``summary.json`` (rank 0) and return the summary, ``facts`` added; a
        collective call under torchrun.

        Private test labels are released first (:meth:`test_release`) and the metrics estimated from that
        release. The summary's ``epsilon`` is the ledger's at the run's ``delta``, every release included,
        rounded up."""
        probabilities = predict_proba(
            model, self.data.x_test, batch_size=self.config.train.eval_batch_size, sharded=self.parallel
        )
        released = self.test_release()
        return distributed.on_main(lambda: self._summarise(model, probabilities, facts, released))

    def _per(self) -> str:
        """What the run's epsilon protects: each privacy unit (its column), each row, or each example (DP-SGD)."""
        if self.config.method_spec.protects_examples:
            return "example"
        return (self.data.unit_bound or {}).get("column") or "row"

    def test_release(self) -> Release | None:
        """The one release ``test`` of private test labels (made through :meth:`spend`), or None.

        K-ary randomized response at the run's epsilon (stream ``label-release`` 0), recorded as one ledger
        entry over the test rows: they are disjoint from the training rows, so the run's epsilon is unchanged.
        A non-private method releases the true labels (epsilon then infinite). None where the test labels are
        public, ``test_labels`` is ``none``, or for DP-SGD, whose ledger counts examples added or removed, not
        labels replaced."""
        config, data = self.config, self.data
        if data.public_test or config.test_labels == "none" or config.method_spec.training_releases:
            return None
        members = len(data.y_train) + np.arange(len(data.y_test))

        def draw(ledger: PrivacyLedger) -> Release:
            if not config.method_spec.private:
                return release_true_labels(ledger, data.y_test, members, data.num_classes, "test")
            assert config.epsilon is not None, "a resolved configuration of a private method has its epsilon"
            return release_randomized_response(
                ledger,
                data.y_test,
                members,
                data.num_classes,
                config.epsilon,
                config.noise.generator("label-release", 0),
                "test",
            )

        return self.spend("test", draw)

    def _test_metrics(self, probabilities: np.ndarray, released: Release | None) -> dict[str, Any]:
        """Exact metrics on a public test set, or estimated from the release of private test labels."""
        config, data = self.config, self.data
        if data.public_test:
            source = (
                "public (held out of the label column and treated as public: NOT covered by the epsilon)"
                if config.test_labels == "public"
                else "public test set"
            )
            if data.label_values is not None:  # a regression
                return {**regression_metrics(probabilities, data.label_values, data.test_values), "test_labels": source}
            return {**classification_metrics(probabilities, data.public_test_labels), "test_labels": source}
        if released is None:
            why = "dp-sgd releases no label" if config.method_spec.training_releases else "test_labels none"
            return {"test_labels": f"private: not measured ({why})"}
        source = (
            f"estimated from their release ({released.description}; each metric with its '_se' and 95% '_interval')"
        )
        if data.label_values is not None:  # a regression
            return {
                **estimated_regression_metrics(probabilities, released.labels, released.likelihood, data.label_values),
                "test_labels": source,
            }
        return {
            **estimated_classification_metrics(probabilities, released.labels, released.likelihood),
            "test_labels": source,
        }

    def _network(self) -> str | None:
        """The network the run trained (None for a fitted model), as ``data.json`` records it."""
        if self.config.method_spec.model_from_state is not None:
            return None
        return self.config.model_name(tuple(self.data.input_shape), tuple(self.data.categorical))

    def _summarise(
        self, model: nn.Module, probabilities: np.ndarray, facts: dict[str, Any], released: Release | None
    ) -> dict[str, Any]:
        config, data = self.config, self.data
        delta = config.delta or 0.0
        save_atomic(model.state_dict(), self.out.model_path)
        epsilon = self.ledger.epsilon(delta)
        metrics = self._test_metrics(probabilities, released)
        if data.label_values is not None:  # a regression
            metrics |= {
                "label_range": [float(data.label_values[0]), float(data.label_values[-1])],
                "label_grid": int(data.num_classes),
            }
        summary = {
            "dataset": config.dataset,
            "method": config.method,
            "epsilon": stored_epsilon(epsilon),
            "delta": delta,
            "per": self._per(),
            "neighboring_relation": self.ledger.relation_name,
            **metrics,
            "seconds": round(self.seconds(), 2),
            "seed": config.seed,
            **({"processes": distributed.world_size()} if self.parallel else {}),
            "num_train": int(len(data.y_train)),
            "num_test": int(len(data.y_test)),
            **({"features": list(features)} if (features := table_features(data)) else {}),
            **(
                {"network": network, "network_source": self.recipe.network_source(config.model)}
                if (network := self._network())
                else {}
            ),
            "recipe": self.recipe.name,
            "recipe_source": self.recipe.described,
            **facts,
        }
        if config.method_spec.private:
            summary["noise"] = config.noise.describe()
            summary["noise_private"] = config.noise.private
        if self.ledger.units is not None:  # epsilon is each unit's; each row's own, for information
            row_epsilon = self.ledger.row_epsilon(delta)
            summary["privacy_units"] = {
                "units": self.ledger.num_units,
                "most_rows": int(np.bincount(self.ledger.units).max()),
                "row_epsilon": stored_epsilon(row_epsilon),
            }
        summary["dataset_ledger"] = self.record_on_dataset()
        write_json_atomic(self.out.summary_path, summary)
        return summary
