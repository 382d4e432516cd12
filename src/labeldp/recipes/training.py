"""The best known settings of each method on each dataset: what ``labeldp train`` uses for the training
options it is not given, and what the built-in profiles are made of.

A recipe is the training side of a run (model, optimiser and schedule, DP-SGD's clipping and EMA); the budget,
the method and the seed stay the user's. Without one (a table of one's own) the library's defaults
apply. Each recipe's ``source`` says how it was chosen: most by test accuracy, as the paper chose its own,
which is evidence for that dataset only. Those chosen by ``labeldp tune`` were chosen on a release of that
dataset's own training labels: a run that takes them on that dataset inherits a choice its ledger does not
count (a tune on the run's own release counts everything)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.run_config import DEFAULT_PRIOR_SHARE
from labeldp.config.train_config import TrainConfig


@dataclass(frozen=True)
class Recipe:
    """Training settings of one method on one dataset.

    Attributes
    ----------
    model : str or None
        The network (None: the rule's for the inputs).
    source : str
        How the recipe was chosen.
    borrowed_from : str or None
        The dataset of the family it was chosen on, where that is another one (Fashion-MNIST and KMNIST
        take MNIST's); ``labeldp train`` then tunes on the run's own release instead (:func:`own_recipe`).
    """

    train: TrainConfig
    model: str | None = None
    #: the method's options it sets (``Method.options``: DP-SGD's clipping bound and EMA), or None
    options: Any = None
    source: str = ""
    #: the run's other options the recipe sets, given the run's epsilon (a cluster prior's encoder,
    #: clusters and histogram share; a histogram prior's share): option name -> value
    run_options: Callable[[float], dict[str, Any]] | None = None
    borrowed_from: str | None = None

    def options_for(self, epsilon: float | None) -> dict[str, Any]:
        """The run options besides training that the recipe sets at ``epsilon`` (none without one)."""
        return {} if self.run_options is None or epsilon is None else self.run_options(epsilon)

    def describe(self, epsilon: float | None = None) -> str:
        """The recipe in a few words, as ``labeldp train`` prints it."""
        t = self.train
        parts = [
            f"network {self.model}" if self.model else "the rule's network for the inputs",
            f"{t.epochs} epochs",
            f"batch {t.batch_size}",
            f"{t.optimizer} lr {t.lr:g}",
            f"weight decay {t.weight_decay:g}",
        ]
        if t.mixup_alpha:
            parts.append(f"mixup {t.mixup_alpha:g}")
        if not t.augment:
            parts.append("no augmentation")
        parts += [
            f"{name.replace('_', ' ')} {value:g}" if isinstance(value, float) else f"{name.replace('_', ' ')} {value}"
            for name, value in self.options_for(epsilon).items()
        ]
        return ", ".join(parts)


#: Embedded digits: the MLP, small batches.
DIGITS_TRAIN = TrainConfig(epochs=40, batch_size=32, lr=0.02, weight_decay=1e-3)
#: The network of MNIST's PATE and small-budget cluster-prior recipes: the small CNN they were measured
#: with. MNIST's other label-DP recipes take the rule's network (the ConvNet,
#: :func:`labeldp.models.names.default_model_name`), compared on the same releases in
#: docs/guides/images.md ("The network").
MNIST_MEASURED_MODEL = "cnn"
#: MNIST family: SGD with Nesterov momentum, cosine schedule, +-2 px shifts.
MNIST_TRAIN = TrainConfig(epochs=12, batch_size=128, lr=0.05, weight_decay=5e-4)
#: MNIST ALIBI and LP-2ST: the same at learning rate 0.1, chosen by ``labeldp tune`` over lr 0.05 or
#: 0.1 x 8 or 12 epochs: for ALIBI on one release at epsilon 1, for LP-2ST on the first stage's release
#: at epsilon 2 (docs/guides/tuning.md).
MNIST_TUNED_TRAIN = TrainConfig(epochs=12, batch_size=128, lr=0.1, weight_decay=5e-4)
#: MNIST LP-1ST: learning rate 0.1 for 8 epochs, chosen by ``labeldp tune`` on one release at epsilon 2
#: (the same 4 candidates).
MNIST_LP1ST_TRAIN = TrainConfig(epochs=8, batch_size=128, lr=0.1, weight_decay=5e-4)
#: CIFAR: ResNet-18 with crop+flip and mixup, as in the paper (a GPU job: --device cuda).
CIFAR_TRAIN = TrainConfig(epochs=200, batch_size=128, lr=0.1, weight_decay=5e-4, mixup_alpha=8.0)
#: MNIST DP-SGD (full DP): the tanh CNN of Tramer & Boneh (2021), expected batch 512, clipping 0.1,
#: SGD with momentum, 40 epochs, parameter EMA for evaluation.
DPSGD_MNIST_TRAIN = TrainConfig(epochs=40, batch_size=512, lr=0.5, weight_decay=0.0, augment=False)
DPSGD_MNIST = DPSGDConfig(max_grad_norm=0.1, ema_decay=0.999)
#: Digits DP-SGD: the MLP, expected batch 512 of the 1,347 images, clipping 1, 60 epochs (the best of 5
#: settings by test accuracy at epsilon 2).
DPSGD_DIGITS_TRAIN = TrainConfig(epochs=60, batch_size=512, lr=1.0, weight_decay=0.0, augment=False)
DPSGD_DIGITS = DPSGDConfig(max_grad_norm=1.0, ema_decay=0.99)
#: PATE's student sees only its answered queries: more epochs on small batches.
PATE_STUDENT_TRAIN = TrainConfig(epochs=100, batch_size=32, lr=0.05, weight_decay=5e-4)
#: MovieLens (100K's folder format): the recommender model, AdamW with strong decoupled weight decay on
#: the embeddings, 10 epochs at batch 512; a tenth of each stage's examples is held out to keep the
#: epoch whose model best fits their released ratings (noisy ratings are memorised within a few epochs
#: at small epsilons). 20 epochs, lr 0.005, weight decay 0.5 or 2 and batch 256 each gave a worse test
#: RMSE (benchmarks/movielens.py).
MOVIELENS_TRAIN = TrainConfig(epochs=10, batch_size=512, optimizer="adam", lr=0.01, weight_decay=1.0, validation=0.1)
MOVIELENS_METHODS = ("lp-1st", "rr-on-bins", "rr-on-bins-mst", "laplace-regression")
#: the most epsilon RR-on-bins' histogram prior buys on MovieLens (80,000 ratings: a count's noise is
#: then a few % of the smallest of the five counts)
MOVIELENS_PRIOR_EPSILON = 0.05
#: MNIST's training examples and the clusters of its small-budget cluster prior (see
#: :func:`mnist_spectral_options`)
MNIST_EXAMPLES = 60_000
SPECTRAL_CLUSTERS = 50


def movielens_options(method: str) -> Callable[[float], dict[str, Any]] | None:
    """The run options of a MovieLens recipe: for an ``rr-on-bins`` method, the histogram prior's epsilon, the
    default share of epsilon but at most :data:`MOVIELENS_PRIOR_EPSILON`; None for the other methods."""
    if not method.startswith("rr-on-bins"):
        return None
    return lambda epsilon: {"prior_epsilon": min(MOVIELENS_PRIOR_EPSILON, epsilon * DEFAULT_PRIOR_SHARE)}


def mnist_spectral_options(epsilon: float) -> dict[str, Any]:
    """MNIST's cluster prior at small budgets (profiles ``mnist/e*/lp-2st-spectral``): 50 k-means clusters of
    a neighbour-graph embedding of the public training images, the histogram's share of ``epsilon`` by
    :func:`labeldp.priors.clustering.histogram_epsilon` (a rule on public sizes), untempered."""
    from labeldp.priors.clustering import histogram_epsilon

    return {
        "prior": "cluster",
        "encoder": "spectral",
        "clusters": SPECTRAL_CLUSTERS,
        "prior_epsilon": histogram_epsilon(epsilon, MNIST_EXAMPLES, SPECTRAL_CLUSTERS),
    }


_LABEL_METHODS = ("non-private", "rr", "lp-1st", "lp-2st", "lp-mst", "alibi")
_BY_TEST_ACCURACY = "chosen by test accuracy on this dataset"
RECIPES: dict[tuple[str, str], Recipe] = {
    **{("digits", m): Recipe(DIGITS_TRAIN, source=_BY_TEST_ACCURACY) for m in _LABEL_METHODS},
    **{
        (d, m): Recipe(
            MNIST_TRAIN,
            source="the paper's MNIST setting, lengths by test accuracy",
            borrowed_from=None if d == "mnist" else "mnist",
        )
        for d in ("mnist", "fashion-mnist", "kmnist")
        for m in _LABEL_METHODS
    },
    **{
        (d, m): Recipe(
            CIFAR_TRAIN, source="the paper's CIFAR-10 setting", borrowed_from=None if d == "cifar10" else "cifar10"
        )
        for d in ("cifar10", "cifar100")
        for m in _LABEL_METHODS
    },
    ("mnist", "alibi"): Recipe(MNIST_TUNED_TRAIN, source="chosen by labeldp tune on released labels (epsilon 1)"),
    ("mnist", "lp-2st"): Recipe(
        MNIST_TUNED_TRAIN, source="chosen by labeldp tune on the first stage's released labels (epsilon 2)"
    ),
    ("mnist", "lp-1st"): Recipe(MNIST_LP1ST_TRAIN, source="chosen by labeldp tune on released labels (epsilon 2)"),
    ("digits", "vlp"): Recipe(
        DIGITS_TRAIN, source="lp-1st's, chosen by its test accuracy on this dataset (vlp trains by the same loss)"
    ),
    ("digits", "dp-sgd"): Recipe(DPSGD_DIGITS_TRAIN, "mlp", DPSGD_DIGITS, source=_BY_TEST_ACCURACY),
    ("mnist", "dp-sgd"): Recipe(
        DPSGD_MNIST_TRAIN,
        "tanh-cnn",
        DPSGD_MNIST,
        source="Tramer & Boneh (2021) and De et al. (2022), checked by test accuracy",
    ),
    ("mnist", "pate"): Recipe(
        PATE_STUDENT_TRAIN,
        MNIST_MEASURED_MODEL,
        source="Papernot et al. (2018)'s 250 teachers, the student's length by test accuracy",
    ),
    **{
        ("movielens", m): Recipe(
            MOVIELENS_TRAIN,
            source="chosen by test RMSE on this dataset (benchmarks/movielens.py)",
            run_options=movielens_options(m),
        )
        for m in ("non-private", *MOVIELENS_METHODS)
    },
}
#: recipes of a method with a given stage-1 prior, where they differ from the method's own: (dataset,
#: method, prior) -> the recipe, with the prior's settings
PRIOR_RECIPES: dict[tuple[str, str, str], Recipe] = {
    ("mnist", "lp-2st", "cluster"): Recipe(
        MNIST_TRAIN,
        MNIST_MEASURED_MODEL,
        source="the best MNIST cluster prior by test accuracy (profiles mnist/e*/lp-2st-spectral: 97.1 % at "
        "epsilon 0.1; benchmarks/cluster_purity.py)",
        run_options=mnist_spectral_options,
    ),
}


def recipe_for(dataset: str, method: str, prior: str | None = None) -> Recipe | None:
    """The recipe of ``method`` on ``dataset`` (a ``prior``'s own in :data:`PRIOR_RECIPES` first), or None
    where only the library's defaults apply."""
    found = PRIOR_RECIPES.get((dataset, method, prior)) if prior is not None else None
    return found or RECIPES.get((dataset, method))


def own_recipe(dataset: str, method: str, prior: str | None = None) -> Recipe | None:
    """:func:`recipe_for`'s recipe where it was chosen on ``dataset`` itself; None where there is none or it
    is borrowed (:attr:`Recipe.borrowed_from`)."""
    recipe = recipe_for(dataset, method, prior)
    return recipe if recipe is not None and recipe.borrowed_from is None else None


def with_recipe(config, recipe: Recipe, keep: Collection[str] = frozenset()):
    """``config`` (unresolved) with its model, training settings, method's options and the run options the recipe
    sets taken from ``recipe``, except the fields named in ``keep`` (the options a user typed)."""

    def merged(recipe_part, given):
        return dataclasses.replace(
            recipe_part, **{f.name: getattr(given, f.name) for f in dataclasses.fields(given) if f.name in keep}
        )

    return dataclasses.replace(
        config,
        **{name: value for name, value in recipe.options_for(config.epsilon).items() if name not in keep},
        model=config.model if "model" in keep else recipe.model,
        train=merged(recipe.train, config.train),
        options=config.options if recipe.options is None else merged(recipe.options, config.options),
    )
