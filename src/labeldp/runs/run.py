"""Running a configuration: check it all, then resume or start the run in its folder and hand it to its method
(:mod:`labeldp.methods`)."""

from __future__ import annotations

import contextlib
import warnings
from pathlib import Path
from typing import Any

import joblib
import torch
from tqdm.auto import tqdm

from labeldp import distributed
from labeldp.accounting.policy import BudgetPolicy
from labeldp.accounting.spending import Spending
from labeldp.config.method_registry import get_method, method_names
from labeldp.config.run_config import RunConfig, release_holds
from labeldp.data import LabeledDataset
from labeldp.errors import SECOND_RELEASE, InsecureNoiseWarning, MissingFileError, RunDirectoryError
from labeldp.files import write_atomic
from labeldp.models import build_model
from labeldp.recipes.applied import AppliedRecipe
from labeldp.runs.context import RunContext
from labeldp.runs.plan import RunPlan, compared_configs, plan_run, saved_network
from labeldp.runs.reservation import reserve_run, withdraw_unspent
from labeldp.runs.rundir import RunDirectory
from labeldp.training.checkpoint import load_torch


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
    plan = plan_run(config, device, dataset)
    progress = progress and distributed.is_main()
    reserved: list[Spending | None] = [None]  # rank 0's alone: the other ranks record nothing

    def reserve() -> None:
        reserved[0] = reserve_run(policy, plan.config, plan.data, out_dir, progress)

    distributed.on_main(reserve)
    spending = reserved[0]
    noise, method = plan.config.noise, plan.config.method_spec
    if not noise.private and method.private and distributed.is_main():
        warnings.warn(f"the run's noise is {noise.describe()}", InsecureNoiseWarning, stacklevel=2)
    out = RunDirectory(out_dir, read_only=not distributed.is_main())
    try:
        with contextlib.ExitStack() as held:
            finished = distributed.on_main(lambda: _open_run(plan, out, held, progress, announce_resume, recipe))
            if finished is not None:
                return finished
            context = RunContext(plan.config, out, plan.data, plan.device, progress, spending=spending, recipe=recipe)
            model, facts = method.run(context)
            return context.finish(model, facts)
    except BaseException:
        distributed.on_main(lambda: withdraw_unspent(spending, out_dir))
        raise


def _open_run(
    plan: RunPlan,
    out: RunDirectory,
    held: contextlib.ExitStack,
    progress: bool,
    announce_resume: bool = True,
    recipe: AppliedRecipe | None = None,
) -> dict[str, Any] | None:
    """Lock the folder for as long as ``held`` lasts; return the summary of a finished run, else prepare the
    folder for the run to start or resume and return None."""
    config = plan.config
    held.enter_context(out.lock())
    saved = out.read_config()
    if saved is not None:
        accept_changed_config(saved, plan, out, progress and announce_resume)
    finished = out.read_summary()
    if finished is not None:
        return finished
    out.create()
    for line in plan.lines(recipe) if progress else ():
        tqdm.write(line)
    plan.write(out)
    if plan.data.preprocessor is not None:
        write_atomic(out.preprocessor_path, lambda tmp: joblib.dump(plan.data.preprocessor, tmp))
    assert config.stages is not None, "a resolved configuration has its stages"
    out.keep_metrics_of_checkpoints(len(config.stages), strict=config.method_spec.training_releases)
    if saved is not None and progress and announce_resume:
        tqdm.write(_resume_message(out))
    return None


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


def accept_changed_config(saved: dict[str, Any], plan: RunPlan, out: RunDirectory, progress: bool) -> None:
    """Let an unfinished run continue under a changed configuration when every release it saved is what the
    new one would release (its training then restarts from them); otherwise refuse."""
    # Filling in defaults lets a run written before an option existed resume under the default.
    existing, new = compared_configs(
        saved, out.read_data_facts(), plan.config, plan.data.input_shape, plan.data.public_test
    )
    if existing == new:
        return
    differs = ", ".join(sorted(k for k in set(existing) | set(new) if existing.get(k) != new.get(k)))
    if out.read_summary() is not None:
        raise RunDirectoryError(
            f"{out.root} holds a finished run with a different configuration (differs in: "
            f"{differs}); choose another output folder"
        )
    saved = out.release_inputs()
    stale = [
        name for name, inputs in saved.items() if not release_holds(inputs, plan.config, name, plan.data.num_classes)
    ]
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
