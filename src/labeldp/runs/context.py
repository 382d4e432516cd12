"""What a method works with while a run executes: the data, the run folder, the ledger, and the one
way to release (:meth:`RunContext.spend`), which never draws the same release twice.

Under ``torchrun`` (:mod:`labeldp.distributed`) every process holds a context: rank 0's draws the
releases, keeps the ledger and writes the run folder; the others receive each release from it and
share the training (:meth:`RunContext.train`), the predictions (:meth:`RunContext.predict_proba`) and
the final evaluation."""

from __future__ import annotations

import json
import math
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
from labeldp.accounting.datasets import DatasetLedger, Spend, folder_release
from labeldp.boundary import Release, release_randomized_response, release_true_labels
from labeldp.config.run import RunConfig
from labeldp.data import LabeledDataset
from labeldp.errors import RunDirectoryError
from labeldp.evaluation import classification_metrics, regression_metrics
from labeldp.files import write_json_atomic
from labeldp.models import build_model
from labeldp.randomness import public_rng, public_seed
from labeldp.recipes.applied import AS_GIVEN, AppliedRecipe
from labeldp.released_metrics import estimated_classification_metrics, estimated_regression_metrics
from labeldp.runs.rundir import RunDirectory
from labeldp.training.checkpoint import save_atomic
from labeldp.training.predict import predict_proba
from labeldp.training.records import EpochRecord
from labeldp.training.stage import train_stage


def table_features(data: LabeledDataset) -> list[str] | None:
    """The feature columns a table's model trains on (public: the table's column names), or None for a
    dataset that is no table.

    Parameters
    ----------
    data : LabeledDataset
        The run's dataset; only its preprocessor's ``features`` are read, never a label.

    Returns
    -------
    list of str or None
        The feature column names, in the preprocessor's order, or None where its preprocessor names none.
    """
    features = getattr(data.preprocessor, "features", None)
    return list(features) if features is not None else None


def release_inputs(config: RunConfig, name: str) -> dict[str, Any]:
    """The configuration that release ``name`` of a run depended on: all of it but the options its
    method declares the release independent of (``Method.independent_of``; ``train.lr`` names a
    field of a nested setting).

    Saved with each release (its ``config`` array), it lets a run continue from a release under a
    changed configuration only when the release would be the same, and lets ``labeldp tune`` check that
    its candidates share a release.

    Parameters
    ----------
    config : RunConfig
        The run's resolved configuration.
    name : str
        The release's name (``stage1``, ``prior``, ``pate``, ``dp-sgd``, ``test``, ...).

    Returns
    -------
    dict
        ``config.to_dict()`` without the options the method declares ``name`` independent of.
    """
    inputs = config.to_dict()
    for option in config.method_spec.independent_of.get(name, ()):
        outer, _, inner = option.partition(".")
        if inner:
            inputs[outer] = {key: value for key, value in inputs[outer].items() if key != inner}
        else:
            inputs.pop(outer)
    return inputs


def initial_model(config: RunConfig, data: LabeledDataset, stage: int, device: torch.device) -> nn.Module:
    """The model of ``stage`` of a run of ``config`` on ``data``, initialised from the public stream
    ``model-init`` of its seed, on ``device``.

    Parameters
    ----------
    config : RunConfig
        The run's resolved configuration (its ``model`` and ``seed``).
    data : LabeledDataset
        The dataset: its input shape, number of classes and categorical columns (all public).
    stage : int
        The stage, from 1: each stage has its own initialisation.
    device : torch.device
        Where the model is placed.

    Returns
    -------
    torch.nn.Module
        The untrained model.
    """
    seed = public_seed(config.seed, "model-init", stage)
    name = config.model_name(data.input_shape, data.categorical)
    return build_model(name, data.input_shape, data.num_classes, seed, data.categorical).to(device)


def dataset_ledger(data: LabeledDataset) -> DatasetLedger:
    """The ledger of ``data``'s dataset (:mod:`labeldp.accounting.datasets`), from its public facts."""
    facts = data.facts or {"dataset": data.name, "stem": data.name}  # rows would change with an audit's canaries
    return DatasetLedger.of({**facts, "described": facts.get("described", f"dataset {data.name}")})


class RunContext:
    """One run while it executes: its resolved ``config``, ``data``, folder ``out``, ``device`` and
    ``ledger`` (read back when resuming).

    It implements :class:`~labeldp.methods.protocol.MethodContext`, what a method may ask of a run.
    :func:`~labeldp.runs.run.train_run` makes one once the run folder is locked and prepared.

    Parameters
    ----------
    config : RunConfig
        The run's resolved configuration.
    out : RunDirectory
        The run folder (read-only on the ranks other than 0 of a ``torchrun`` run).
    data : LabeledDataset
        The dataset: public inputs, private training labels (and test labels, public or private).
    device : torch.device
        Where models train.
    progress : bool
        Whether to show progress bars and print each epoch's metrics.
    release : str or None, optional
        The run's id on its dataset's ledger (default None).
    recipe : AppliedRecipe or None, optional
        The recipe the configuration's options came from, which the summary names (default None:
        :data:`~labeldp.recipes.applied.AS_GIVEN`).

    Attributes
    ----------
    config, out, data, device, progress, recipe
        As given (``recipe`` None as :data:`~labeldp.recipes.applied.AS_GIVEN`).
    parallel, main : bool
        Whether this process is one of several (torchrun), and whether it is the one that releases and
        writes (rank 0; True without torchrun).
    ledger : PrivacyLedger
        The run's ledger over its private rows (:attr:`LabeledDataset.private_rows
        <labeldp.data.LabeledDataset.private_rows>`), under the method's neighbouring relation: on rank 0
        read back from ``ledger.json`` (empty for a new run), on the other ranks an empty one that is
        never written.
    started : float
        ``time.perf_counter()`` when the context was made.
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
        release: str | None = None,
        recipe: AppliedRecipe | None = None,
    ):
        self.config, self.out, self.data, self.device, self.progress = config, out, data, device, progress
        self.recipe = recipe or AS_GIVEN
        #: the run's id on its dataset's ledger, written into its folder at its first release
        self.release = release
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
        """The seconds the run has spent: before this start (rank 0) and since.

        Returns
        -------
        float
            ``elapsed_before`` plus the seconds since the context was made.
        """
        return self.elapsed_before + time.perf_counter() - self.started

    def spend(self, name: str, draw: Callable[[PrivacyLedger], Release]) -> Release:
        """Release ``name``: read back if saved, else drawn once, saved, then recorded on the ledger.
        Under torchrun, rank 0 alone releases (``draw`` runs there only, so it must not call
        collective operations) and every rank receives the release.

        ``draw(ledger)`` releases through :mod:`labeldp.boundary.release`, recording one entry tagged
        ``name`` on the run's ledger, and returns the :class:`Release`. The release is saved before
        it is used and before the ledger file is written; a crash between the two is recorded from
        the saved release on the next run; a recorded release whose file is missing is an error,
        never a second draw.

        What is released is what ``draw`` releases: the :class:`Release`'s ``members``, its ``labels``
        and noise channel ``likelihood`` where it has them, and its ``arrays`` (with what the method
        derived from them). It is saved as ``noisy_labels/<name>.npz`` in the run folder (every array of
        :meth:`Release.to_arrays`, its event and description included, plus ``config``: the JSON of
        :func:`release_inputs` of ``name``), and ``ledger.json`` is then written with the run's ``delta``
        (0 where it has none). A release read back is never drawn again, and is recorded only where the
        ledger lacks it (the crash above).

        Parameters
        ----------
        name : str
            The release's name, its file's and its ledger entry's tag (``stage1``, ``prior``, ...).
        draw : callable
            ``draw(ledger) -> Release``: releases with a ``release_*`` function of
            :mod:`labeldp.boundary` with the tag ``name``, which records it on ``ledger``. Called at most
            once, and only when the release was not saved.

        Returns
        -------
        Release
            The release, drawn or read back (the same on every rank).

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the ledger records ``name`` but its file is missing, if the saved file is damaged, or if
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
        """Whether :meth:`spend` of ``name`` would draw it (it is not saved yet): work that only a draw
        needs (a prior's inference) is then shared among the ranks before it.

        Under torchrun it is a collective call (rank 0 looks, every rank gets its answer).

        Parameters
        ----------
        name : str
            The release's name.

        Returns
        -------
        bool
            True if ``noisy_labels/<name>.npz`` does not exist.
        """
        return distributed.on_main(lambda: not self.out.release_path(name).exists())

    def predict_proba(self, model: nn.Module, inputs: np.ndarray, temperature: float = 1.0) -> np.ndarray:
        """:func:`~labeldp.training.predict.predict_proba` of ``model`` on ``inputs`` (under torchrun each
        rank computes its share: call it on every rank).

        Parameters
        ----------
        model : torch.nn.Module
            The model.
        inputs : numpy.ndarray
            The inputs, one row per example.
        temperature : float, optional
            The softmax's temperature: softmax(logits / temperature) (default 1.0).

        Returns
        -------
        numpy.ndarray
            (n, K) class probabilities, on every rank.
        """
        return predict_proba(model, inputs, temperature, sharded=self.parallel)

    def discard_private(self) -> None:
        """Delete the run's ``private/`` folder (rank 0)."""
        if self.main:
            self.out.discard_private()

    def checkpoint_path(self, stage: int) -> Path:
        """Where the training of ``stage`` keeps its checkpoint.

        Parameters
        ----------
        stage : int
            The stage, from 1.

        Returns
        -------
        pathlib.Path
            ``checkpoints/stage<stage>.pt`` in the run folder.
        """
        return self.out.checkpoint_path(stage)

    def private_path(self, name: str) -> Path | None:
        """A file of the run's ``private/`` folder, on rank 0 (None on the other ranks).

        Parameters
        ----------
        name : str
            The file's name.

        Returns
        -------
        pathlib.Path or None
            ``private/<name>`` (the folder created, owner only), or None off rank 0.
        """
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
                "of the run folder, or start again in a new folder (a new release, with its own ledger)"
            )
        release = draw(self.ledger)  # recorded here, in memory: the ledger file is written after the release's
        if not self.ledger.has(name):
            raise RunDirectoryError(
                f"release {name!r} was not recorded under its name: its draw must pass {name!r} "
                "as the tag of its release_* call"
            )
        self.out.save_release(
            name, **release.to_arrays(), config=np.array(json.dumps(release_inputs(self.config, name), sort_keys=True))
        )
        self.ledger.save(self.out.ledger_path, self.config.delta or 0.0)
        self.record_on_dataset(final=False)
        return release

    #: whether this context's ledger is a release of its own (not a tune candidate's copy)
    records_spend = True

    def record_on_dataset(self, final: bool = True) -> dict[str, Any]:
        """Put the run's spend on its dataset's ledger (the run folder's line replaces its earlier ones;
        not ``final``, between releases, it keeps the spend reserved for the whole run); the dataset's
        composed spend comes back."""
        ledger = dataset_ledger(self.data)
        if not self.records_spend:
            return ledger.summary()
        unit = (self.data.unit_bound or {}).get("column")
        delta = self.config.delta or 0.0
        release = folder_release(self.out.root, self.release)
        ledger.record(Spend.of_ledger(release, "train", self.ledger, delta, unit), final=final)
        return ledger.summary()

    def saved_release(self, name: str) -> Release:
        """Release ``name`` as saved by :meth:`spend` (an earlier stage's labels, to train on again): as
        :meth:`spend` returned it in this run (under torchrun, every rank has it so), else read back.

        It releases nothing: the release was made and recorded before.

        Parameters
        ----------
        name : str
            The release's name.

        Returns
        -------
        Release
            The saved release.

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
        """The model of ``stage``, initialised from the seed's stream for it, on the run's device.

        Parameters
        ----------
        stage : int
            The stage, from 1.

        Returns
        -------
        torch.nn.Module
            The untrained model (:func:`initial_model`).
        """
        return initial_model(self.config, self.data, stage, self.device)

    def on_epoch_end(self, stage: int, stages: int) -> Callable[[EpochRecord], None]:
        """The callback that writes an epoch's metrics (and prints them, with progress).

        Parameters
        ----------
        stage : int
            The stage being trained, from 1.
        stages : int
            The run's number of stages (for the printed line).

        Returns
        -------
        callable
            ``record(row)``: appends ``{"stage": stage, **row}`` of the :class:`EpochRecord` ``row`` to
            ``metrics.jsonl`` and writes ``elapsed.json`` (rank 0 only: the others cannot write).
        """

        def record(row: EpochRecord) -> None:
            self.out.append_metrics({"stage": stage, **asdict(row)})
            self.out.write_elapsed(self.seconds())
            if self.progress:
                acc = f"  test accuracy {row.test_accuracy:.4f}" if row.test_accuracy is not None else ""
                acc += f"  test RMSE {row.test_rmse:.4f}" if row.test_rmse is not None else ""
                loss = f"  loss {row.train_loss:.4f}" if row.train_loss is not None else ""
                tqdm.write(
                    f"stage {stage}/{stages} epoch {row.epoch}/{self.config.train.epochs}:{loss}{acc}  "
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
        """Train ``model`` on the training inputs ``indices`` with released ``targets`` (labels or
        likelihoods; for a regression also released values), checkpointed as ``stage``;
        ``soft_labels``: see :func:`labeldp.training.train_stage`.

        The examples trained on are :meth:`training_part` of ``indices``; with ``train.validation`` > 0
        that fraction of them is held out, by position from the public stream ``validation-split`` of
        the seed and stage, to score the epochs on their released targets (early stopping: the model
        ends with the best epoch's weights). Each epoch is evaluated on
        :meth:`evaluation_set` and recorded by :meth:`on_epoch_end`. A collective call under torchrun
        (the ranks train data-parallel). Training is post-processing of released targets: it releases
        nothing.

        Parameters
        ----------
        model : torch.nn.Module
            The model, trained in place (resumed from the stage's checkpoint if there is one).
        stage : int
            The stage, from 1 (its checkpoint, its seeds).
        stages : int
            The run's number of stages (for the progress line).
        indices : numpy.ndarray
            The training examples' positions.
        targets : numpy.ndarray
            One target per position: released labels, (n, K) likelihoods (evidence), (n, 3, K) binned
            evidence, or released values.
        description : str or None, optional
            The progress bar's label (default ``stage <stage>/<stages>``).
        soft_labels : bool, optional
            Train on the normalised likelihoods by cross-entropy instead of the forward loss (default False).
        """
        data, fraction = self.data, self.config.train.validation
        indices, targets = self.training_part(np.asarray(indices), np.asarray(targets))
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
            on_epoch_end=self.on_epoch_end(stage, stages),
            progress=self.progress,
            description=description or f"stage {stage}/{stages}",
            label_values=data.label_values,
            validation=validation,
            data_parallel=self.parallel,
            soft_labels=soft_labels,
        )

    def training_part(self, indices: np.ndarray, targets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The training inputs and targets a stage trains on (a tuning candidate holds some out).

        Parameters
        ----------
        indices : numpy.ndarray
            The training examples' positions.
        targets : numpy.ndarray
            Their targets, one per position.

        Returns
        -------
        tuple of numpy.ndarray
            ``(indices, targets)`` kept: all of them in a run.
        """
        return indices, targets

    def evaluation_set(self) -> tuple[np.ndarray, np.ndarray] | None:
        """The inputs and labels (values) each epoch is evaluated on: the public test set (none where
        the test labels are private: their release is made once, by :meth:`finish`).

        Returns
        -------
        tuple of numpy.ndarray, or None
            ``(x_test, y_test)``, the test values for a regression instead of ``y_test``; None when the
            test labels are private.
        """
        data = self.data
        if not data.public_test:
            return None
        return data.x_test, data.test_values if data.is_regression else data.y_test

    def finish(self, model: nn.Module, facts: dict[str, Any]) -> dict[str, Any]:
        """Save the final model and the run's summary (epsilon from the ledger, plus ``facts``); under
        torchrun the ranks share the evaluation, rank 0 writes, and every rank returns the summary.
        Private test labels are released first (:meth:`test_release`) and the metrics estimated from
        that release.

        A collective call under torchrun. Writes ``model.pt`` and ``summary.json`` (rank 0). What it
        releases, and how it is recorded, is :meth:`test_release`'s; the summary's ``epsilon`` (rounded
        up to 6 decimals; None if infinite) is the ledger's at the run's ``delta``, every release
        included.

        Parameters
        ----------
        model : torch.nn.Module
            The run's final model.
        facts : dict
            What the method adds to the summary (its stages, its noise multiplier, ...).

        Returns
        -------
        dict
            The summary: dataset, method, epsilon, delta, the neighbouring relation, the test metrics and
            where their labels came from, seconds, seed, sizes, ``facts``, and for a private method its noise.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the test release is recorded but its file is missing or damaged (see :meth:`spend`).
        """
        probabilities = predict_proba(
            model, self.data.x_test, batch_size=self.config.train.eval_batch_size, sharded=self.parallel
        )
        released = self.test_release()
        return distributed.on_main(lambda: self._summarise(model, probabilities, facts, released))

    def test_release(self) -> Release | None:
        """The release ``test`` of private test labels, once, by randomized response at the run's
        epsilon (the test rows pay it as the training rows do, in parallel with them: the run's epsilon
        is unchanged), or their true labels for a non-private run. None where the test labels are
        public, where ``test_labels`` is ``none``, or for DP-SGD, whose ledger counts examples added or
        removed, not labels replaced.

        What is released: one label per test row, by K-ary randomized response at ``epsilon`` (noise from
        the stream ``label-release`` 0), or the true labels themselves for a non-private method. It is
        made by :meth:`spend` under the name ``test``: saved as ``noisy_labels/test.npz`` and recorded on
        the run's ledger as one entry tagged ``test`` over the test rows (members ``num_train`` to
        ``num_train + num_test - 1``): a ``RandomizedResponseDpEvent``, or a ``NonPrivateDpEvent`` (the
        ledger's epsilon then infinite). Read back, not drawn again, when the run resumes.

        Returns
        -------
        Release or None
            The release ``test``, or None where nothing is released.

        Raises
        ------
        labeldp.errors.RunDirectoryError
            If the release is recorded but its file is missing or damaged.
        """
        config, data = self.config, self.data
        if data.public_test or config.test_labels == "none" or config.method_spec.training_releases:
            return None
        members = len(data.y_train) + np.arange(len(data.y_test))

        def draw(ledger: PrivacyLedger) -> Release:
            if not config.method_spec.private:
                return release_true_labels(ledger, data.y_test, members, data.num_classes, "test")
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
            if data.is_regression:
                return {**regression_metrics(probabilities, data.label_values, data.test_values), "test_labels": source}
            return {**classification_metrics(probabilities, data.y_test), "test_labels": source}
        if released is None:
            why = "dp-sgd releases no label" if config.method_spec.training_releases else "test_labels none"
            return {"test_labels": f"private: not measured ({why})"}
        source = (
            f"estimated from their release ({released.description}; each metric with its '_se' and 95% '_interval')"
        )
        if data.is_regression:
            return {
                **estimated_regression_metrics(probabilities, released.labels, released.likelihood, data.label_values),
                "test_labels": source,
            }
        return {
            **estimated_classification_metrics(probabilities, released.labels, released.likelihood),
            "test_labels": source,
        }

    def _network(self) -> str | None:
        """The network the run trained (none for a fitted model), as ``data.json`` records it."""
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
        if data.is_regression:
            metrics |= {
                "label_range": [float(data.label_values[0]), float(data.label_values[-1])],
                "label_grid": int(data.num_classes),
            }
        summary = {
            "dataset": config.dataset,
            "method": config.method,
            "epsilon": None if not np.isfinite(epsilon) else math.ceil(epsilon * 1e6) / 1e6,  # rounded up
            "delta": delta,
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
                "row_epsilon": None if not np.isfinite(row_epsilon) else math.ceil(row_epsilon * 1e6) / 1e6,
            }
        summary["dataset_ledger"] = self.record_on_dataset()
        write_json_atomic(self.out.summary_path, summary)
        return summary
