"""``labeldp`` command line: thin argument parsing over the library's layers."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from labeldp import __version__
from labeldp.data import DATASETS, download_dataset
from labeldp.experiments import accuracy_table, format_epsilon
from labeldp.models import MODELS
from labeldp.training import METHODS, RunConfig, TrainConfig, train_run
from labeldp.training.stage import OPTIMIZERS, SCHEDULES

DEMO_EPSILONS = (1.0, 2.0, 4.0, 8.0)
DEMO_METHODS = ("non-private", "lp-1st", "lp-2st")
#: A recipe that trains the MLP on the 1,347 embedded digits in about a second per run.
DEMO_TRAIN = TrainConfig(epochs=40, batch_size=32, lr=0.02, weight_decay=1e-3, mixup_alpha=0.0)


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
                       warmup_epochs=args.warmup_epochs, mixup_alpha=args.mixup, augment=not args.no_augment)


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
    train.add_argument("--dataset", choices=DATASETS, default="digits",
                       help="digits is embedded; the MNIST family and CIFAR read --data-dir; csv reads --table")
    train.add_argument("--data-dir", help="folder with the dataset's standard files")
    train.add_argument("--table", help="CSV or Parquet file (dataset csv)")
    train.add_argument("--label-column", default="label", help="label column of --table (default %(default)s)")
    train.add_argument("--test-table", help="separate test table (default: 20%% of --table's rows)")
    train.add_argument("--method", choices=METHODS, default="lp-2st",
                       help="non-private: true labels (reference); rr / lp-1st: randomized response on all labels; "
                            "lp-2st: two stages, the second uses RR-with-prior; lp-mst: any number of stages")
    train.add_argument("--epsilon", type=float, help="label-DP budget epsilon (> 0); required for private methods")
    train.add_argument("--stages", type=float, nargs="+", metavar="FRACTION",
                       help="fractions of the training set per stage, summing to 1 (default: 0.4 0.6 for lp-2st)")
    train.add_argument("--temperature", type=float, default=1.0, help="prior = softmax(logits / T) (default %(default)s)")
    train.add_argument("--loss", choices=("forward", "ce"), default="forward",
                       help="forward: likelihood of each noisy label through its known noise channel (the model "
                            "learns clean posteriors); ce: plain cross-entropy on noisy labels (default %(default)s)")
    train.add_argument("--no-reuse-labels", action="store_true",
                       help="train each stage on its own noisy labels only (default: earlier stages' labels too; "
                            "with --loss ce only those inside the new prior's top k)")
    train.add_argument("--no-warm-start", action="store_true", help="train each stage's model from scratch")
    train.add_argument("--model", choices=MODELS, help="network (default: cnn for 28x28, resnet18 for 32x32, else mlp)")
    train.add_argument("--seed", type=int, default=0, help="seed for splits, mechanisms and training (default %(default)s)")
    train.add_argument("--secure-rng", action="store_true",
                       help="draw the noisy labels from the OS's cryptographically secure generator")
    train.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda (default %(default)s)")
    train.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    train.add_argument("--out", required=True, help="run directory (created, or resumed if it exists)")
    _add_train_arguments(train)

    demo = commands.add_parser("demo", help="privacy/accuracy table on the embedded digits dataset",
                               description="Train non-private, LP-1ST and LP-2ST on the embedded digits at "
                                           "several epsilons and print test accuracy by method and epsilon.")
    demo.add_argument("--epsilons", type=float, nargs="+", default=list(DEMO_EPSILONS), help="budgets to compare")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--out", default="runs/demo", help="folder for the demo's run directories (default %(default)s)")

    download = commands.add_parser("download", help="fetch a dataset's standard files (needs internet)")
    download.add_argument("dataset", choices=[d for d in DATASETS if d not in ("digits", "csv")])
    download.add_argument("--data-dir", required=True)
    return parser


def _print_summary(summary: dict) -> None:
    print(f"{summary['method']} on {summary['dataset']}: test accuracy {100 * summary['test_accuracy']:.2f}%  "
          f"epsilon {format_epsilon(summary['epsilon'])} (delta {summary['delta']:g}, {summary['neighboring_relation']})  "
          f"{summary['seconds']:.1f}s")


def _train(args: argparse.Namespace) -> None:
    config = RunConfig(dataset=args.dataset, method=args.method, epsilon=args.epsilon,
                       stages=tuple(args.stages) if args.stages else None, model=args.model,
                       temperature=args.temperature, loss=args.loss, reuse_labels=not args.no_reuse_labels,
                       warm_start=not args.no_warm_start, seed=args.seed, secure_rng=args.secure_rng,
                       data_dir=args.data_dir, table=args.table, label_column=args.label_column,
                       test_table=args.test_table, train=_train_config(args))
    summary = train_run(config, args.out, device=args.device, progress=not args.quiet)
    _print_summary(summary)
    print(f"run directory: {args.out}")


def _demo(args: argparse.Namespace) -> None:
    summaries = []
    jobs = [(m, None) for m in DEMO_METHODS if m == "non-private"]
    jobs += [(m, e) for m in DEMO_METHODS if m != "non-private" for e in args.epsilons]
    for method, epsilon in jobs:
        name = method if epsilon is None else f"{method}-eps{epsilon:g}"
        config = RunConfig(dataset="digits", method=method, epsilon=epsilon, seed=args.seed, train=DEMO_TRAIN)
        summary = train_run(config, Path(args.out) / name, progress=False)
        summaries.append({**summary, "target_epsilon": epsilon})
        print(f"  {name:<22} test accuracy {100 * summary['test_accuracy']:5.1f}%  "
              f"ledger epsilon {format_epsilon(summary['epsilon'])}  {summary['seconds']:.1f}s", flush=True)
    print("\nTest accuracy (%) on the embedded digits (1,347 train / 450 test), label-DP epsilon from the ledger:\n")
    print(accuracy_table(summaries))


def main(argv: list[str] | None = None) -> int:
    args = _build_parser().parse_args(argv)
    try:
        if args.command == "train":
            _train(args)
        elif args.command == "demo":
            _demo(args)
        elif args.command == "download":
            download_dataset(args.dataset, args.data_dir)
            print(f"{args.dataset} saved in {args.data_dir}")
    except (ValueError, TypeError, FileNotFoundError) as error:
        print(f"labeldp: error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
