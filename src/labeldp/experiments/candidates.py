"""A tune's candidates: their options parsed from a grid, their configurations, and the check, before any
spend, that they share the releases they will be scored on."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

from labeldp.config.overrides import apply_overrides, parse_value, resolve_name
from labeldp.config.run_config import RunConfig, release_inputs
from labeldp.data import LabeledDataset
from labeldp.errors import ConfigError
from labeldp.models.names import FITTED_MODELS
from labeldp.randomness import public_rng

#: what a tune never tries: DP-SGD's noise multiplier, which the selection calibrates
UNTUNABLE = ("noise_multiplier",)


def candidate_options(
    grid: Mapping[str, Sequence[Any]], *, trials: int | None = None, seed: int = 0
) -> list[dict[str, Any]]:
    """The candidates' options: every combination of ``grid``'s values (as overrides take them,
    :mod:`labeldp.config.overrides`; repeated values tried once), or, with ``trials``, that many drawn without
    replacement from the public stream ``tune-search`` of ``seed`` (a random search).

    Raises
    ------
    labeldp.errors.ConfigError
        For an empty grid, an unknown or untunable option (``noise_multiplier``), a value that does not
        parse, or fewer than two candidates.
    """
    if not grid:
        raise ConfigError("the tuning grid is empty: give options with values to try, e.g. lr=0.01,0.03")
    values: dict[str, list[Any]] = {}
    for name, given in grid.items():
        field = resolve_name(name)[1]
        if field in UNTUNABLE:
            raise ConfigError(f"tune calibrates or keeps {field!r}: it is not a training option to try")
        given = [given] if isinstance(given, (str, int, float, bool)) or given is None else list(given)
        if not given:
            raise ConfigError(f"tuning option {name!r} has no values")
        parsed = [parse_value(name, v) if isinstance(v, str) else v for v in given]
        values[field] = list(dict.fromkeys(tuple(v) if isinstance(v, list) else v for v in parsed))
    combinations = [dict(zip(values, chosen)) for chosen in itertools.product(*values.values())]
    if trials is not None:
        if isinstance(trials, bool) or not isinstance(trials, int) or trials < 1:
            raise ConfigError(f"trials must be a positive integer, got {trials!r}")
        if trials < len(combinations):
            picked = public_rng(seed, "tune-search").choice(len(combinations), trials, replace=False)
            combinations = [combinations[i] for i in sorted(picked)]
    if len(combinations) < 2:
        raise ConfigError("tuning needs at least two candidates (give some option two or more values)")
    return combinations


def candidate_key(options: Mapping[str, Any]) -> str:
    """A candidate's name, also its folder: ``lr=0.01,epochs=10`` (a tuple written ``0.3:0.7``)."""

    def text(value: Any) -> str:
        return ":".join(map(str, value)) if isinstance(value, tuple) else str(value)

    return ",".join(f"{name}={text(value)}" for name, value in options.items())


def candidate_config(base: RunConfig, options: Mapping[str, Any]) -> RunConfig:
    """``base`` with a candidate's options, resolved; a ConfigError names the candidate."""
    try:
        return apply_overrides(base, options).resolved()
    except ConfigError as error:
        raise ConfigError(f"candidate {candidate_key(options)}: {error}") from None


def _flat(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{name}."))
        else:
            flat[f"{prefix}{name}"] = value
    return flat


def check_tunable(
    base: RunConfig, candidates: Sequence[RunConfig], data: LabeledDataset | None = None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Refuse (:class:`~labeldp.errors.ConfigError`), before any spend, a tune whose candidates would need
    releases of their own; else return ``(shared, later)``.

    ``later``: the releases drawn after the first stage with its model as their prior, which depend on the
    options tried; empty unless the candidates vary only ``Method.first_stage_options``, which are then chosen
    on the first stage's model, the later releases drawn once by the final run. ``data``, where given, refuses
    numeric labels, and candidates that vary the training of a fitted network (``gbdt``: no epochs, no learning
    rate)."""
    method = base.method_spec
    fitted = data is not None and base.model_name(data.input_shape, data.categorical) in FITTED_MODELS
    if fitted and any(candidate.train != base.train for candidate in candidates):
        raise ConfigError(
            "the network is fitted (gbdt), not trained by epochs at a learning rate: the training options do not "
            "act on it, so its candidates would be the same run"
        )
    if method.tuning is None:
        raise ConfigError(f"tune does not take method {base.method!r}: {method.untunable}")
    if method.tuning != "release":
        raise ConfigError(f"method {base.method!r} is tuned by {method.tuning}, not on shared releases")
    if method.releases is None:
        raise ConfigError(
            f"method {base.method!r} does not declare its releases (Method.releases): tune cannot check "
            "that its candidates share them"
        )
    if base.label_range is not None or (data is not None and data.is_regression):
        raise ConfigError(
            "tune scores candidates by their estimated clean accuracy over classes; numeric labels "
            "(a regression) are not supported yet"
        )
    names = method.releases(base)
    classes = data.num_classes if data is not None else None
    for candidate in candidates:
        if candidate.method != base.method or method.releases(candidate) != names:
            raise ConfigError(
                "every candidate must run the same method with the same releases; tune the training "
                "options of one method"
            )
    for position, name in enumerate(names):
        changed = sorted(
            {
                key
                for candidate in candidates
                for key in _changed(release_inputs(base, name, classes), release_inputs(candidate, name, classes))
            }
        )
        if not changed:
            continue
        shared, later = names[:position], names[position:]
        if "stage1" in shared and method.first_stage_options:
            varied = sorted(
                {key for candidate in candidates[1:] for key in _changed(candidates[0].to_dict(), candidate.to_dict())}
            )
            after = [key for key in varied if key.split(".")[0] not in method.first_stage_options]
            if not after:
                return shared, later
            apart = [key for key in after if all(key in method.independent(n) for n in later)]
            if apart == after:
                raise ConfigError(
                    f"method {base.method!r}: release {name!r} depends on {', '.join(changed)}, so these options are "
                    f"chosen on the first stage's release, by the first stage's model; {', '.join(after)} act only "
                    "after every release and cannot be told apart there. Tune them in a tune of their own"
                )
            changed = [key for key in after if key not in apart]
            raise ConfigError(
                f"method {base.method!r}: its later releases ({', '.join(later)}) depend on "
                f"{', '.join(changed)}, which the first stage's model cannot tell apart: each candidate "
                "would need releases of its own (a new spend)"
            )
        free = method.independent(name)
        can = (
            f"it does not depend on {', '.join(free)}"
            if free
            else "it depends on every option (drawn after training, from a model trained with them)"
        )
        chosen = (
            " (--first-release auto takes vectors or labels by the loss and consensus: name rr or vlp to tune them)"
            if "first_release" in changed and getattr(base.options, "first_release", None) == "auto"
            else ""
        )
        raise ConfigError(
            f"method {base.method!r}: release {name!r} depends on {', '.join(changed)}{chosen}, so "
            f"each candidate would need a release of its own (a new spend); {can}. Tune options "
            "that act only after every release (e.g. the training options of lp-1st or alibi)"
        )
    return names, ()


def _changed(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The flattened names (``train.lr``) whose values differ between two configuration dictionaries."""
    old, new = _flat(old), _flat(new)
    return [key for key in set(old) | set(new) if old.get(key) != new.get(key)]


def jsonable(options: Mapping[str, Any]) -> dict[str, Any]:
    """A candidate's options as JSON writes them (tuples as lists)."""
    return {name: list(value) if isinstance(value, tuple) else value for name, value in options.items()}
