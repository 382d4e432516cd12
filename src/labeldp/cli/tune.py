"""``labeldp tune``: training options chosen on one release of the labels (DP-SGD: private selection)."""

from __future__ import annotations

import argparse
from pathlib import Path

from labeldp.cli.common import add_run_arguments, budget_policy, config_and_recipe, set_threads
from labeldp.config.shared_options import GRID, OUT
from labeldp.config.tuning import DEFAULT_HOLDOUT, SELECTION_DEFAULTS
from labeldp.options import Option, add_options

DESCRIPTION = (
    "Release the labels once (one ledger entry per release, as one run), train a candidate for every "
    "combination of --grid on the released labels of most training examples, score each on the held-out "
    "rest's released labels by an estimate of its clean accuracy from their noise channel (never the true "
    "labels, never the test set), then train the best on every released label. OUT is the final run's "
    "folder (its ledger: one run's releases) with tune.json, tune.csv and candidates/. lp-1st and alibi: "
    "every training option. lp-2st and lp-mst: their training options are chosen on the first stage's "
    "release (each candidate's first-stage model is scored), and the later releases are drawn once, by the "
    "final run; what acts only after lp-2st's second release (reuse-labels, warm-start) in a tune of its "
    "own. dp-sgd: private selection. Anything else that a release depends on is refused before anything "
    "is spent."
)


GRID_FILE = Option(
    "JSON or YAML mapping of each option to its values, e.g. {lr: [0.01, 0.03]}",
    type="str | None",
    flag="--grid-file",
    metavar="FILE",
)
TRIALS = Option(
    "random search: N of the grid's combinations, drawn from --seed (default: all of them)",
    type="int | None",
    flag="--trials",
    metavar="N",
)
HOLDOUT = Option(
    "fraction of the training examples (of the first stage's, where the options are chosen on it) whose "
    "released labels score the candidates (chosen from --seed; dp-sgd: each example is held out with this "
    "probability, by a coin of its own)",
    DEFAULT_HOLDOUT,
    type="float",
    flag="--holdout",
)
SELECTION_MEAN = Option(
    f"mean number of trials (default {SELECTION_DEFAULTS['mean']:g})", type="float | None", flag="--selection-mean"
)
SELECTION_SHAPE = Option(
    "distribution of the number of trials: 1 geometric (default), inf Poisson, else truncated negative binomial",
    type="float | None",
    flag="--selection-shape",
)
SCORE_NOISE = Option(
    "standard deviation of the noise on each trial's held-out count of correct predictions (default "
    f"{SELECTION_DEFAULTS['score_noise']:g})",
    type="float | None",
    flag="--score-noise",
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every run option, ``--grid`` or ``--grid-file``, ``--trials``, ``--holdout``, the private selection's
    settings and ``--out``."""
    add_run_arguments(parser)
    add_options(parser.add_mutually_exclusive_group(required=True), "tune", GRID, GRID_FILE)
    add_options(parser, "tune", TRIALS, HOLDOUT)
    selection = parser.add_argument_group(
        "dp-sgd: private selection",
        "a secret random number of DP-SGD trials, each with a candidate drawn at random and scored by a noisy "
        "held-out count; only the best leaves (RepeatAndSelectDpEvent)",
    )
    add_options(selection, "tune", SELECTION_MEAN, SELECTION_SHAPE, SCORE_NOISE)
    add_options(parser, "tune", OUT, required=[OUT])


def read_grid_file(path: str) -> dict:
    """A JSON or YAML file's mapping of option names (``-`` spelled ``_``) to their values; a ConfigError for
    a file that is neither, or holds no such mapping."""
    import yaml  # YAML is a superset of JSON

    from labeldp.errors import ConfigError

    try:
        grid = yaml.safe_load(Path(path).read_text())
    except OSError as error:
        raise ConfigError(f"cannot read the grid file {path}: {error}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"the grid file {path} is neither JSON nor YAML: {error}") from None
    if not isinstance(grid, dict) or not all(isinstance(name, str) for name in grid):
        raise ConfigError(f"the grid file {path} must hold a mapping of option names to lists of values")
    return {name.replace("-", "_"): values for name, values in grid.items()}


def run(args: argparse.Namespace) -> None:
    """Tune the run's training options over the grid into ``--out`` (:func:`labeldp.experiments.release_tuning.tune`)
    and print the outcome: one release, candidates scored on held-out released labels, so everything written
    is covered by the final run's ledger (DP-SGD: private selection, :mod:`labeldp.dpsgd.selection`)."""
    from labeldp.config.overrides import parse_assignments
    from labeldp.experiments.release_tuning import format_tune, tune

    grid = parse_assignments(args.grid) if args.grid else read_grid_file(args.grid_file)
    config, recipe = config_and_recipe(args)
    set_threads(args, config.dataset)
    selection = {
        name: value
        for name, value in (
            ("mean", args.selection_mean),
            ("shape", args.selection_shape),
            ("score_noise", args.score_noise),
        )
        if value is not None
    }
    outcome = tune(
        config,
        grid,
        args.out,
        holdout=args.holdout,
        trials=args.trials,
        device=args.device,
        progress=not args.quiet,
        selection=selection,
        recipe=recipe,
        policy=budget_policy(args),
    )
    print(format_tune(outcome))
    tables = "tune.json" if outcome.get("search") == "private selection" else "tune.json, tune.csv"
    print(f"tune folder: {args.out} ({tables}; the final run's summary.json and ledger.json)")
