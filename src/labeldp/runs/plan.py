"""A run's plan: its configuration resolved and checked on its data before anything is written or drawn
(:func:`plan_run`), and what its folder records of it (``config.json``, ``data.json``)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from labeldp import distributed
from labeldp.config.method_registry import get_method, method_names
from labeldp.config.run_config import RunConfig, recorded_config
from labeldp.data import LabeledDataset, load_dataset
from labeldp.data.dataset_spec import TableOptions
from labeldp.data.splits import split_stages
from labeldp.errors import ConfigError
from labeldp.files import write_json_atomic
from labeldp.models import build_model
from labeldp.models.names import default_model_name
from labeldp.recipes.applied import AS_GIVEN, AppliedRecipe
from labeldp.runs.rundir import RunDirectory
from labeldp.training.fit_trees import check_fitted_network
from labeldp.training.stage import check_amp, resolve_device


@dataclass(frozen=True)
class RunPlan:
    """A run of ``config`` (resolved) on ``data`` and ``device`` (:meth:`of`); ``in_memory``: the data was given
    rather than read from the files ``config`` names."""

    config: RunConfig
    data: LabeledDataset
    device: torch.device
    in_memory: bool
    #: the network the run trains (:func:`run_network`)
    network: str | None
    #: what its ``config.json`` holds (:func:`recorded_config`)
    recorded: dict[str, Any]
    #: the line saying what the method chose on the data (``Method.on_data``), or None
    chosen: str | None

    @classmethod
    def of(cls, config: RunConfig, data: LabeledDataset, device: torch.device, in_memory: bool) -> RunPlan:
        """The plan of a resolved ``config`` on ``data``, unchecked (:func:`plan_run` checks it)."""
        network = run_network(config, data.input_shape, data.categorical)
        recorded = recorded_config(config, network, data.num_classes, data.public_test)
        return cls(config, data, device, in_memory, network, recorded, config.on_data(data.num_classes)[1])

    def write(self, out: RunDirectory) -> None:
        """Write the plan into the run's folder: ``config.json`` (first: a folder that holds it is a run's, to
        resume), then ``data.json`` (:func:`data_facts`)."""
        facts = data_facts(self.data, self.in_memory, self.network)
        out.write_config(self.recorded)
        write_json_atomic(out.data_path, facts)

    def lines(self, recipe: AppliedRecipe | None) -> list[str]:
        """What a starting run says of its plan: the table's features, the network and where it came from
        (``recipe``), the privacy unit's bound, what the method chose on the data."""
        features, bound = table_features(self.data), self.data.unit_bound
        return [
            *([f"features ({len(features)}): {', '.join(features)}"] if features else []),
            *(
                [f"network: {self.network} ({(recipe or AS_GIVEN).network_source(self.config.model)})"]
                if self.network
                else []
            ),
            *([unit_bound_message(bound)] if bound is not None else []),
            *([self.chosen] if self.chosen is not None else []),
        ]


def plan_run(config: RunConfig, device: str = "auto", dataset: LabeledDataset | None = None) -> RunPlan:
    """``config`` resolved, its data loaded (``dataset`` None: from the files it names) and every check of
    :func:`check_plan` made, before anything is written or drawn. Under ``torchrun`` every process must
    give the same configuration and data (checked), and rank 0 alone checks the plan.

    Raises
    ------
    labeldp.errors.ConfigError
        For a configuration that cannot run on its data (:meth:`RunConfig.resolved
        <labeldp.config.run_config.RunConfig.resolved>`, :func:`check_plan`).
    labeldp.errors.BudgetError
        If the method's plan spends more than the budget (:func:`check_plan`).
    """
    config = config.resolved()
    data = dataset if dataset is not None else config_dataset(config)
    run_device = distributed.local_device(resolve_device(device))
    if distributed.start(run_device):
        distributed.check_same(
            (
                json.dumps(config.to_dict(), sort_keys=True),
                len(data.y_train),
                len(data.y_test),
                tuple(data.input_shape),
            ),
            "the run's configuration and dataset",
        )
    distributed.on_main(lambda: check_plan(config, data, run_device))
    return RunPlan.of(config, data, run_device, in_memory=dataset is not None)


def config_dataset(config: RunConfig) -> LabeledDataset:
    """The dataset ``config`` names, loaded from its files, its training labels private (the seed splits off
    test rows where the dataset has no test set of its own)."""
    table = TableOptions(**{option.name: getattr(config, option.name) for option in dataclasses.fields(TableOptions)})
    return load_dataset(
        config.dataset, config.data_dir, table, split_seed=config.seed, public_test=config.test_labels == "public"
    )


def check_plan(config: RunConfig, data: LabeledDataset, device: torch.device) -> None:
    """Refuse with :class:`~labeldp.errors.ConfigError`, before anything is written or released, a resolved
    ``config`` that cannot run on ``data``: a stage without examples, a model that does not fit the inputs,
    more clusters than examples, amp off a GPU, a label domain that does not match
    (:func:`check_label_domain`), and what the method's ``plan`` refuses.

    Raises
    ------
    labeldp.errors.BudgetError
        If the method's plan spends more than the budget (PATE, DP-SGD with a given noise multiplier).
    """
    check_amp(config.train, device)
    if config.privacy_unit is not None and data.units is None:
        raise ConfigError(
            f"privacy_unit {config.privacy_unit!r} is set but the dataset has no privacy units: give them to the "
            "dataset (LabeledDataset(units=...)) or read the table from its file"
        )
    if data.units is not None and config.method_spec.protects_examples:
        raise ConfigError(
            f"method {config.method!r} protects examples added or removed, not labels replaced: its guarantee "
            "does not compose per privacy unit; use a label-DP method, or a dataset without units"
        )
    n = len(data.y_train)
    assert config.stages is not None, "a resolved configuration has its stages"
    sizes = [part.size for part in split_stages(n, config.stages, config.seed, data.train_units)]
    if min(sizes) == 0:
        raise ConfigError(
            f"stages {list(config.stages)} leave stage {sizes.index(0) + 1} without any of the {n} training examples"
        )
    network = config.model_name(data.input_shape, data.categorical)
    try:
        build_model(network, data.input_shape, data.num_classes, categorical=data.categorical)
    except ValueError as error:
        raise ConfigError(f"{error} (the dataset's inputs have shape {data.input_shape})") from None
    check_fitted_network(config, network, data.is_regression)
    if config.prior == "cluster" and config.clusters > n:
        raise ConfigError(f"clusters ({config.clusters}) exceeds the {n} training examples")
    check_label_domain(config, data)
    if config.method_spec.plan is not None:
        config.method_spec.plan(config, data)


def check_label_domain(config: RunConfig, data: LabeledDataset) -> None:
    """Refuse (:class:`~labeldp.errors.ConfigError`) a declared label grid that is not the dataset's, and the
    squared loss on classes."""
    declared, grid = config.label_values, data.label_values
    tolerance = 0.0 if declared is None else 1e-12 * np.ptp(declared)
    if declared is not None and (
        grid is None or grid.shape != declared.shape or not np.allclose(grid, declared, rtol=0, atol=tolerance)
    ):
        have = (
            f"the grid of {data.num_classes} points over [{grid[0]:g}, {grid[-1]:g}]"
            if grid is not None
            else f"{data.num_classes} classes"
        )
        raise ConfigError(
            f"the run declares a grid of {declared.size} points over [{declared[0]:g}, {declared[-1]:g}]"
            f", the dataset has {have}"
        )
    if getattr(config.options, "loss", None) == "mse" and not data.is_regression:
        raise ConfigError("loss 'mse' fits released values: it needs numeric labels (a regression dataset)")


def run_network(config: RunConfig, input_shape: tuple[int, ...], categorical: tuple[int, ...] = ()) -> str | None:
    """The network a run of ``config`` trains on these inputs (:meth:`RunConfig.model_name`), or None for a
    method whose model is fitted rather than named (``marginals``)."""
    if config.method_spec.model_from_state is not None:
        return None
    return config.model_name(tuple(input_shape), tuple(categorical))


def data_facts(data: LabeledDataset, in_memory: bool, model: str | None) -> dict[str, Any]:
    """The public facts of a run's dataset its model needs, JSON-ready (``data.json``): shapes, label domain,
    sizes, ``source`` (``"in-memory"`` or ``"files"``), the privacy unit's bound and ``model``, the network
    trained (:func:`run_network`)."""
    return {
        "name": data.name,
        "input_shape": list(data.input_shape),
        "num_classes": data.num_classes,
        "class_names": list(data.class_names),
        "num_train": int(len(data.y_train)),
        "num_test": int(len(data.y_test)),
        "source": "in-memory" if in_memory else "files",
        "categorical": list(data.categorical),
        "label_values": data.label_values.tolist() if data.label_values is not None else None,
        "unit_bound": data.unit_bound,
        "model": model,
    }


def table_features(data: LabeledDataset) -> list[str] | None:
    """The feature columns a table's model trains on (public column names); None for no table."""
    features = getattr(data.preprocessor, "features", None)
    return list(features) if features is not None else None


def unit_bound_message(bound: dict[str, Any]) -> str:
    """What a table's privacy unit kept, in words (public: counts of rows per unit involve no label)."""
    return (
        f"privacy unit {bound['column']!r} (public, not a feature): {bound['units']:,} units, at most "
        f"{bound['max_rows']} rows each, chosen by the public seed (never by a label): {bound['rows_kept']:,} of "
        f"{bound['rows_read']:,} rows kept; each release gives a row epsilon / {bound['most_rows']}"
    )


def saved_network(saved: dict[str, Any], facts: dict[str, Any]) -> str | None:
    """The network a saved run trained: its ``config.json``'s, else its ``data.json``'s, else (a folder saved
    before ``data.json`` recorded it) the rule's choice then: the small CNN for 28x28 images, the unchanged
    rule otherwise."""
    name = saved.get("method")
    method = get_method(name) if name in method_names() else None
    if method is not None and method.model_from_state is not None:
        return None
    if saved.get("model"):
        return saved["model"]
    if "model" in facts:
        return facts["model"]
    shape, categorical = tuple(facts["input_shape"]), tuple(facts.get("categorical", ()))
    if shape[1:] == (28, 28):
        return "cnn"
    return default_model_name(shape, categorical, per_example=method is not None and method.per_example)


def compared_configs(
    saved: dict[str, Any],
    facts: dict[str, Any] | None,
    config: RunConfig,
    input_shape: tuple[int, ...],
    public_test: bool | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A saved run's configuration and a new one (resolved), each as ``config.json`` records it
    (:func:`~labeldp.config.run_config.recorded_config`) on the saved run's data (``data.json``'s ``facts``),
    to compare. ``facts`` None (no ``data.json``): the saved run is taken to train the new one's network, and
    each configuration is compared as given."""
    categorical = tuple(facts.get("categorical", ())) if facts is not None else ()
    network = run_network(config, input_shape, categorical)
    trained = saved_network(saved, facts) if facts is not None else network
    classes = facts["num_classes"] if facts is not None else None
    existing = RunConfig.from_dict({**saved, "model": trained})
    return recorded_config(existing, trained, classes), recorded_config(config, network, classes, public_test)
