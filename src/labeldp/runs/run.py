"""Running a configuration: check it all, then resume or start the run in its folder and hand it to its method
(:mod:`labeldp.methods`)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings
from pathlib import Path
from typing import Any

import joblib
import numpy as np
import torch
from tqdm.auto import tqdm

from labeldp import distributed
from labeldp.accounting.policy import BudgetPolicy
from labeldp.accounting.spending import Spending
from labeldp.config.method_registry import get_method, method_names
from labeldp.config.run_config import RunConfig
from labeldp.data import LabeledDataset, load_dataset
from labeldp.data.dataset_spec import TableOptions
from labeldp.data.splits import split_stages
from labeldp.errors import SECOND_RELEASE, ConfigError, InsecureNoiseWarning, MissingFileError, RunDirectoryError
from labeldp.files import write_atomic, write_json_atomic
from labeldp.models import build_model
from labeldp.models.names import FITTED_MODELS, default_model_name
from labeldp.recipes.applied import AS_GIVEN, AppliedRecipe
from labeldp.runs.context import RunContext, release_holds, table_features
from labeldp.runs.reservation import reserve_run, withdraw_unspent
from labeldp.runs.rundir import RunDirectory
from labeldp.training.checkpoint import load_torch
from labeldp.training.stage import check_amp, resolve_device


def config_dataset(config: RunConfig) -> LabeledDataset:
    """The dataset ``config`` names, loaded from its files, its training labels private (the seed splits off
    test rows where the dataset has no test set of its own)."""
    table = TableOptions(**{option.name: getattr(config, option.name) for option in dataclasses.fields(TableOptions)})
    return load_dataset(
        config.dataset, config.data_dir, table, split_seed=config.seed, public_test=config.test_labels == "public"
    )


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


def load_run_model(run_dir: str | Path) -> torch.nn.Module:
    """The final model of a finished run, on the CPU, built from the run's own record (no dataset needed).

    It costs no privacy: the model is post-processing of the run's releases.

    Raises
    ------
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
    from_state = get_method(method).model_from_state if method in method_names() else None
    if from_state is not None:  # a fitted shape
        return from_state(state)
    model = build_model(
        saved_network(saved, facts),
        tuple(facts["input_shape"]),
        facts["num_classes"],
        categorical=tuple(facts.get("categorical", ())),
    )
    model.load_state_dict(state)
    return model


def run_network(config: RunConfig, input_shape: tuple[int, ...], categorical: tuple[int, ...] = ()) -> str | None:
    """The network a run of ``config`` trains on these inputs (:meth:`RunConfig.model_name`), or None for a
    method whose model is fitted rather than named (``marginals``)."""
    if config.method_spec.model_from_state is not None:
        return None
    return config.model_name(tuple(input_shape), tuple(categorical))


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


def recorded_test_labels(config: RunConfig, public_test: bool | None = None) -> str:
    """The test labels as a run of ``config`` measures them, as its ``config.json`` records them: ``"public"``
    for a public test set (the dataset's own, or held-out rows treated as public), ``"none"`` where nothing is
    measured (``test_labels`` none, or DP-SGD, which releases no label), else ``"released"``. A configuration
    naming a dataset or method this process does not know keeps its own.

    ``public_test``: whether the run's test labels are public; None: as the configuration's dataset loads
    them."""
    try:
        if public_test is None:
            public_test = not config.test_held_out or config.test_labels == "public"
        if public_test:
            return "public"
        return "none" if config.method_spec.training_releases else config.test_labels
    except ConfigError:  # another version's dataset or method: compared as written
        return config.test_labels


def recorded_config(config: RunConfig, data: LabeledDataset) -> dict[str, Any]:
    """What a run's ``config.json`` holds: ``config`` as resolved on ``data``, with the network trained
    (:func:`run_network`) and the test labels as measured (:func:`recorded_test_labels`), so that it reads as
    the summary does and a rerun compares it as the same run (:func:`compared_configs`)."""
    return {
        **config.on_data(data.num_classes)[0].to_dict(),
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
    """A saved run's configuration and a new one, each as ``config.json`` records it
    (:func:`recorded_config`), to compare.

    Naming the network trained makes a network the rule chose and the same network named the same run, and
    one rule's choice before and after the rule changed different runs; the test labels as measured make a
    folder saved before ``config.json`` recorded them (MNIST's ``"released"``) the same run as one that
    does (``"public"``). ``facts`` None (no ``data.json``): the saved run is taken to train the new one's
    network."""
    categorical = tuple(facts.get("categorical", ())) if facts is not None else ()
    network = run_network(config, input_shape, categorical)
    trained = saved_network(saved, facts) if facts is not None else network
    existing = RunConfig.from_dict({**saved, "model": trained})
    if facts is not None:  # the options as the runs take them on their data
        existing, config = (c.on_data(facts["num_classes"])[0] for c in (existing, config))
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
    policy: BudgetPolicy | None = None,
) -> dict[str, Any]:
    """Run (or resume) ``config`` in ``out_dir`` and return its summary (its learning rate chosen on its own
    release first: :func:`~labeldp.experiments.auto_tune.auto_tuned_run`, which calls this).

    A rerun continues from the last completed epoch, reads the saved releases back (never drawing one again)
    and leaves the ledger unchanged; a finished run returns its summary. A folder holding another
    configuration is refused, unless the run is unfinished and its saved releases do not depend on what
    changed: training then restarts from them. Everything that can be checked is checked before the folder is
    written.

    What is released: what the method releases through :meth:`RunContext.spend
    <labeldp.runs.context.RunContext.spend>`, then, where the test labels are private, their release ``test``
    (:meth:`RunContext.test_release <labeldp.runs.context.RunContext.test_release>`). Each is saved in
    ``noisy_labels/`` before it is used and recorded on ``ledger.json``, whose epsilon the summary reports.
    Noise that can be regenerated from the configuration warns with
    :class:`~labeldp.errors.InsecureNoiseWarning`.

    Under ``torchrun`` every process calls it with the same configuration and trains data-parallel; rank 0
    alone checks, locks, writes and releases; every rank returns the summary.

    Parameters
    ----------
    device : str, optional
        ``"auto"`` (the GPU when torch sees one, else the CPU) or a torch device; under torchrun each
        process takes its local GPU.
    dataset : LabeledDataset or None, optional
        The dataset in memory; None: loaded from the files ``config`` names (:func:`config_dataset`).
    announce_resume : bool, optional
        False where this call's own process started the folder (the auto-tune's release): it is not said to
        resume.
    recipe : AppliedRecipe or None, optional
        The recipe ``config``'s options came from, which the summary names with the source of its network
        (None: :data:`~labeldp.recipes.applied.AS_GIVEN`).
    policy : BudgetPolicy or None, optional
        The dataset ledgers' folder and cap (None: :meth:`BudgetPolicy.from_environment
        <labeldp.accounting.policy.BudgetPolicy.from_environment>`).

    Raises
    ------
    labeldp.errors.BudgetError
        If the budget cannot pay for the method's plan, or the run would take a group of people past the
        policy's cap (checked before any release), or PATE answered no query (after its release).
    labeldp.errors.RunDirectoryError
        If ``out_dir`` holds another configuration's run it cannot continue, a damaged file, or a recorded
        release whose file is missing.
    labeldp.errors.RunLockedError
        If another process is using ``out_dir``.
    """
    policy = policy or BudgetPolicy.from_environment()
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
    reserved: list[Spending | None] = [None]  # rank 0's alone: the other ranks record nothing

    def reserve() -> None:
        reserved[0] = reserve_run(policy, config, data, out_dir, progress)

    distributed.on_main(reserve)
    spending = reserved[0]
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
            context = RunContext(config, out, data, run_device, progress, spending=spending, recipe=recipe)
            model, facts = config.method_spec.run(context)
            return context.finish(model, facts)
    except BaseException:
        distributed.on_main(lambda: withdraw_unspent(spending, out_dir))
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
    """Lock the folder for as long as ``held`` lasts; return the summary of a finished run, else prepare the
    folder for the run to start or resume and return None."""
    held.enter_context(out.lock())
    saved = out.read_config()
    if saved is not None:
        accept_changed_config(saved, config, data, out, progress and announce_resume)
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
    assert config.stages is not None, "a resolved configuration has its stages"
    out.keep_metrics_of_checkpoints(len(config.stages), strict=config.method_spec.training_releases)
    features = table_features(data)
    if features and progress:
        tqdm.write(f"features ({len(features)}): {', '.join(features)}")
    network = run_network(config, data.input_shape, data.categorical)
    if network is not None and progress:
        tqdm.write(f"network: {network} ({(recipe or AS_GIVEN).network_source(config.model)})")
    if data.unit_bound is not None and progress:
        tqdm.write(unit_bound_message(data.unit_bound))
    chosen = config.on_data(data.num_classes)[1]
    if chosen is not None and progress:
        tqdm.write(chosen)
    if saved is not None and progress and announce_resume:
        tqdm.write(_resume_message(out))
    return None


def unit_bound_message(bound: dict[str, Any]) -> str:
    """What a table's privacy unit kept, in words (public: counts of rows per unit involve no label)."""
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


def check_fitted_network(config: RunConfig, network: str, regression: bool) -> None:
    """Refuse a fitted ``network`` (``gbdt``: :data:`~labeldp.models.names.FITTED_MODELS`) where the run would
    train it by gradient steps (DP-SGD) or fit it to numbers (a regression): it fits classes from released
    targets."""
    if network not in FITTED_MODELS:
        return
    if config.method_spec.training_releases or config.method_spec.per_example:
        raise ConfigError(
            f"model {network!r} is fitted from released labels, not trained by gradient steps: method "
            f"{config.method!r} cannot train it; choose a network (--model mlp)"
        )
    if regression:
        raise ConfigError(f"model {network!r} fits classes; for numeric labels choose a network (--model mlp)")
    unused = config.train.changed()
    if unused:
        raise ConfigError(
            f"model {network!r} is fitted with its own settings, with no training loop: it does not use the training "
            f"options {', '.join(unused)}; leave them at the default"
        )


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


def accept_changed_config(
    saved: dict[str, Any], config: RunConfig, data: LabeledDataset, out: RunDirectory, progress: bool
) -> None:
    """Let an unfinished run continue under a changed configuration when every release it saved is what the
    new one would release (its training then restarts from them); otherwise refuse."""
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
    stale = [name for name, inputs in saved.items() if not release_holds(inputs, config, name, data.num_classes)]
    if out.ledger_path.exists():  # a recorded release without its file cannot be checked: it stays as it was
        stale += [entry.tag for entry in out.read_ledger().entries if entry.tag not in saved]
    if stale:
        raise RunDirectoryError(
            f"{out.root} holds a run with a different configuration (differs in: {differs}) "
            f"whose releases {', '.join(stale)} depend on what changed; choose another output "
            f"folder {SECOND_RELEASE}, or run the saved configuration to finish this one"
        )
    out.discard_training()
    if progress:
        tqdm.write(f"configuration changed ({differs}); the saved releases still hold: training restarts from them")
