"""``labeldp`` command line: thin argument parsing over the library's layers."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import fields

import torch
from pathlib import Path

from labeldp import __version__, distributed, runtime
from labeldp.accounting import PrivacyLedger
from labeldp.accounting.rounding import format_lower_bound
from labeldp.audit import audit_run, membership_audit
from labeldp.audit.label_inference import audit_folder, audited_config
from labeldp.audit.membership import check_membership_options
from labeldp.audit.spend import folder_epsilon
from labeldp.data import FOLDER_DATASETS, download_dataset
from labeldp.experiments import format_epsilon, get_profile, list_profiles, load_recipes
from labeldp.experiments.report import METRICS, aggregate, format_report, report
from labeldp.experiments.sweep import SweepJob, grid_jobs, run_sweep
from labeldp.errors import ConfigError, LabelDPError, RunDirectoryError
from labeldp.evaluation import describe_test_metrics
from labeldp.dpsgd.trainer import DPSGDConfig
from labeldp.pate import PATEConfig
from labeldp.runs import RunConfig, config_dataset, train_run
from labeldp.runs.predict import predict_table
from labeldp.runs.recipes import recipe_for, with_recipe
from labeldp.training import TrainConfig
from labeldp.options import add_dataclass_arguments, dataclass_from_args
from labeldp.boundary import DEFAULT_BATCH_ROWS, privatize_table
from labeldp.randomness import NoiseSource

#: The demo: the embedded digits profiles (recipe in labeldp.experiments.recipes).
DEMO_PROFILES = r"^digits/(non-private|e(1|2|4|8)/lp-(1|2)st)/run0$"


#: titles of the argument groups generated from RunConfig's nested settings
_OPTION_GROUPS = {"train": ("training (per stage)", None),
                  "dpsgd": ("dp-sgd", "options of --method dp-sgd (--batch-size is the expected Poisson batch size)"),
                  "pate": ("pate", "options of --method pate (the training options are the student's)")}


def _build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="labeldp",
        description="Train models whose labels are private (label differential privacy); inputs are public.")
    parser.add_argument("--version", action="version", version=f"labeldp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train", help="train one model and write a run directory",
        description="Train one model with label DP. The run directory receives config.json, ledger.json, "
                    "the noisy labels of each stage, metrics.jsonl and summary.json. Running the same "
                    "command again resumes an interrupted run without drawing new noisy labels.")
    train.add_argument("--profile", metavar="KEY",
                       help="run a named recipe (see `labeldp profiles`); only --data-dir, --device, --threads and --quiet "
                            "apply on top of it, other options are refused")
    train.add_argument("--recipes", metavar="FILE", help="Python file that registers extra profiles")
    add_dataclass_arguments(train, RunConfig, _OPTION_GROUPS)
    train.add_argument("--device", default="auto", help="torch device: auto (GPU if present), cpu, cuda, cuda:1 "
                                                        "(default %(default)s)")
    train.add_argument("--threads", type=int, help="CPU threads of torch (default: 1 for tables, whose small models "
                                                   "run faster on one, else every core; at most OMP_NUM_THREADS "
                                                   "where it is set)")
    train.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    train.add_argument("--out", required=True, help="run directory (created, or resumed if it exists)")

    demo = commands.add_parser("demo", help="privacy/accuracy table on the embedded digits dataset",
                               description="Train non-private, LP-1ST and LP-2ST on the embedded digits at "
                                           "epsilon 1, 2, 4, 8 and print test accuracy by method and epsilon.")
    demo.add_argument("--out", default="runs/demo", help="folder for the demo's run directories (default %(default)s)")

    profiles = commands.add_parser("profiles", help="list named recipes",
                                   description="List the registered recipes whose key starts with PREFIX.")
    profiles.add_argument("pattern", nargs="?", metavar="PREFIX",
                          help="a key, its start (mnist/ or mnist/e2), or a regular expression matched from the "
                               "start of the keys (mnist/e(1|2)/lp-2st)")
    profiles.add_argument("--recipes", metavar="FILE", help="Python file that registers extra profiles")

    sweep = commands.add_parser(
        "sweep", help="run many runs in parallel, resumably",
        description="Run every matching profile, or every combination of a grid, into OUT/<key>/. Finished "
                    "runs are skipped, unfinished ones resume, a failed run is recorded and the others go on. "
                    "Writes OUT/results.csv, prints the report and writes OUT/privacy_utility.png.")
    chosen = sweep.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--profiles", metavar="PREFIX",
                        help="run the profiles whose key starts with PREFIX (a regular expression matched from the "
                             "start of the keys)")
    chosen.add_argument("--grid", nargs="+", metavar="NAME=V1,V2",
                        help="e.g. method=lp-1st,lp-2st epsilon=1,2,4 seed=0,1 (fields of the run or training config)")
    sweep.add_argument("--base", metavar="KEY", help="profile whose recipe the --grid starts from")
    sweep.add_argument("--recipes", metavar="FILE", help="Python file that registers extra profiles")
    sweep.add_argument("--workers", type=int, default=1, help="parallel worker processes (default %(default)s)")
    sweep.add_argument("--data-dir", help="data folder for every run whose dataset reads one (MNIST family, CIFAR)")
    sweep.add_argument("--device", default="auto", help="torch device for every run (default %(default)s)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.add_argument("--out", required=True, help="sweep folder")

    tune = commands.add_parser(
        "tune", help="choose training options on one release of the labels",
        description="Release the labels once (one ledger entry per release, as one run), train a candidate for "
                    "every combination of --grid on the released labels of most training examples, score each on "
                    "the held-out rest's released labels by an estimate of its clean accuracy from their noise "
                    "channel (never the true labels, never the test set), then train the best on every released "
                    "label. OUT is the final run's folder (its ledger: one run's releases) with tune.json, "
                    "tune.csv and candidates/. lp-1st and alibi: every training option. lp-2st and lp-mst: their "
                    "training options are chosen on the first stage's release (each candidate's first-stage model "
                    "is scored), and the later releases are drawn once, by the final run; what acts only after "
                    "lp-2st's second release (reuse-labels, warm-start) in a tune of its own. dp-sgd: private "
                    "selection. Anything else that a release depends on is refused before anything is spent.")
    tune.add_argument("--recipes", metavar="FILE", help="Python file that registers extra profiles")
    add_dataclass_arguments(tune, RunConfig, _OPTION_GROUPS)
    searched = tune.add_mutually_exclusive_group(required=True)
    searched.add_argument("--grid", nargs="+", metavar="NAME=V1,V2",
                          help="the candidates, as labeldp sweep --grid takes them: e.g. lr=0.01,0.03 epochs=10,20 "
                               "(fields of the run or training config); every combination is one candidate")
    searched.add_argument("--grid-file", metavar="FILE",
                          help="JSON or YAML mapping of each option to its values, e.g. {lr: [0.01, 0.03]}")
    tune.add_argument("--trials", type=int, metavar="N",
                      help="random search: N of the grid's combinations, drawn from --seed (default: all of them)")
    tune.add_argument("--holdout", type=float, default=0.2,
                      help="fraction of the training examples (of the first stage's, where the options are chosen "
                           "on it) whose released labels score the candidates (chosen from --seed; dp-sgd: each "
                           "example is held out with this probability, by a coin of its own; default %(default)s)")
    selection = tune.add_argument_group("dp-sgd: private selection", "a secret random number of DP-SGD trials, each "
                                        "with a candidate drawn at random and scored by a noisy held-out count; "
                                        "only the best leaves (RepeatAndSelectDpEvent)")
    selection.add_argument("--selection-mean", type=float, help="mean number of trials (default 3)")
    selection.add_argument("--selection-shape", type=float,
                           help="distribution of the number of trials: 1 geometric (default), inf Poisson, else "
                                "truncated negative binomial")
    selection.add_argument("--score-noise", type=float,
                           help="standard deviation of the noise on each trial's held-out count of correct "
                                "predictions (default 10)")
    tune.add_argument("--device", default="auto", help="torch device (default %(default)s)")
    tune.add_argument("--threads", type=int, help="CPU threads of torch (default as labeldp train)")
    tune.add_argument("--quiet", action="store_true", help="no progress bars")
    tune.add_argument("--out", required=True, help="tune folder (the final run's folder; resumed if it exists; "
                                                    "dp-sgd: a new folder, written whole once the trials are over)")

    report_parser = commands.add_parser("report", help="table and privacy-utility plot of a sweep",
                                        description="Print mean ± std of a test metric by method and epsilon from "
                                                    "DIR/results.csv and write DIR/privacy_utility.png.")
    report_parser.add_argument("dir", metavar="DIR")
    report_parser.add_argument("--metric", choices=tuple(METRICS),
                               help="what the table and the plot show (auc: two classes; default: accuracy, or rmse "
                                    "for numeric labels)")

    audit = commands.add_parser(
        "audit", help="empirical epsilon lower bound for a run's recipe",
        description="Retrain RUNDIR's recipe with canaries (random-noise inputs with random labels, or training "
                    "examples given random wrong labels) in RUNDIR/audit, guess each canary's label from the model "
                    "calibrated by RUNDIR's own model, and turn the guesses into an epsilon lower bound with a "
                    "Clopper-Pearson interval. The run itself and its ledger are not touched.")
    audit.add_argument("run_dir", metavar="RUNDIR")
    audit.add_argument("--canaries", type=int, help="number of canaries (default: 1000, or half the training set "
                                                    "when it is smaller)")
    audit.add_argument("--canary-kind", choices=("mislabeled", "noise"), default="mislabeled",
                       help="mislabeled: training examples given a random wrong label; noise: extra random-noise "
                            "inputs with random labels (default %(default)s)")
    audit.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default %(default)s)")
    audit.add_argument("--seed", type=int, default=0, help="seed for choosing canaries (default %(default)s)")
    audit.add_argument("--device", default="auto")
    audit.add_argument("--membership", action="store_true",
                       help="also run membership inference (loss threshold and offline LiRA with shadow models), "
                            "the audit for recipes that protect whole examples")
    audit.add_argument("--targets", type=int, help="with --membership: targets, half of them members (default: 1000, "
                                                   "or fewer on a small dataset: half the training set less one)")
    audit.add_argument("--shadows", type=int, default=4, help="with --membership: shadow models for LiRA (default %(default)s)")

    predict = commands.add_parser(
        "predict", help="score new rows with a finished run's model",
        description="Score the rows of a table with the model of RUNDIR and its fitted preprocessing; write the "
                    "probability of each class and the predicted class per row (CSV or Parquet, by --out's suffix). "
                    "Predictions are post-processing: they cost no privacy.")
    predict.add_argument("run_dir", metavar="RUNDIR")
    predict.add_argument("--table", required=True, help="CSV or Parquet file with the run's feature columns")
    predict.add_argument("--out", required=True, help="scores file, .csv or .parquet")
    predict.add_argument("--id-column", help="a column of --table to write beside the scores")
    privatize = commands.add_parser(
        "privatize", help="release a label column once, for any learner to train on",
        description="Release the label column of a Parquet or CSV table (a file or a folder of files), streamed in "
                    "blocks, by randomized response or, with a prior, RR-with-prior: epsilon-label-DP per row, "
                    "once. OUT (a new folder) receives labels.parquet (the id column, released_label, k), "
                    "release.json (classes, mechanism, epsilon, noise channel, noise source, the ledger's "
                    "epsilon) and ledger.json. Training on the release, any number of times, costs no more "
                    "privacy. An existing OUT is never overwritten.")
    privatize.add_argument("--table", required=True, metavar="PATH",
                           help="Parquet or CSV file, or a folder of them (read in sorted order)")
    privatize.add_argument("--label-column", required=True, metavar="COL", help="the private labels")
    privatize.add_argument("--id-column", required=True, metavar="COL",
                           help="a public row identifier, one distinct value per row, written next to each "
                                "released label (a duplicated id is an error before anything is released)")
    privatize.add_argument("--classes", required=True, nargs="+", metavar="VALUE",
                           help="the label values, in order (the label domain is public and must be declared; a "
                                "label outside it is an error before anything is released)")
    privatize.add_argument("--epsilon", required=True, type=float, help="privacy budget of each label (> 0)")
    prior = privatize.add_mutually_exclusive_group()
    prior.add_argument("--prior-columns", nargs="+", metavar="COL",
                       help="RR-with-prior: one prior column per class, in the classes' order; each row's prior "
                            "must not depend on its own label")
    prior.add_argument("--prior", nargs="+", type=float, metavar="P",
                       help="RR-with-prior with one prior shared by every row: a probability per class")
    privatize.add_argument("--write-channel", action="store_true",
                           help="also write each row's noise channel, channel_j = Pr[released label | class j]")
    privatize.add_argument("--batch-rows", type=int, default=DEFAULT_BATCH_ROWS,
                           help="rows drawn and written at a time; they bound the memory (default %(default)s)")
    noise = privatize.add_mutually_exclusive_group()
    noise.add_argument("--secure-rng", action="store_true",
                       help="draw the noise from ChaCha20 keyed from the OS (a cryptographically secure generator)")
    noise.add_argument("--insecure-noise-seed", type=int, metavar="SEED",
                       help="reproducible noise for tests: NOT PRIVATE (the seed is written in release.json)")
    privatize.add_argument("--out", required=True, help="the release folder to create")

    download = commands.add_parser("download", help="fetch a dataset's standard files (needs internet)",
                                   description="Fetch a dataset's standard files into --data-dir. MovieLens 100K "
                                               "comes from GroupLens under its research-only licence (read its "
                                               "README; do not redistribute it).")
    download.add_argument("dataset", choices=FOLDER_DATASETS)
    download.add_argument("--data-dir", required=True)
    return parser


def _print_summary(summary: dict) -> None:
    metric = describe_test_metrics(summary)
    print(f"{summary['method']} on {summary['dataset']}: {metric}  "
          f"epsilon {format_epsilon(summary['epsilon'])} (delta {summary['delta']:g}, {summary['neighboring_relation']})  "
          f"{summary['seconds']:.1f}s")
    if not summary.get("noise_private", True):
        print(f"NOT PRIVATE: the noise is {summary['noise']}")


#: the train options that apply on top of --profile (besides --profile itself and --recipes)
_PROFILE_OPTIONS = {"command", "profile", "recipes", "data_dir", "device", "quiet", "out", "threads"}


def _changed_options(args: argparse.Namespace, required: list[str], names: set[str]) -> list[str]:
    """The options among ``names`` (destinations) that ``args`` sets to other than their defaults, as
    flags; ``required`` is the command line that gives every default (the command and its required
    arguments)."""
    parser = _build_parser()
    defaults = vars(parser.parse_args(required))
    command = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[required[0]]
    flags = {action.dest: action.option_strings[0] for action in command._actions if action.option_strings}
    return sorted(flags[name] for name in names if getattr(args, name) != defaults[name])


#: the options that a recipe sets (``model`` and the fields of the training, DP-SGD and PATE settings)
_RECIPE_OPTIONS = {"model"} | {f.name for cls in (TrainConfig, DPSGDConfig, PATEConfig) for f in fields(cls)}


def _with_best_recipe(config: RunConfig, args: argparse.Namespace) -> RunConfig:
    """The best known recipe of the dataset and method (:mod:`labeldp.runs.recipes`) under the training
    options the user gave; the library's defaults where there is none. Says which it used."""
    recipe = recipe_for(config.dataset, config.method)
    given = _changed_options(args, ["train", "--out", args.out], _RECIPE_OPTIONS)
    if recipe is None:
        if not args.quiet:
            print(f"no tuned recipe for {config.method} on {config.dataset}: the library's defaults"
                  f"{' with ' + ', '.join(given) if given else ''}")
        return config
    if not args.quiet:
        print(f"recipe for {config.method} on {config.dataset}: {recipe.describe()}"
              f"{' (' + recipe.source + ')' if recipe.source else ''}{'; with your ' + ', '.join(given) if given else ''}")
    flags = {action.option_strings[0]: action.dest for action in _train_parser()._actions if action.option_strings}
    return with_recipe(config, recipe, keep={flags[flag] for flag in given})


def _train_parser() -> argparse.ArgumentParser:
    parser = _build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["train"]


def _train(args: argparse.Namespace) -> None:
    if distributed.env_rank() != 0:  # under torchrun rank 0 speaks for the run
        args.quiet = True
    if args.recipes:
        load_recipes(args.recipes)
    if args.profile:
        ignored = _changed_options(args, ["train", "--out", args.out], set(vars(args)) - _PROFILE_OPTIONS)
        if ignored:
            raise ConfigError(f"--profile runs its recipe as registered; {', '.join(ignored)} would not apply to it "
                              "(only --data-dir, --device, --threads and --quiet do). For other settings use "
                              "`labeldp sweep --base PROFILE --grid NAME=VALUE` or register a recipe (--recipes)")
        config = get_profile(args.profile).config.with_overrides(data_dir=args.data_dir)
    else:
        config = _with_best_recipe(dataclass_from_args(RunConfig, args), args)
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {args.threads}")
    torch.set_num_threads(args.threads or runtime.default_threads(config.dataset))
    summary = train_run(config, args.out, device=args.device, progress=not args.quiet)
    # after an error a rank leaves without waiting for the others: torchrun then stops them all
    distributed.stop()
    if distributed.env_rank() == 0:
        _print_summary(summary)
        print(f"run directory: {args.out}")


def _demo(args: argparse.Namespace) -> None:
    rows = []
    for profile in list_profiles(DEMO_PROFILES):
        summary = train_run(profile.config, Path(args.out) / profile.key.replace("/", "__"), progress=False)
        rows.append({"status": "done", "dataset": "digits", "method": summary["method"],
                     "target_epsilon": profile.config.epsilon or "", "test_accuracy": summary["test_accuracy"]})
        print(f"  {profile.key:<24} test accuracy {100 * summary['test_accuracy']:5.1f}%  "
              f"ledger epsilon {format_epsilon(summary['epsilon'])}  {summary['seconds']:.1f}s", flush=True)
    print("\nEmbedded digits (1,347 train / 450 test); each run's label-DP epsilon comes from its ledger.\n")
    print(format_report(aggregate(rows), spread=False))


def _sweep(args: argparse.Namespace) -> None:
    if args.recipes:
        load_recipes(args.recipes)
    if args.profiles:
        if args.base:
            raise ConfigError("--base is the recipe a --grid starts from; --profiles runs its profiles as registered")
        jobs = [SweepJob(p.key, p.config) for p in list_profiles(args.profiles)]
        if not jobs:
            raise ConfigError(f"no profile matches {args.profiles!r}; see `labeldp profiles`")
    else:
        jobs = grid_jobs(_parse_grid(args.grid), get_profile(args.base).config if args.base else None)
    rows = run_sweep(jobs, args.out, workers=args.workers, device=args.device, data_dir=args.data_dir,
                     progress=not args.quiet)
    done = sum(r["status"] == "done" for r in rows)
    print(f"{done}/{len(rows)} runs finished; results in {Path(args.out) / 'results.csv'}\n")
    _report(argparse.Namespace(dir=args.out, metric=None))


def _parse_grid(items: list[str]) -> dict[str, list[str]]:
    """``NAME=V1,V2`` items as {name: [values]} (names with - or _)."""
    grid = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not values:
            raise ConfigError(f"grid item {item!r} must look like name=value1,value2")
        grid[name.replace("-", "_")] = values.split(",")
    return grid


def _read_grid_file(path: str) -> dict:
    """A JSON or YAML file holding a mapping of option names to their values."""
    import yaml  # YAML is a superset of JSON

    try:
        grid = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise ConfigError(f"cannot read the grid file {path}: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"the grid file {path} is neither JSON nor YAML: {error}") from None
    if not isinstance(grid, dict) or not all(isinstance(name, str) for name in grid):
        raise ConfigError(f"the grid file {path} must hold a mapping of option names to lists of values")
    return {name.replace("-", "_"): values for name, values in grid.items()}


def _tune(args: argparse.Namespace) -> None:
    from labeldp.experiments.tune import format_tune, tune

    if args.recipes:
        load_recipes(args.recipes)
    grid = _parse_grid(args.grid) if args.grid else _read_grid_file(args.grid_file)
    config = _with_best_recipe(dataclass_from_args(RunConfig, args), args)
    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {args.threads}")
    torch.set_num_threads(args.threads or runtime.default_threads(config.dataset))
    selection = {name: value for name, value in (("mean", args.selection_mean), ("shape", args.selection_shape),
                                                 ("score_noise", args.score_noise)) if value is not None}
    outcome = tune(config, grid, args.out, holdout=args.holdout, trials=args.trials, device=args.device,
                   progress=not args.quiet, selection=selection)
    print(format_tune(outcome))
    tables = "tune.json" if outcome.get("search") == "private selection" else "tune.json, tune.csv"
    print(f"tune folder: {args.out} ({tables}; the final run's summary.json and ledger.json)")


def _report(args: argparse.Namespace) -> None:
    text, plot = report(args.dir, args.metric)
    print(text)
    print(f"plot: {plot}")


def _audit(args: argparse.Namespace) -> None:
    run_dir = Path(args.run_dir)
    if not args.membership and (changed := _changed_options(args, ["audit", args.run_dir], {"targets", "shadows"})):
        raise ConfigError(f"{', '.join(changed)} apply only with --membership")
    config = audited_config(run_dir)
    if args.membership:  # refuse what cannot run before the label audit spends its minutes
        check_membership_options(len(config_dataset(config.resolved()).y_train), args.targets, args.shadows)
    result = audit_run(run_dir, num_canaries=args.canaries, confidence=args.confidence, seed=args.seed,
                       device=args.device, canaries=args.canary_kind)
    claimed = format_epsilon(result["claimed_epsilon"])
    if result["claimed_label_epsilon"] != result["claimed_epsilon"]:
        claimed += f" per example, {format_epsilon(result['claimed_label_epsilon'])} per replaced label"
    print(f"{result['method']} on {result['dataset']}: claimed epsilon {claimed}, "
          f"empirical epsilon lower bound {format_lower_bound(result['epsilon_lower_bound'])} "
          f"({100 * result['confidence']:g}% confidence, {result['num_canaries']} canaries)")
    for t in result["thresholds"]:
        print(f"  answering top {100 * t['answer_fraction']:g}%: {t['correct']}/{t['answered']} correct "
              f"-> epsilon >= {format_lower_bound(t['epsilon_lower_bound'])}")
    print(f"written: {Path(result['folder']) / 'audit.json'}")
    if args.membership:
        audited = PrivacyLedger.load(run_dir / "ledger.json")
        folder = audit_folder(run_dir, "membership", targets=args.targets, shadows=args.shadows, seed=args.seed)
        mia = membership_audit(config, folder, num_targets=args.targets, num_shadows=args.shadows,
                               confidence=args.confidence, seed=args.seed, device=args.device, audited_ledger=audited)
        for name in ("loss_threshold", "lira_offline"):
            m = mia[name]
            print(f"membership ({name}): AUC {m['auc']:.3f}, TPR at 1% FPR {m['tpr_at_fpr']['0.01']:.3f}, "
                  f"epsilon lower bound {format_lower_bound(m['epsilon_lower_bound'])}")
        print(f"written: {folder / 'membership.json'}")
    delta = result["spent"]["delta"]
    print(f"The audit trained on the run's labels again, with noise of its own (each audit's ledger: "
          f"audit_ledger.json in its folder). Everything in {run_dir} together is epsilon "
          f"{format_epsilon(_finite(folder_epsilon(run_dir, delta)))}; the run alone is epsilon "
          f"{format_epsilon(result['claimed_epsilon'])}. Delete {run_dir / 'audit'} before you share the run folder.")


def _privatize(args: argparse.Namespace) -> None:
    noise = NoiseSource(secure=args.secure_rng, insecure_seed=args.insecure_noise_seed)
    sidecar = privatize_table(args.table, args.out, label_column=args.label_column, id_column=args.id_column,
                              classes=args.classes, epsilon=args.epsilon, prior_columns=args.prior_columns,
                              prior=args.prior, write_channel=args.write_channel, batch_rows=args.batch_rows,
                              noise=noise)
    rows, seconds = sidecar["rows"], sidecar["seconds"]
    mechanism = {"randomized-response": "randomized response", "rr-with-prior": "RR-with-prior"}[sidecar["mechanism"]]
    print(f"released {rows:,} labels of {args.label_column!r} by {mechanism} (K={len(sidecar['classes'])}, epsilon "
          f"{sidecar['epsilon']:g}; the ledger's epsilon {format_epsilon(sidecar['ledger']['epsilon'])}) in "
          f"{seconds:.1f} s ({rows / seconds:,.0f} labels/s)")
    columns = [c for c in (sidecar["columns"]["id"], sidecar["columns"]["released_label"], sidecar["columns"]["k"]) if c]
    print(f"written: {Path(args.out) / 'labels.parquet'} ({', '.join(columns + sidecar['columns']['channel'])}), "
          f"{Path(args.out) / 'release.json'}, {Path(args.out) / 'ledger.json'}")
    if not sidecar["noise"]["private"]:
        print(f"NOT PRIVATE: the noise is {sidecar['noise']['description']}")


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else value


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    runtime.reuse_freed_memory()
    try:
        if distributed.requested() and args.command != "train":
            raise ConfigError(f"`labeldp {args.command}` runs in one process; under torchrun only `labeldp train` "
                              "runs (data-parallel)")
        if args.command == "train":
            _train(args)
        elif args.command == "demo":
            _demo(args)
        elif args.command == "profiles":
            if args.recipes:
                load_recipes(args.recipes)
            for profile in list_profiles(args.pattern):
                c = profile.config
                budget = "no privacy" if c.epsilon is None else f"epsilon {c.epsilon:g}"
                print(f"{profile.key:<34} v{profile.version}  {c.method:<11} {budget:<12} {c.dataset:<13} "
                      f"{c.train.epochs} epochs/stage  seed {c.seed}")
        elif args.command == "sweep":
            _sweep(args)
        elif args.command == "tune":
            _tune(args)
        elif args.command == "report":
            _report(args)
        elif args.command == "audit":
            _audit(args)
        elif args.command == "predict":
            print(f"scores written: {predict_table(args.run_dir, args.table, args.out, args.id_column)}")
        elif args.command == "privatize":
            _privatize(args)
        elif args.command == "download":
            download_dataset(args.dataset, args.data_dir)
            print(f"{args.dataset} saved in {args.data_dir}")
    except LabelDPError as error:
        print(f"labeldp: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        again = (" Run the same command again to continue where it stopped."
                 if args.command in ("train", "sweep", "tune") else "")
        print(f"\nlabeldp: interrupted.{again}", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
