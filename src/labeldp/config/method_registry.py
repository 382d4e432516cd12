"""The method registry: each training method is a :class:`Method` registered under its name.

labeldp's own methods are listed by name with the module that registers them
(:data:`BUILTIN_METHODS`), imported on first look-up. Register your own with :func:`register_method`
in a module you import (or a ``--recipes`` file).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labeldp.errors import ConfigError
from labeldp.options import Option

#: labeldp's own methods: name -> the module of ``labeldp.methods`` that registers it
BUILTIN_METHODS = {
    "non-private": "stages",
    "lp-1st": "stages",
    "rr": "stages",
    "lp-2st": "stages",
    "lp-mst": "stages",
    "lp-2st-counts": "cell_counts",
    "rr-on-bins": "numeric",
    "rr-on-bins-mst": "numeric",
    "laplace-regression": "numeric",
    "alibi": "alibi",
    "vlp": "vlp",
    "marginals": "marginals",
    "pate": "pate",
    "dp-sgd": "dp_sgd",
}
#: labeldp's own methods' lines of help (``--method``'s help is made of them)
BUILTIN_HELP = {
    "non-private": "true labels (a reference; epsilon infinite)",
    "lp-1st": "randomized response on every label, one stage (alias rr)",
    "lp-2st": "two stages, the second releasing by RR-with-prior from the first's model",
    "lp-mst": "any number of stages, each releasing by RR-with-prior from the model so far",
    "lp-2st-counts": "two stages, the second releasing noisy label counts per cell of rows the first model "
    "scores alike (tables)",
    "rr-on-bins": "numeric labels: RR over the optimal bins of a noisy histogram prior, one stage",
    "rr-on-bins-mst": "numeric labels: RR-on-bins in stages, later stages' priors from the model",
    "laplace-regression": "numeric labels: discrete Laplace noise on the clipped value",
    "alibi": "Laplace noise on the one-hot label, trained on as Bayesian soft labels",
    "vlp": "vector label privacy: each label a random binary vector, trained on by the forward loss",
    "marginals": "a logistic regression over public feature bins, fitted from one release of noisy label marginals "
    "(noise on counts, not on each label: for rare positives and small budgets)",
    "pate": "teachers on disjoint parts of the data vote, noisily, on a student's queries",
    "dp-sgd": "the full-DP baseline (inputs and labels private)",
}
#: the neighbouring relations a method's ledger may be kept under (dp_accounting's names)
RELATIONS = ("REPLACE_ONE", "ADD_OR_REMOVE_ONE")
#: how ``labeldp tune`` tunes a method: on the releases its candidates share, or by private selection
TUNINGS = ("release", "private-selection")


@dataclass(frozen=True)
class Method:
    """One training method.

    It declares what it needs and brings ``check``, which refuses a configuration before anything is
    written or released, and ``run``, which releases through its
    :class:`~labeldp.methods.protocol.MethodContext`, trains and returns the model with the summary's facts.

    Parameters
    ----------
    name, help : str
        Its name (``--method``) and one line of help.
    run : callable
        ``run(context) -> (model, facts)``.
    uses : frozenset of str
        The method-specific options of :class:`~labeldp.config.run_config.RunConfig` it reads (a non-default
        value of one it does not use is refused).
    options : mapping
        Options of its own, by name (:class:`~labeldp.options.Option`), none of them an option of ``RunConfig``:
        ``labeldp train`` takes their flags (``--name``), and the method reads their values in
        ``config.method_options``.
    private, gaussian : bool
        Private methods take an epsilon; Gaussian ones also a delta (their noise gives (epsilon, delta)-DP).
    stages : int or None
        The number of stages it trains (None: two or more); ``default_stages`` their default fractions.
    relation : str
        The ledger's neighbouring relation: ``REPLACE_ONE`` (label DP) or ``ADD_OR_REMOVE_ONE`` (DP-SGD).
    check, plan : callable, optional
        ``check(config)`` refuses a configuration the method cannot honour, ``plan(config, data)`` one it
        cannot run on the data (both before anything is written).
    independent_of : mapping
        For each of its releases, the options that release does not depend on: an unfinished run may
        continue from it when only those changed.
    training_releases : bool
        Whether its training steps are themselves releases (DP-SGD): checkpoints and metrics are then
        part of the record.
    per_example : bool
        Whether it trains on per-example gradients, so its default network must not mix a batch's examples.
    default_prior : str
        The stage-1 prior when none is named.
    releases : callable, optional
        ``releases(config)``: the names of a run's releases, for ``labeldp tune`` to check before any
        spend that none depends on the options it tries; None: not declared.
    first_stage_options : tuple of str
        Options that act on the first stage's model only through its training, after its release: where a
        later release depends on them, ``labeldp tune`` chooses them on the first release alone.
    tuning : str or None
        ``release`` (candidates share its releases), ``private-selection`` (its training is its release:
        DP-SGD), or None (``untunable`` says why).
    model_from_state : callable, optional
        ``model_from_state(state_dict) -> nn.Module``, for a method whose model's shape is fitted rather
        than named (``marginals``' bins); None: built by name and the state loaded into it.
    planned : callable, optional
        ``planned(config, examples, guarantee) -> Guarantee``: the most a run may spend where its releases are
        no label releases (DP-SGD's steps, accounted under replace-one); None: ``guarantee``, its epsilon.
    on_data : callable, optional
        ``on_data(config, num_classes) -> (options, line)``: the options it resolves on the data (lp-2st's
        first release), as ``config.json`` records them, and a line for the console where it chose (or None).
    """

    name: str
    help: str
    run: Callable[[Any], tuple[Any, dict[str, Any]]]
    uses: frozenset[str] = frozenset()
    options: Mapping[str, Option] = field(default_factory=dict)
    private: bool = True
    gaussian: bool = False
    stages: int | None = 1
    default_stages: tuple[float, ...] = (1.0,)
    relation: str = "REPLACE_ONE"
    check: Callable[[Any], None] | None = None
    plan: Callable[[Any, Any], None] | None = None
    independent_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    training_releases: bool = False
    per_example: bool = False
    default_prior: str = "uniform"
    releases: Callable[[Any], tuple[str, ...]] | None = None
    first_stage_options: tuple[str, ...] = ()
    tuning: str | None = "release"
    untunable: str = ""
    model_from_state: Callable[[Any], Any] | None = None
    planned: Callable[[Any, int, Any], Any] | None = None
    on_data: Callable[[Any, int], tuple[dict[str, Any], str | None]] | None = None

    def __post_init__(self) -> None:
        if ("delta" in self.uses) != self.gaussian:
            raise ConfigError(f"method {self.name!r}: a gaussian method uses delta, and only it")
        if self.relation == "ADD_OR_REMOVE_ONE" and self.private and self.planned is None:
            raise ConfigError(
                f"method {self.name!r}: a guarantee for examples added or removed needs `planned`, what a run "
                "spends under replace-one (the people's ledgers' relation), reserved before its first draw"
            )
        if self.relation not in RELATIONS:
            raise ConfigError(f"method {self.name!r}: the relation must be one of {RELATIONS}, got {self.relation!r}")
        if self.tuning is not None and self.tuning not in TUNINGS:
            raise ConfigError(f"method {self.name!r}: tuning must be one of {TUNINGS} or None, got {self.tuning!r}")

    @property
    def neighboring_relation(self) -> Any:
        """The relation as dp_accounting's ``NeighboringRelation``."""
        import dp_accounting

        return dp_accounting.NeighboringRelation[self.relation]

    @property
    def protects_examples(self) -> bool:
        """Whether its guarantee is for whole examples added or removed (DP-SGD), not labels replaced."""
        return self.relation == "ADD_OR_REMOVE_ONE"


_REGISTRY: dict[str, Method] = {}


def register_method(method: Method, *aliases: str) -> Method:
    """Add ``method`` under its name and ``aliases``; a name registered twice is a ConfigError."""
    names = (method.name, *aliases)
    for name in names:  # labeldp's own names are taken before their module is imported
        if name in BUILTIN_METHODS and name not in _REGISTRY:
            importlib.import_module(f"labeldp.methods.{BUILTIN_METHODS[name]}")  # (itself: no-op)
    taken = [name for name in names if name in _REGISTRY]
    if taken or len(set(names)) != len(names):
        raise ConfigError(f"method {(taken or names)[0]!r} is already registered")  # nothing registered
    for name, spec in method.options.items():  # one flag a name: two declarations of it would clash
        other = registered_options().get(name)
        if other is not None and other[1] is not spec:
            raise ConfigError(f"method {method.name!r}: option {name!r} is method {other[0]!r}'s")
    for name in names:
        _REGISTRY[name] = method
    return method


def methods_help() -> str:
    """``--method``'s help: each of labeldp's own methods with its line (imports none of them)."""
    return "; ".join(f"{name}: {line}" for name, line in BUILTIN_HELP.items())


def method_names() -> tuple[str, ...]:
    """Every method's name, aliases included: labeldp's own (not imported), then those registered since."""
    return tuple(BUILTIN_METHODS) + tuple(name for name in _REGISTRY if name not in BUILTIN_METHODS)


def get_method(name: str) -> Method:
    """The method registered as ``name`` (labeldp's own imported on first use)."""
    if name not in _REGISTRY and name in BUILTIN_METHODS:
        importlib.import_module(f"labeldp.methods.{BUILTIN_METHODS[name]}")
    if name not in _REGISTRY:
        raise ConfigError(f"unknown method {name!r}; choose one of {', '.join(method_names())}")
    return _REGISTRY[name]


def registered_options() -> dict[str, tuple[str, Option]]:
    """The options the methods registered so far declare of their own: name -> (method, declaration).

    labeldp's own methods, imported on first use only (so that ``--help`` imports no torch), declare none.
    """
    return {name: (method.name, spec) for method in _REGISTRY.values() for name, spec in method.options.items()}


def methods_using(option: str) -> tuple[str, ...]:
    """The names of the methods whose ``uses`` holds ``option``, in :func:`method_names`'s order (imports them all)."""
    return tuple(name for name in method_names() if option in get_method(name).uses)


__all__ = [
    "BUILTIN_HELP",
    "BUILTIN_METHODS",
    "Method",
    "RELATIONS",
    "TUNINGS",
    "get_method",
    "method_names",
    "methods_help",
    "methods_using",
    "registered_options",
    "register_method",
]
