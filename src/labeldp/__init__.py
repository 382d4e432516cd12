"""labeldp: deep learning with label differential privacy (public inputs, private labels)."""

__version__ = "0.1.0"


def tune(config, grid, out, **options):
    """Tune a run's training options on one release of its labels (:func:`labeldp.experiments.tune.tune`):
    ``labeldp.tune(RunConfig(method="lp-1st", epsilon=2), {"lr": [0.01, 0.03]}, "runs/tuned")``."""
    from labeldp.experiments.tune import tune as tune_on_release

    return tune_on_release(config, grid, out, **options)
