"""``labeldp`` command line: thin argument parsing over the library's layers."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from labeldp import __version__, runtime
from labeldp.accounting import PrivacyLedger
from labeldp.audit import audit_run, membership_audit
from labeldp.audit.membership import check_membership_options
from labeldp.audit.spend import folder_epsilon
from labeldp.data import DATASETS, FOLDER_DATASETS, download_dataset
from labeldp.experiments import format_epsilon, get_profile, list_profiles, load_recipes
from labeldp.experiments.report import aggregate, format_report, report
from labeldp.experiments.sweep import SweepJob, grid_jobs, run_sweep
from labeldp.models import MODELS
from labeldp.errors import ConfigError, LabelDPError, RunDirectoryError
from labeldp.training import METHODS, RunConfig, TrainConfig, config_dataset, train_run
from labeldp.training.stage import OPTIMIZERS, SCHEDULES
from labeldp.training.dpsgd.trainer import DPSGDConfig
from labeldp.training.pate import PATEConfig

#: The demo: the embedded digits profiles (recipe in labeldp.experiments.recipes).
DEMO_PROFILES = r"^digits/(non-private|e(1|2|4|8)/lp-(1|2)st)/run0$"


def _add_train_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = TrainConfig()
    group = parser.add_argument_group("training (per stage)")
    group.add_argument("--epochs", type=int, default=defaults.epochs, help="epochs of each stage (default %(default)s)")
    group.add_argument("--batch-size", type=int, default=defaults.batch_size, help="mini-batch size (default %(default)s)")
    group.add_argument("--lr", type=float, default=defaults.lr, help="peak learning rate (default %(default)s)")
    group.add_argument("--optimizer", choices=OPTIMIZERS, default=defaults.optimizer, help="SGD with Nesterov momentum, or AdamW")
    group.add_argument("--momentum", type=float, default=defaults.momentum, help="SGD momentum (default %(default)s)")
    group.add_argument("--weight-decay", type=float, default=defaults.weight_decay, help="weight decay (default %(default)s)")
    group.add_argument("--schedule", choices=SCHEDULES, default=defaults.schedule, help="learning-rate schedule (default %(default)s)")
    group.add_argument("--warmup-epochs", type=float, default=defaults.warmup_epochs, help="linear warm-up length (default %(default)s)")
    group.add_argument("--mixup", type=float, default=defaults.mixup_alpha, metavar="ALPHA",
                       help="mixup Beta(alpha, alpha); 0 disables it (default %(default)s)")
    group.add_argument("--no-augment", action="store_true", help="disable the dataset's data augmentation")


def _train_config(args: argparse.Namespace) -> TrainConfig:
    return TrainConfig(epochs=args.epochs, batch_size=args.batch_size, optimizer=args.optimizer, lr=args.lr,
                       momentum=args.momentum, weight_decay=args.weight_decay, schedule=args.schedule,
                       warmup_epochs=args.warmup_epochs, mixup_alpha=args.mixup, augment=not args.no_augment,
                       amp=args.amp)


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
                       help="run a named recipe (see `labeldp profiles`); only --data-dir, --device and --quiet "
                            "apply on top of it, other options are refused")
    train.add_argument("--recipes", metavar="FILE", help="Python file that registers extra profiles")
    train.add_argument("--dataset", choices=DATASETS, default="digits",
                       help="digits is embedded; the MNIST family and CIFAR read --data-dir; csv reads --table")
    train.add_argument("--data-dir", help="folder with the dataset's standard files")
    train.add_argument("--table", help="CSV or Parquet file (dataset csv)")
    train.add_argument("--label-column", default="label", help="label column of --table (default %(default)s)")
    train.add_argument("--test-table", help="separate test table (default: 20%% of --table's rows)")
    train.add_argument("--classes", nargs="+", metavar="VALUE",
                       help="dataset csv: the label values, in order (the label domain is public and must be "
                            "declared; a training label outside it is an error)")
    train.add_argument("--method", choices=METHODS, default="lp-2st",
                       help="non-private: true labels (reference); rr / lp-1st: randomized response on all labels; "
                            "lp-2st: two stages, the second uses RR-with-prior; lp-mst: any number of stages; "
                            "alibi: Laplace noise on the one-hot label; "
                            "pate: teachers on disjoint parts of the data vote, noisily, on a student's queries; "
                            "dp-sgd: the full-DP baseline (inputs and labels private)")
    train.add_argument("--epsilon", type=float, help="privacy budget epsilon (> 0); required for private methods")
    train.add_argument("--delta", type=float,
                       help="delta of --method pate or dp-sgd (default 1e-5); the other methods are pure epsilon-DP")
    train.add_argument("--stages", type=float, nargs="+", metavar="FRACTION",
                       help="fractions of the training set per stage, summing to 1 (default: 0.4 0.6 for lp-2st, 0.3 0.3 0.4 for lp-mst)")
    train.add_argument("--temperature", type=float, default=1.0, help="lp-2st, lp-mst: later stages' prior = softmax(logits / T) (default %(default)s)")
    train.add_argument("--prior", choices=("uniform", "cluster"), default="uniform",
                       help="stage-1 prior: uniform (plain RR) or cluster: k-means of PCA features of the public inputs "
                            "with a noisy label histogram per cluster (default %(default)s)")
    train.add_argument("--prior-epsilon", type=float,
                       help="part of --epsilon spent on the cluster histogram (default: a tenth); the label releases "
                            "use the rest, so every label's total is --epsilon")
    train.add_argument("--prior-temperature", type=float, default=1.0,
                       help="cluster prior ^ (1 / T), renormalised: above 1 flatter, so RR-with-prior keeps more "
                            "candidate labels (default %(default)s)")
    train.add_argument("--encoder", choices=("pca", "autoencoder", "raw"), default="pca",
                       help="public features clustered for --prior cluster: PCA-whitened inputs, the codes of an "
                            "autoencoder trained on the public inputs, or the raw inputs (default %(default)s)")
    train.add_argument("--combine-priors", action="store_true",
                       help="lp-2st, lp-mst with --prior cluster: later stages' prior is the model prior times the cluster prior")
    train.add_argument("--clusters", type=int, default=100, help="k-means clusters for --prior cluster (default %(default)s)")
    train.add_argument("--loss", choices=("forward", "ce"), default="forward",
                       help="forward: likelihood of each noisy label through its known noise channel (the model learns clean "
                            "posteriors); ce: plain cross-entropy on noisy labels; not for pate or dp-sgd (default %(default)s)")
    train.add_argument("--no-reuse-labels", action="store_true",
                       help="lp-2st, lp-mst: train each stage on its own noisy labels only (default: earlier stages' labels too; "
                            "with --loss ce only those inside the new prior's top k)")
    train.add_argument("--no-warm-start", action="store_true", help="lp-2st, lp-mst: train each stage's model from scratch")
    train.add_argument("--model", choices=MODELS, help="network (default: cnn for 28x28, resnet18 for 32x32, else mlp)")
    train.add_argument("--seed", type=int, default=0, help="seed for splits, mechanisms and training (default %(default)s)")
    train.add_argument("--secure-rng", action="store_true",
                       help="draw the noise (noisy labels, histograms, PATE's vote noise, DP-SGD's batches and "
                            "gradient noise) from ChaCha20 keyed by the OS, a cryptographically secure generator "
                            "(default: generators seeded with fresh OS entropy, never saved)")
    train.add_argument("--insecure-noise-seed", type=int, metavar="SEED",
                       help="NOT PRIVATE: derive all the noise from SEED, which config.json records, so the run "
                            "can be repeated exactly (for tests and debugging; anyone with the config can "
                            "regenerate the noise and undo it)")
    train.add_argument("--device", default="auto", help="torch device: auto (GPU if present), cpu, cuda, cuda:1 (default %(default)s)")
    train.add_argument("--amp", action="store_true",
                       help="bf16 automatic mixed precision on CUDA GPUs (label-DP methods; dp-sgd runs in float32)")
    train.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    train.add_argument("--out", required=True, help="run directory (created, or resumed if it exists)")
    dp = train.add_argument_group("dp-sgd", "options of --method dp-sgd (--batch-size is the expected Poisson batch size)")
    dp.add_argument("--max-grad-norm", type=float, default=1.0, help="per-example clipping bound C (default %(default)s)")
    dp.add_argument("--noise-multiplier", type=float,
                    help="sigma (noise std / C); default: the smallest that meets --epsilon and --delta "
                         "(a given one that spends more is refused)")
    dp.add_argument("--augmult", type=int, default=1,
                    help="augmentations per example averaged before clipping (default %(default)s)")
    dp.add_argument("--ema-decay", type=float, default=0.999,
                    help="decay of the parameter EMA used for evaluation; 0 turns it off (default %(default)s)")
    dp.add_argument("--physical-batch-size", type=int, default=512,
                    help="examples per forward/backward pass; bounds memory, same result (default %(default)s)")
    dp.add_argument("--clipping", choices=("auto", "fast", "vmap"), default="auto",
                    help="per-example gradient path (default %(default)s)")
    pate = train.add_argument_group("pate", "options of --method pate (the training options are the student's)")
    pate.add_argument("--teachers", type=int, default=250, help="teachers, each on its own part of the data (default %(default)s)")
    pate.add_argument("--queries", type=int,
                      help="public inputs the teachers vote on (default: as many as the budget pays for at "
                           "--vote-noise)")
    pate.add_argument("--vote-noise", type=float,
                      help="GNMax noise std in votes (default: teachers / 4, or the smallest that pays for --queries)")
    pate.add_argument("--aggregator", choices=("gnmax", "confident"), default="gnmax",
                      help="confident: answer only queries whose noisy top vote reaches --threshold (default %(default)s)")
    pate.add_argument("--threshold", type=float, default=0.6,
                      help="confident GNMax's threshold, a fraction of the teachers (default %(default)s)")
    pate.add_argument("--threshold-noise-ratio", type=float, default=2.0,
                      help="threshold check noise / vote noise (default %(default)s)")
    pate.add_argument("--teacher-epochs", type=int, default=20, help="epochs of each teacher (default %(default)s)")
    pate.add_argument("--teacher-batch-size", type=int, default=32, help="batch size of each teacher (default %(default)s)")
    _add_train_arguments(train)

    demo = commands.add_parser("demo", help="privacy/accuracy table on the embedded digits dataset",
                               description="Train non-private, LP-1ST and LP-2ST on the embedded digits at "
                                           "epsilon 1, 2, 4, 8 and print test accuracy by method and epsilon.")
    demo.add_argument("--out", default="runs/demo", help="folder for the demo's run directories (default %(default)s)")

    profiles = commands.add_parser("profiles", help="list named recipes",
                                   description="List the registered recipes whose key matches REGEX.")
    profiles.add_argument("pattern", nargs="?", metavar="REGEX", help="regular expression searched in the keys")
    profiles.add_argument("--recipes", metavar="FILE", help="Python file that registers extra profiles")

    sweep = commands.add_parser(
        "sweep", help="run many runs in parallel, resumably",
        description="Run every matching profile, or every combination of a grid, into OUT/<key>/. Finished "
                    "runs are skipped, unfinished ones resume, a failed run is recorded and the others go on. "
                    "Writes OUT/results.csv, prints the report and writes OUT/privacy_utility.png.")
    chosen = sweep.add_mutually_exclusive_group(required=True)
    chosen.add_argument("--profiles", metavar="REGEX", help="run the profiles whose key matches REGEX")
    chosen.add_argument("--grid", nargs="+", metavar="NAME=V1,V2",
                        help="e.g. method=lp-1st,lp-2st epsilon=1,2,4 seed=0,1 (fields of the run or training config)")
    sweep.add_argument("--base", metavar="KEY", help="profile whose recipe the --grid starts from")
    sweep.add_argument("--recipes", metavar="FILE", help="Python file that registers extra profiles")
    sweep.add_argument("--workers", type=int, default=1, help="parallel worker processes (default %(default)s)")
    sweep.add_argument("--data-dir", help="data folder for every run whose dataset reads one (MNIST family, CIFAR)")
    sweep.add_argument("--device", default="auto", help="torch device for every run (default %(default)s)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar")
    sweep.add_argument("--out", required=True, help="sweep folder")

    report_parser = commands.add_parser("report", help="table and privacy-utility plot of a sweep",
                                        description="Print mean ± std test accuracy by method and epsilon from "
                                                    "DIR/results.csv and write DIR/privacy_utility.png.")
    report_parser.add_argument("dir", metavar="DIR")

    audit = commands.add_parser(
        "audit", help="empirical epsilon lower bound for a run's recipe",
        description="Retrain RUNDIR's recipe with canaries (random-noise inputs with random labels, or training "
                    "examples given random wrong labels) in RUNDIR/audit, guess each canary's label from the model "
                    "calibrated by RUNDIR's own model, and turn the guesses into an epsilon lower bound with a "
                    "Clopper-Pearson interval. The run itself and its ledger are not touched.")
    audit.add_argument("run_dir", metavar="RUNDIR")
    audit.add_argument("--canaries", type=int, default=1000, help="number of canaries (default %(default)s)")
    audit.add_argument("--canary-kind", choices=("mislabeled", "noise"), default="mislabeled",
                       help="mislabeled: training examples given a random wrong label; noise: extra random-noise "
                            "inputs with random labels (default %(default)s)")
    audit.add_argument("--confidence", type=float, default=0.95, help="confidence of the bound (default %(default)s)")
    audit.add_argument("--seed", type=int, default=0, help="seed for choosing canaries (default %(default)s)")
    audit.add_argument("--device", default="auto")
    audit.add_argument("--membership", action="store_true",
                       help="also run membership inference (loss threshold and offline LiRA with shadow models), "
                            "the audit for recipes that protect whole examples")
    audit.add_argument("--targets", type=int, default=1000, help="with --membership: targets, half of them members (default %(default)s)")
    audit.add_argument("--shadows", type=int, default=4, help="with --membership: shadow models for LiRA (default %(default)s)")

    download = commands.add_parser("download", help="fetch a dataset's standard files (needs internet)")
    download.add_argument("dataset", choices=FOLDER_DATASETS)
    download.add_argument("--data-dir", required=True)
    return parser


def _print_summary(summary: dict) -> None:
    print(f"{summary['method']} on {summary['dataset']}: test accuracy {100 * summary['test_accuracy']:.2f}%  "
          f"epsilon {format_epsilon(summary['epsilon'])} (delta {summary['delta']:g}, {summary['neighboring_relation']})  "
          f"{summary['seconds']:.1f}s")
    if not summary.get("noise_private", True):
        print(f"NOT PRIVATE: the noise is {summary['noise']}")


#: the train options that apply on top of --profile (besides --profile itself and --recipes)
_PROFILE_OPTIONS = {"command", "profile", "recipes", "data_dir", "device", "quiet", "out"}


def _changed_options(args: argparse.Namespace, required: list[str], names: set[str]) -> list[str]:
    """The options among ``names`` (destinations) that ``args`` sets to other than their defaults, as
    flags; ``required`` is the command line that gives every default (the command and its required
    arguments)."""
    defaults = vars(_build_parser().parse_args(required))
    return [f"--{name.replace('_', '-')}" for name in sorted(names) if getattr(args, name) != defaults[name]]


def _train(args: argparse.Namespace) -> None:
    if args.recipes:
        load_recipes(args.recipes)
    if args.profile:
        ignored = _changed_options(args, ["train", "--out", args.out], set(vars(args)) - _PROFILE_OPTIONS)
        if ignored:
            raise ValueError(f"--profile runs its recipe as registered; {', '.join(ignored)} would not apply to it "
                             "(only --data-dir, --device and --quiet do). For other settings use "
                             "`labeldp sweep --base PROFILE --grid NAME=VALUE` or register a recipe (--recipes)")
        config = get_profile(args.profile).with_overrides(data_dir=args.data_dir)
        summary = train_run(config, args.out, device=args.device, progress=not args.quiet)
        _print_summary(summary)
        print(f"run directory: {args.out}")
        return
    dpsgd = DPSGDConfig(max_grad_norm=args.max_grad_norm, noise_multiplier=args.noise_multiplier, augmult=args.augmult,
                        ema_decay=args.ema_decay or None, physical_batch_size=args.physical_batch_size,
                        clipping=args.clipping)
    pate = PATEConfig(teachers=args.teachers, queries=args.queries, noise_std=args.vote_noise,
                      aggregator=args.aggregator, threshold=args.threshold,
                      threshold_noise_ratio=args.threshold_noise_ratio, teacher_epochs=args.teacher_epochs,
                      teacher_batch_size=args.teacher_batch_size)
    config = RunConfig(dataset=args.dataset, method=args.method, epsilon=args.epsilon, delta=args.delta, dpsgd=dpsgd,
                       pate=pate,
                       stages=tuple(args.stages) if args.stages else None, model=args.model,
                       temperature=args.temperature, prior=args.prior,
                       prior_epsilon=args.prior_epsilon, prior_temperature=args.prior_temperature,
                       clusters=args.clusters, encoder=args.encoder,
                       combine_priors=args.combine_priors, loss=args.loss, reuse_labels=not args.no_reuse_labels,
                       warm_start=not args.no_warm_start, seed=args.seed, secure_rng=args.secure_rng,
                       insecure_noise_seed=args.insecure_noise_seed,
                       classes=tuple(args.classes) if args.classes else None,
                       data_dir=args.data_dir, table=args.table, label_column=args.label_column,
                       test_table=args.test_table, train=_train_config(args))
    summary = train_run(config, args.out, device=args.device, progress=not args.quiet)
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
            raise ValueError("--base is the recipe a --grid starts from; --profiles runs its profiles as registered")
        jobs = [SweepJob(p.key, p.config) for p in list_profiles(args.profiles)]
        if not jobs:
            raise ValueError(f"no profile matches {args.profiles!r}; see `labeldp profiles`")
    else:
        grid = {}
        for item in args.grid:
            name, sep, values = item.partition("=")
            if not sep or not values:
                raise ValueError(f"grid item {item!r} must look like name=value1,value2")
            grid[name.replace("-", "_")] = values.split(",")
        jobs = grid_jobs(grid, get_profile(args.base).config if args.base else None)
    rows = run_sweep(jobs, args.out, workers=args.workers, device=args.device, data_dir=args.data_dir,
                     progress=not args.quiet)
    done = sum(r["status"] == "done" for r in rows)
    print(f"{done}/{len(rows)} runs finished; results in {Path(args.out) / 'results.csv'}\n")
    _report(argparse.Namespace(dir=args.out))


def _report(args: argparse.Namespace) -> None:
    text, plot = report(args.dir)
    print(text)
    print(f"plot: {plot}")


def _audit(args: argparse.Namespace) -> None:
    run_dir = Path(args.run_dir)
    if not args.membership and (changed := _changed_options(args, ["audit", args.run_dir], {"targets", "shadows"})):
        raise ConfigError(f"{', '.join(changed)} apply only with --membership")
    if not (run_dir / "config.json").exists():
        raise RunDirectoryError(f"{run_dir} has no config.json: not a labeldp run directory")
    config = RunConfig.from_dict(json.loads((run_dir / "config.json").read_text()))
    if args.membership:  # refuse what cannot run before the label audit spends its minutes
        check_membership_options(len(config_dataset(config.resolved()).y_train), args.targets, args.shadows)
    result = audit_run(run_dir, num_canaries=args.canaries, confidence=args.confidence, seed=args.seed,
                       device=args.device, canaries=args.canary_kind)
    claimed = format_epsilon(result["claimed_epsilon"])
    if result["claimed_label_epsilon"] != result["claimed_epsilon"]:
        claimed += f" per example, {format_epsilon(result['claimed_label_epsilon'])} per replaced label"
    print(f"{result['method']} on {result['dataset']}: claimed epsilon {claimed}, "
          f"empirical epsilon lower bound {result['epsilon_lower_bound']:.3f} "
          f"({100 * result['confidence']:g}% confidence, {result['num_canaries']} canaries)")
    for t in result["thresholds"]:
        print(f"  answering top {100 * t['answer_fraction']:g}%: {t['correct']}/{t['answered']} correct "
              f"-> epsilon >= {t['epsilon_lower_bound']:.3f}")
    print(f"written: {run_dir / 'audit' / 'audit.json'}")
    if args.membership:
        audited = PrivacyLedger.load(run_dir / "ledger.json")
        mia = membership_audit(config, run_dir / "audit" / "membership", num_targets=args.targets,
                               num_shadows=args.shadows, confidence=args.confidence, seed=args.seed,
                               device=args.device, audited_ledger=audited)
        for name in ("loss_threshold", "lira_offline"):
            m = mia[name]
            print(f"membership ({name}): AUC {m['auc']:.3f}, TPR at 1% FPR {m['tpr_at_fpr']['0.01']:.3f}, "
                  f"epsilon lower bound {m['epsilon_lower_bound']:.3f}")
        print(f"written: {run_dir / 'audit' / 'membership' / 'membership.json'}")
    delta = result["spent"]["delta"]
    print(f"The audit trained on the run's labels again, with noise of its own (its ledgers: audit/ledger.json"
          f"{', audit/membership/ledger.json' if args.membership else ''}). Everything in {run_dir} together is "
          f"epsilon {format_epsilon(_finite(folder_epsilon(run_dir, delta)))}; the run alone is epsilon "
          f"{format_epsilon(result['claimed_epsilon'])}. Delete {run_dir / 'audit'} before you share the run folder.")


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else value


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    runtime.reuse_freed_memory()
    try:
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
        elif args.command == "report":
            _report(args)
        elif args.command == "audit":
            _audit(args)
        elif args.command == "download":
            download_dataset(args.dataset, args.data_dir)
            print(f"{args.dataset} saved in {args.data_dir}")
    except (LabelDPError, ValueError, TypeError, FileNotFoundError) as error:
        print(f"labeldp: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
