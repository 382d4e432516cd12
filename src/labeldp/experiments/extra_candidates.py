"""The candidates an auto-tuned run (:mod:`labeldp.experiments.auto_tune`) tries after its grid's choice, each
kept only where clearly ahead of it: the images mirrored at random, then cut out (each on top of the choice so
far, while the tuning budget allows), and gradient-boosted trees on a table of yours."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from labeldp.config.run_config import RunConfig
from labeldp.config.tuning import DEFAULT_HOLDOUT
from labeldp.data import LabeledDataset
from labeldp.data.dataset_registry import get_dataset
from labeldp.errors import ConfigError
from labeldp.experiments.candidates import candidate_config, candidate_key
from labeldp.experiments.one_release import check_candidates, clearly_ahead, lead, score_candidates
from labeldp.models.names import FITTED_MODELS
from labeldp.released_metrics import points

#: the candidates tried after the grid's choice: their entry in the record, the terms on which each must be
#: clearly ahead of the choice, their words, what trying them does, and how their lead is printed
EXTRAS = (
    (
        "mirror",
        "terms",
        "mirrored images",
        "the choice, its images mirrored at random",
        points,
    ),
    (
        "cutout",
        "terms",
        "cut-out images",
        "the choice, a random square of its images blanked",
        points,
    ),
    (
        "trees",
        "log_likelihood_terms",
        "gradient-boosted trees",
        "gradient-boosted trees in place of the network",
        "{:+.4f} +- {:.4f} in log-likelihood a label".format,
    ),
)


#: the extras that add an augmentation of images to the choice so far: their entry in the record -> the option
AUGMENTING = {"mirror": "flip", "cutout": "cutout"}


def augmented(base: RunConfig, data: LabeledDataset, chosen: dict[str, Any], option: str) -> dict[str, Any] | None:
    """The ``chosen`` options with the images' augmentation ``option`` (``flip``: for a dataset's augmentation
    without one; ``cutout``) added; None where there is nothing to try (not images, augmentation off, or on)."""
    if np.ndim(data.x_train) != 4 or not base.train.augment or getattr(base.train, option) or chosen.get(option):
        return None
    return None if option == "flip" and data.augmentation == "crop-flip" else {**chosen, option: True}


def trees(base: RunConfig, data: LabeledDataset, device: str) -> dict[str, Any] | None:
    """The options of gradient-boosted trees in place of the network (``{"model": "gbdt"}``) for a table of
    yours whose network is the rule's MLP and whose training is the defaults (the trees have settings of their
    own); None elsewhere, or where the run could not fit them (checked before the draw), or where its later
    releases depend on the model (LP-2ST): a first stage's candidates, on fewer rows, chose the trees wrongly
    there (docs/results.md, "Tables")."""
    table = get_dataset(base.dataset).source == "table" and not base.train.changed()
    if not table or base.model is not None or base.model_name(data.input_shape, data.categorical) != "mlp":
        return None
    options = {"model": FITTED_MODELS[0]}
    try:
        later = check_candidates(base, [candidate_config(base, options)], data, device, DEFAULT_HOLDOUT)[2]
    except ConfigError:  # e.g. numeric labels, or a method that trains by gradient steps
        return None
    return None if later else options


def try_extras(
    base: RunConfig,
    record: dict[str, Any],
    options: list[dict[str, Any]],
    candidates: list[RunConfig],
    results: list[dict[str, Any]],
    best: int,
    scored: tuple,
    progress: bool,
    most: int,
    write: Callable[[dict[str, Any]], None],
) -> int:
    """Score the :data:`~labeldp.experiments.extra_candidates.EXTRAS` after ``options``' choice ``best``
    (appended to the lists), each kept only where clearly ahead of the choice, as a step is; the position of the
    choice after them. An augmentation is tried while fewer than ``most`` candidates were, and ``write`` saves the
    record before it trains (a resumed run tries the same). One that cannot be fitted on the release is recorded as
    skipped."""
    for name, terms, _, trying, _ in EXTRAS:
        if name in AUGMENTING and name not in record and len(options) < most:
            if (tried := augmented(base, scored[1], options[best], AUGMENTING[name])) is not None:
                record[name] = {"options": tried, "candidate": candidate_key(tried)}
                write(record)
        if (extra := record.get(name)) is None:
            continue
        if progress:
            tqdm.write(f"auto-tune: trying {extra['candidate']} ({trying})")
        candidate = candidate_config(base, extra["options"])
        try:
            results += score_candidates([extra["options"]], [candidate], *scored)
        except ConfigError as refused:  # e.g. one class released among the rows the trees fit: they cannot learn
            extra.update(kept=False, skipped=str(refused))
            continue
        options.append(extra["options"])
        candidates.append(candidate)
        ahead, error = lead(results[-1], results[best], terms)
        extra.update(ahead=ahead, ahead_error=error, kept=clearly_ahead(ahead, error), versus=results[best]["key"])
        best = len(options) - 1 if extra["kept"] else best
    return best


__all__ = ["AUGMENTING", "EXTRAS", "augmented", "trees", "try_extras"]
