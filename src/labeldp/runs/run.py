"""Running a configuration: check it all, then resume or start the run in its folder and hand it to
its method (:mod:`labeldp.methods`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import torch
from tqdm.auto import tqdm

from labeldp import distributed
from labeldp.accounting.datasets import Spend, new_release, saved_release, total_epsilon
from labeldp.accounting.rounding import format_epsilon
from labeldp.config.run import RunConfig
from labeldp.data import LabeledDataset, load_dataset
from labeldp.data.splits import split_stages
from labeldp.errors import ConfigError, InsecureNoiseWarning, MissingFileError, RunDirectoryError
from labeldp.files import write_atomic, write_json_atomic
from labeldp.methods.registry import get_method, method_names
from labeldp.models import build_model
from labeldp.models.names import default_model_name
from labeldp.recipes.applied import AS_GIVEN, AppliedRecipe
from labeldp.runs.context import RunContext, dataset_ledger, release_inputs, table_features
from labeldp.runs.rundir import RunDirectory
from labeldp.training.checkpoint import load_torch
from labeldp.training.stage import check_amp, resolve_device


def config_dataset(config: RunConfig) -> LabeledDataset:
    """The dataset a run configuration names (loaded from its files).

    Parameters
    ----------
    config : RunConfig
        The run's configuration: its dataset, data folder or table and their options, and its seed
        (which splits off test rows where the dataset has no test set of its own).

    Returns
    -------
    LabeledDataset
        The dataset, its training labels private.

    Raises
    ------
    labeldp.errors.ConfigError
        For an unknown dataset, or options the dataset does not take.
    labeldp.errors.MissingFileError
        If a file the dataset reads does not exist.
    labeldp.errors.DataError
        If a file cannot be used as it is.
    """
    return load_dataset(
        config.dataset,
        config.data_dir,
        table=config.table,
        label_column=config.label_column,
        test_table=config.test_table,
        classes=config.classes,
        features=config.features,
        drop=config.drop or (),
        id_column=config.id_column,
        split_seed=config.seed,
        label_range=config.label_range,
        label_grid_size=config.label_grid,
        public_test_split=config.test_labels == "public",
        unit_column=config.privacy_unit,
        max_rows_per_unit=config.max_rows_per_unit,
        one_row_per_person=config.one_row_per_person,
    )


def check_dataset_spend(config: RunConfig, data: LabeledDataset, out_dir, progress: bool) -> str:
    """Refuse, before anything is drawn or written, a run that would take its dataset past
    ``--total-epsilon``; else reserve its spend there and say what it adds to what the dataset has spent
    already. Returns the run's release id there (:func:`labeldp.accounting.datasets.folder_release`)."""
    epsilon = math.inf if config.epsilon is None else float(config.epsilon)
    unit = (data.unit_bound or {}).get("column")
    ledger = dataset_ledger(data)
    release = saved_release(out_dir)
    saved = {s.release: s for s in ledger.spends()}.get(release)
    if (saved is not None and saved.epsilon >= epsilon) or (Path(out_dir) / "summary.json").exists():
        return release  # on the ledger already, or finished: it draws nothing more (or is refused)
    release = release or new_release(out_dir)
    before, after = ledger.check(Spend(release, "train", epsilon, config.delta or 0.0, unit, epsilon), total_epsilon())
    if before > 0:
        print(
            f"dataset {ledger.key}: epsilon {format_epsilon(before)} spent already on it; this run takes it to "
            f"{format_epsilon(after)} (its ledger: {ledger.path})",
            file=sys.stderr,
        )
    return release


def withdraw_unspent(data: LabeledDataset, out_dir, release: str | None) -> None:
    """After a failure: withdraw the run's reservation if the run drew nothing (its folder holds no release id)."""
    if release is not None and saved_release(out_dir) is None:
        dataset_ledger(data).cancel(release)


def data_facts(data: LabeledDataset, in_memory: bool, model: str | None) -> dict[str, Any]:
    """The public facts of a run's dataset that its model needs (``data.json``): the inputs' shape, the
    label domain, the sizes, whether it came from files the configuration names or from memory, and
    the network the run trains.

    Parameters
    ----------
    data : LabeledDataset
        The run's dataset.
    in_memory : bool
        Whether it was given in memory (``train_run``'s ``dataset``) rather than read from files.
    model : str or None
        The network the run trains (:func:`run_network`: the one it names, or the rule's; None for a
        method whose model is fitted).

    Returns
    -------
    dict
        ``name``, ``input_shape``, ``num_classes``, ``class_names``, ``num_train``, ``num_test``,
        ``source`` (``"in-memory"`` or ``"files"``), ``categorical``, ``label_values`` (the grid of
        numeric labels, else None), ``unit_bound`` (a table's privacy unit and the rows it kept, else
        None) and ``model``: public facts only, JSON-ready.
    """
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


def load_run_model(run_dir: str | Path) -> torch.nn.Module:
    """The final model of a finished run (its ``model.pt``), on the CPU, built from the run's own record
    (no dataset needed).

    Loading it costs no privacy: the model is post-processing of the run's releases.

    Parameters
    ----------
    run_dir : str or pathlib.Path
        The run folder.

    Returns
    -------
    torch.nn.Module
        The model with the run's final weights.

    Raises
    ------
    labeldp.errors.RunDirectoryError
        If the folder has no ``config.json`` and ``data.json`` (not a run folder), or a file is damaged.
    labeldp.errors.MissingFileError
        If ``model.pt`` does not exist (the run has not finished).
    """
    out = RunDirectory(run_dir)
    facts, saved = out.read_data_facts(), out.read_config()
    if saved is None or facts is None:
        raise RunDirectoryError(f"{run_dir} has no config.json and data.json: not a labeldp run directory")
    if not out.model_path.exists():
        raise MissingFileError(
            f"{out.model_path} does not exist: the run has not finished (run the command that started it "
            "again: it resumes)"
        )
    state = load_torch(out.model_path)
    method = saved.get("method")
    if method in method_names() and get_method(method).model_from_state is not None:  # a fitted shape
        return get_method(method).model_from_state(state)
    model = build_model(
        saved_network(saved, facts),
        tuple(facts["input_shape"]),
        facts["num_classes"],
        categorical=tuple(facts.get("categorical", ())),
    )
    model.load_state_dict(state)
    return model


def run_network(config: RunConfig, input_shape: tuple[int, ...], categorical: tuple[int, ...] = ()) -> str | None:
    """The network a run of ``config`` trains on inputs of ``input_shape`` (:meth:`RunConfig.model_name`),
    or None for a method whose model is fitted rather than named (``marginals``).

    Parameters
    ----------
    config : RunConfig
        The run's configuration.
    input_shape : tuple of int
        The dataset's public input shape.
    categorical : tuple of int, optional
        Sizes of its leading integer-coded input columns (default none).

    Returns
    -------
    str or None
        One of :data:`labeldp.models.MODELS`, or None.
    """
    if config.method_spec.model_from_state is not None:
        return None
    return config.model_name(tuple(input_shape), tuple(categorical))


def saved_network(saved: dict[str, Any], facts: dict[str, Any]) -> str | None:
    """The network a saved run trained: the one its ``config.json`` names, else the one its ``data.json``
    records, else, for a folder saved before ``data.json`` recorded it, the rule's choice then (the small
    CNN for 28x28 images; for other shapes the rule's choice has not changed).

    Parameters
    ----------
    saved : dict
        The run's ``config.json``.
    facts : dict
        The run's ``data.json``.

    Returns
    -------
    str or None
        The network's name; None for a method whose model is fitted (``marginals``).
    """
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


def recorded_test_labels(config: RunConfig, public_test: bool | None = None) -> str:
    """The test labels as a run of ``config`` measures them, as its ``config.json`` records them (and its
    summary's ``test_labels`` says): ``"public"`` where the test set is public (the dataset's own, or
    held-out rows treated as public), ``"none"`` where nothing is measured (``test_labels`` none, or a
    method that releases no label: DP-SGD), else ``"released"``.

    Parameters
    ----------
    config : RunConfig
        The configuration (resolved, or read back from a ``config.json`` of any version).
    public_test : bool or None, optional
        Whether the run's test labels are public (:attr:`LabeledDataset.public_test
        <labeldp.data.LabeledDataset.public_test>`); None: as the configuration's dataset loads them.

    Returns
    -------
    str
        One of :data:`~labeldp.config.run.TEST_LABELS`; ``config.test_labels`` as it is where the
        configuration names a dataset or method this process does not know.
    """
    try:
        if public_test is None:
            public_test = not config.test_held_out or config.test_labels == "public"
        if public_test:
            return "public"
        return "none" if config.method_spec.training_releases else config.test_labels
    except ConfigError:  # another version's dataset or method: compared as written
        return config.test_labels


def recorded_config(config: RunConfig, data: LabeledDataset) -> dict[str, Any]:
    """What a run's ``config.json`` holds: ``config`` as the run resolved it on ``data``, saying what its
    summary says: the network it trains named (``model``: the rule's choice where ``config`` names none,
    :func:`run_network`) and its test labels as measured (:func:`recorded_test_labels`). Read back
    (:meth:`RunConfig.from_dict`), it resolves, and a rerun compares it as the same run
    (:func:`compared_configs`).

    Parameters
    ----------
    config : RunConfig
        The run's resolved configuration.
    data : LabeledDataset
        Its dataset (only its public shape and whether its test labels are public are read).

    Returns
    -------
    dict
        :meth:`RunConfig.to_dict` with ``model`` and ``test_labels`` resolved.
    """
    return {
        **config.to_dict(),
        "model": run_network(config, data.input_shape, data.categorical),
        "test_labels": recorded_test_labels(config, data.public_test),
    }


def compared_configs(
    saved: dict[str, Any],
    facts: dict[str, Any] | None,
    config: RunConfig,
    input_shape: tuple[int, ...],
    public_test: bool | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A saved run's configuration and a new one, as dictionaries to compare, each as ``config.json``
    records it (:func:`recorded_config`): naming the network it trains (:func:`saved_network`,
    :func:`run_network`), so that a network the rule chose and the same network named are the same run,
    and one rule's choice before and after the rule changed are not; and its test labels as measured
    (:func:`recorded_test_labels`), so that a folder saved before ``config.json`` recorded them (MNIST's
    ``"released"``) is the same run as one that does (``"public"``).

    Parameters
    ----------
    saved : dict
        The saved ``config.json``.
    facts : dict or None
        The saved ``data.json`` (None: not written; the saved run is then taken to train the new one's
        network).
    config : RunConfig
        The new configuration.
    input_shape : tuple of int
        The dataset's public input shape.
    public_test : bool or None, optional
        Whether the new run's test labels are public (None: as its dataset loads them).

    Returns
    -------
    tuple of dict
        The saved and the new configuration, defaults filled in (``RunConfig.to_dict``).
    """
    categorical = tuple(facts.get("categorical", ())) if facts is not None else ()
    network = run_network(config, input_shape, categorical)
    trained = saved_network(saved, facts) if facts is not None else network
    existing = RunConfig.from_dict({**saved, "model": trained})
    return (
        {**existing.to_dict(), "test_labels": recorded_test_labels(existing)},
        {
            **dataclasses.replace(config, model=network).to_dict(),
            "test_labels": recorded_test_labels(config, public_test),
        },
    )


def train_run(
    config: RunConfig,
    out_dir: str | Path,
    *,
    device: str = "auto",
    progress: bool = True,
    dataset: LabeledDataset | None = None,
    announce_resume: bool = True,
    recipe: AppliedRecipe | None = None,
) -> dict[str, Any]:
    """Run (or resume) ``config`` in ``out_dir`` and return its summary. ``announce_resume=False``: the
    folder was started in this call's own process (the auto-tune's release), so it is not said to resume.
    ``recipe``: the recipe ``config``'s options came from, which the summary names (``recipe``,
    ``recipe_source``; None: :data:`~labeldp.recipes.applied.AS_GIVEN`, the configuration as given), and
    so where its network came from (``network_source``, also printed).

    Running again on an existing directory continues from the last completed epoch, reuses the saved
    noisy labels and leaves the ledger unchanged; a finished run just returns its summary. A
    directory holding a run with a different configuration is refused, unless the run is unfinished
    and its saved releases do not depend on what changed: training then restarts from them.
    Everything that can be checked is checked before the run directory is written.

    Under ``torchrun`` (``WORLD_SIZE`` > 1) every process calls it with the same configuration: they
    join one process group (:mod:`labeldp.distributed`) and train data-parallel; rank 0 alone checks,
    locks, reads and writes the run folder and releases, and hands its decisions and releases to the
    others. Every rank returns the summary.

    What is released: whatever the method releases (its ``run``, :class:`~labeldp.methods.registry.Method`,
    through :meth:`RunContext.spend <labeldp.runs.context.RunContext.spend>`), then, where the test
    labels are private, their release ``test`` (:meth:`RunContext.test_release
    <labeldp.runs.context.RunContext.test_release>`; none with ``test_labels`` ``none``, nor for
    DP-SGD). Each release is saved in ``noisy_labels/<name>.npz`` before it is used and recorded as one
    entry tagged ``<name>`` on the run's ledger, ``ledger.json``; the summary's epsilon is that ledger's.
    A resumed run reads its saved releases back and draws none of them again. A private method's run
    whose noise can be regenerated from the configuration (``insecure_noise_seed``) warns with
    :class:`~labeldp.errors.InsecureNoiseWarning`.

    Parameters
    ----------
    config : RunConfig
        The run's configuration (resolved here).
    out_dir : str or pathlib.Path
        The run folder: created, resumed, or (finished) read back.
    device : str, optional
        ``"auto"`` (the GPU when torch sees one, else the CPU) or a device torch knows (``"cpu"``,
        ``"cuda:1"``, ...); under torchrun each process takes its local GPU.
    progress : bool, optional
        Show progress bars and each epoch's metrics (rank 0 only under torchrun).
    dataset : LabeledDataset or None, optional
        The dataset, given in memory; None: loaded from the files ``config`` names
        (:func:`config_dataset`).

    Returns
    -------
    dict
        The run's summary (``summary.json``): epsilon from the ledger, delta, the test metrics, sizes,
        and the method's facts (see :meth:`RunContext.finish <labeldp.runs.context.RunContext.finish>`).

    Raises
    ------
    labeldp.errors.ConfigError
        If the configuration cannot run on the dataset (:func:`check_plan`), or the device is unavailable.
    labeldp.errors.BudgetError
        If the budget cannot pay for the method's plan (checked before any release), or, for PATE, no
        query was answered (after its release).
    labeldp.errors.RunDirectoryError
        If ``out_dir`` holds a finished run of another configuration, an unfinished one whose releases
        depend on what changed, a damaged file, or a recorded release whose file is missing.
    labeldp.errors.RunLockedError
        If another process is using ``out_dir``.
    labeldp.errors.MissingFileError
        If a dataset file does not exist.
    labeldp.errors.DataError
        If a dataset file cannot be used as it is.
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
        progress = progress and distributed.is_main()
    distributed.on_main(lambda: check_plan(config, data, run_device))
    release = distributed.on_main(lambda: check_dataset_spend(config, data, out_dir, progress))
    if not config.noise.private and config.method_spec.private and distributed.is_main():
        warnings.warn(f"the run's noise is {config.noise.describe()}", InsecureNoiseWarning, stacklevel=2)
    out = RunDirectory(out_dir, read_only=not distributed.is_main())
    try:
        with contextlib.ExitStack() as held:
            finished = distributed.on_main(
                lambda: _open_run(config, data, out, held, progress, dataset is not None, announce_resume, recipe)
            )
            if finished is not None:
                return finished
            context = RunContext(config, out, data, run_device, progress, release=release, recipe=recipe)
            model, facts = config.method_spec.run(context)
            return context.finish(model, facts)
    except BaseException:
        distributed.on_main(lambda: withdraw_unspent(data, out_dir, release))
        raise


def _open_run(
    config: RunConfig,
    data: LabeledDataset,
    out: RunDirectory,
    held: contextlib.ExitStack,
    progress: bool,
    in_memory: bool,
    announce_resume: bool = True,
    recipe: AppliedRecipe | None = None,
) -> dict[str, Any] | None:
    """Lock the run folder (for as long as ``held`` lasts), and either return the summary of the run it
    holds when finished, or prepare it for the run to start or resume (None): its ``config.json`` is
    :func:`recorded_config`'s."""
    held.enter_context(out.lock())
    saved = out.read_config()
    if saved is not None:
        _accept_changed_config(saved, config, data, out, progress and announce_resume)
    finished = out.read_summary()
    if finished is not None:
        return finished
    out.create()
    out.write_config(recorded_config(config, data))
    write_json_atomic(
        out.data_path,
        data_facts(data, in_memory=in_memory, model=run_network(config, data.input_shape, data.categorical)),
    )
    if data.preprocessor is not None:
        write_atomic(out.preprocessor_path, lambda tmp: joblib.dump(data.preprocessor, tmp))
    out.keep_metrics_of_checkpoints(len(config.stages), strict=config.method_spec.training_releases)
    features = table_features(data)
    if features and progress:
        tqdm.write(f"features ({len(features)}): {', '.join(features)}")
    network = run_network(config, data.input_shape, data.categorical)
    if network is not None and progress:
        tqdm.write(f"network: {network} ({(recipe or AS_GIVEN).network_source(config.model)})")
    if data.unit_bound is not None and progress:
        tqdm.write(unit_bound_message(data.unit_bound))
    if saved is not None and progress and announce_resume:
        tqdm.write(_resume_message(out))
    return None


def unit_bound_message(bound: dict[str, Any]) -> str:
    """What a table's privacy unit kept, in words (public: counts of rows per unit involve no label).

    Parameters
    ----------
    bound : dict
        The dataset's ``unit_bound``.

    Returns
    -------
    str
        The column, the units, the bound and the rows kept.
    """
    return (
        f"privacy unit {bound['column']!r} (public, not a feature): {bound['units']:,} units, at most "
        f"{bound['max_rows']} rows each, chosen by the public seed (never by a label): {bound['rows_kept']:,} of "
        f"{bound['rows_read']:,} rows kept; each release gives a row epsilon / {bound['most_rows']}"
    )


def _resume_message(out: RunDirectory) -> str:
    """What a resumed run continues from: its saved releases (read back, not drawn) and its last epoch."""
    releases = sorted(out.release_inputs())
    rows = out.read_metrics()
    where = f"after stage {rows[-1]['stage']} epoch {rows[-1]['epoch']}" if rows else "from the start of training"
    read_back = (
        f"the saved releases ({', '.join(releases)}) are read back, no label is drawn again"
        if releases
        else "nothing had been released yet"
    )
    return f"resuming {out.root}: {read_back}; training continues {where}"


def check_plan(config: RunConfig, data: LabeledDataset, device: torch.device) -> None:
    """Refuse, before anything is written or released, a resolved ``config`` that cannot run on
    ``data``: a stage left without examples, a model that does not fit the inputs, more clusters than
    examples, amp off a GPU, and whatever the method refuses (a PATE or DP-SGD plan the budget cannot
    pay for).

    Parameters
    ----------
    config : RunConfig
        The resolved configuration.
    data : LabeledDataset
        The dataset (only its public shape and sizes are read).
    device : torch.device
        The device the run would train on.

    Raises
    ------
    labeldp.errors.ConfigError
        For a stage without examples, a model that does not fit the inputs, more clusters than training
        examples, amp off a GPU, a label domain that does not match (:func:`check_label_domain`), or what
        the method's ``plan`` refuses.
    labeldp.errors.BudgetError
        If the method's plan spends more than the budget (PATE, DP-SGD with a given noise multiplier).
    """
    check_amp(config.train, device)
    _check_units(config, data)
    n = len(data.y_train)
    sizes = [part.size for part in split_stages(n, config.stages, config.seed, data.train_units)]
    if min(sizes) == 0:
        raise ConfigError(
            f"stages {list(config.stages)} leave stage {sizes.index(0) + 1} without any of the {n} training examples"
        )
    try:
        build_model(
            config.model_name(data.input_shape, data.categorical),
            data.input_shape,
            data.num_classes,
            categorical=data.categorical,
        )
    except ValueError as error:
        raise ConfigError(f"{error} (the dataset's inputs have shape {data.input_shape})") from None
    if config.prior == "cluster" and config.clusters > n:
        raise ConfigError(f"clusters ({config.clusters}) exceeds the {n} training examples")
    check_label_domain(config, data)
    if config.method_spec.plan is not None:
        config.method_spec.plan(config, data)


def _check_units(config: RunConfig, data: LabeledDataset) -> None:
    """A dataset's privacy units must be the configuration's, under a method that composes per unit."""
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


def check_label_domain(config: RunConfig, data: LabeledDataset) -> None:
    """A declared label range must be the dataset's grid, and the squared loss needs numeric labels.

    Parameters
    ----------
    config : RunConfig
        The resolved configuration (its ``label_values``, the grid it declares, and its ``loss``).
    data : LabeledDataset
        The dataset (its public label domain).

    Raises
    ------
    labeldp.errors.ConfigError
        If the declared grid is not the dataset's (or the dataset has classes), or the loss is ``mse`` on
        a dataset with classes.
    """
    declared = config.label_values
    tolerance = 0.0 if declared is None else 1e-12 * np.ptp(declared)
    if declared is not None and (
        not data.is_regression
        or data.label_values.shape != declared.shape
        or not np.allclose(data.label_values, declared, rtol=0, atol=tolerance)
    ):
        have = (
            f"the grid of {data.num_classes} points over [{data.label_values[0]:g}, {data.label_values[-1]:g}]"
            if data.is_regression
            else f"{data.num_classes} classes"
        )
        raise ConfigError(
            f"the run declares a grid of {declared.size} points over [{declared[0]:g}, {declared[-1]:g}]"
            f", the dataset has {have}"
        )
    if config.loss == "mse" and not data.is_regression:
        raise ConfigError("loss 'mse' fits released values: it needs numeric labels (a regression dataset)")


def _accept_changed_config(
    saved: dict[str, Any], config: RunConfig, data: LabeledDataset, out: RunDirectory, progress: bool
) -> None:
    """Let an unfinished run continue under a changed configuration when every release it saved
    stays what the new configuration would have released (e.g. only training options changed after
    stage 1's labels); its training then restarts from those releases. Otherwise refuse. The networks
    compared are the ones trained (a network the rule chose, named)."""
    # Filling in defaults lets a run written before an option existed resume under the default.
    existing, new = compared_configs(saved, out.read_data_facts(), config, data.input_shape, data.public_test)
    if existing == new:
        return
    differs = ", ".join(sorted(k for k in set(existing) | set(new) if existing.get(k) != new.get(k)))
    if out.read_summary() is not None:
        raise RunDirectoryError(
            f"{out.root} holds a finished run with a different configuration (differs in: "
            f"{differs}); choose another output folder"
        )
    saved = out.release_inputs()
    stale = [name for name, inputs in saved.items() if inputs != release_inputs(config, name)]
    if out.ledger_path.exists():  # a recorded release without its file cannot be checked: it stays as it was
        stale += [entry.tag for entry in out.read_ledger().entries if entry.tag not in saved]
    if stale:
        raise RunDirectoryError(
            f"{out.root} holds a run with a different configuration (differs in: {differs}) "
            f"whose releases {', '.join(stale)} depend on what changed; choose another output "
            "folder (a new release), or run the saved configuration to finish this one"
        )
    out.discard_training()
    if progress:
        tqdm.write(f"configuration changed ({differs}); the saved releases still hold: training restarts from them")
