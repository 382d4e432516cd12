"""The method registry: each training method is a :class:`Method` registered under its name.

labeldp's own methods are listed by name with the module that registers them
(:data:`BUILTIN_METHODS`), imported on first look-up. Register your own with :func:`register_method`
in a module you import (or a ``--recipes`` file).
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labeldp.config.dpsgd import DPSGDConfig
from labeldp.config.marginals_config import MarginalsConfig
from labeldp.config.method_options import (
    CellCountsOptions,
    LabelOptions,
    LossOptions,
    MultiStageOptions,
    NoOptions,
    StageOptions,
)
from labeldp.config.pate_config import PATEConfig
from labeldp.errors import ConfigError
from labeldp.options import Option, declaration_of

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
#: labeldp's own methods' options (``Method.options``), known without importing the methods
BUILTIN_OPTIONS: dict[str, type] = {
    "non-private": LossOptions,
    "lp-1st": LabelOptions,
    "rr": LabelOptions,
    "lp-2st": StageOptions,
    "lp-mst": StageOptions,
    "lp-2st-counts": CellCountsOptions,
    "rr-on-bins": LossOptions,
    "rr-on-bins-mst": MultiStageOptions,
    "laplace-regression": LossOptions,
    "alibi": NoOptions,
    "vlp": NoOptions,
    "marginals": MarginalsConfig,
    "pate": PATEConfig,
    "dp-sgd": DPSGDConfig,
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
    options : type
        Its options: a frozen dataclass whose fields are declared with :func:`~labeldp.options.option` (their
        ``free_of``: the releases each never changes, by name: a class of labeldp's reused takes its names
        along), none of them a setting of every run. ``labeldp train`` takes their flags, and the method reads
        their values in ``config.options``; a ``validate()`` method, if it has one, refuses values it cannot run
        with. labeldp's own are :data:`BUILTIN_OPTIONS`'.
    private, gaussian : bool
        Private methods take an epsilon and draw noise; Gaussian ones also a delta (their noise gives
        (epsilon, delta)-DP).
    takes_prior : bool
        Whether it releases by RR-with-prior, so that ``prior`` applies.
    stages : int or None
        The number of stages it trains (None: two or more); ``default_stages`` their default fractions.
    relation : str
        The ledger's neighbouring relation: ``REPLACE_ONE`` (label DP) or ``ADD_OR_REMOVE_ONE`` (DP-SGD).
    check, plan : callable, optional
        ``check(config)`` refuses a configuration the method cannot honour, ``plan(config, data)`` one it
        cannot run on the data (both before anything is written).
    independent_of : mapping
        For each of its releases, the settings (and options) that release does not depend on besides its
        options' own ``free_of`` (:meth:`independent`).
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
    options: type = None  # type: ignore[assignment]  # labeldp's own: BUILTIN_OPTIONS'; else NoOptions
    private: bool = True
    gaussian: bool = False
    takes_prior: bool = False
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
        if self.options is None:
            object.__setattr__(self, "options", BUILTIN_OPTIONS.get(self.name, NoOptions))
        if not (dataclasses.is_dataclass(self.options) and self.options.__dataclass_params__.frozen):  # type: ignore[attr-defined]
            raise ConfigError(f"method {self.name!r}: its options must be a frozen dataclass, got {self.options!r}")
        if self.relation == "ADD_OR_REMOVE_ONE" and self.private and self.planned is None:
            raise ConfigError(
                f"method {self.name!r}: a guarantee for examples added or removed needs `planned`, what a run "
                "spends under replace-one (the people's ledgers' relation), reserved before its first draw"
            )
        if self.relation not in RELATIONS:
            raise ConfigError(f"method {self.name!r}: the relation must be one of {RELATIONS}, got {self.relation!r}")
        if self.tuning is not None and self.tuning not in TUNINGS:
            raise ConfigError(f"method {self.name!r}: tuning must be one of {TUNINGS} or None, got {self.tuning!r}")

    def independent(self, release: str) -> tuple[str, ...]:
        """The settings and options release ``release`` does not depend on (``train.lr`` names a nested field):
        an unfinished run may continue from it when only those changed, and tune candidates share it."""
        own = tuple(f.name for f in dataclasses.fields(self.options) if release in f.metadata.get("free_of", ()))
        return tuple(self.independent_of.get(release, ())) + own

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
    known = option_declarations()
    for each in dataclasses.fields(method.options):  # one flag a name: two declarations of it would clash
        declaration = declaration_of(each)
        if declaration is None:
            raise ConfigError(f"method {method.name!r}: option {each.name!r} must be declared with option()")
        if each.name in known and known[each.name] is not declaration:
            raise ConfigError(f"method {method.name!r}: option {each.name!r} is another method's")
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


def options_class(method: str) -> type | None:
    """The options dataclass of ``method`` (labeldp's own without importing it); None for an unknown name."""
    return BUILTIN_OPTIONS.get(method) or (_REGISTRY[method].options if method in _REGISTRY else None)


def option_fields() -> dict[str, tuple[tuple[str, ...], dataclasses.Field]]:
    """Every method's option (labeldp's own and those registered so far): name -> (the methods that take it,
    its field), in :func:`method_names`'s order. Imports no method."""
    found: dict[str, tuple[tuple[str, ...], dataclasses.Field]] = {}
    for name in method_names():
        for each in dataclasses.fields(options_class(name)):  # type: ignore[arg-type]  # a registered name
            methods = found[each.name][0] if each.name in found else ()
            found[each.name] = ((*methods, name), found[each.name][1] if each.name in found else each)
    return found


def option_declarations() -> dict[str, Option]:
    """Every method's option's declaration, by name (:func:`option_fields`)."""
    return {name: declaration_of(each) for name, (_, each) in option_fields().items()}  # type: ignore[misc]


def options_of(method: str, given: Any = None) -> Any:
    """``method``'s options from ``given``: its options object; a mapping of option names to values (the others
    at their defaults); None (the defaults); or another method's options, whose changed values it takes
    (``dataclasses.replace`` of a configuration's method). ``given`` as it is for an unknown method.

    Raises
    ------
    labeldp.errors.ConfigError
        For an option the method does not take given a value other than its default (a user who sets one
        expects it to act), or an option no method has.
    """
    cls = options_class(method)
    if cls is None or type(given) is cls:  # (a subclass, another method's, may hold options this one lacks)
        return given
    if given is None:
        return cls()
    if dataclasses.is_dataclass(given):  # another method's: what was changed from its defaults
        given = {f.name: value for f in dataclasses.fields(given) if (value := getattr(given, f.name)) != f.default}
    takes, known = {f.name for f in dataclasses.fields(cls)}, option_fields()
    unknown = sorted(name for name in given if name not in known)
    if unknown:
        own = f"; its own are {', '.join(takes)}" if takes else ""
        raise ConfigError(f"method {method!r} has no option {', '.join(unknown)}{own}")
    unused = [name for name, value in given.items() if name not in takes and value != known[name][1].default]
    if unused:
        them = "it" if len(unused) == 1 else "them"
        raise ConfigError(f"method {method!r} does not use {', '.join(unused)}; leave {them} at the default")
    return cls(**{name: tuple(v) if isinstance(v, list) else v for name, v in given.items() if name in takes})


def check_options(options: Any) -> None:
    """Refuse (:class:`~labeldp.errors.ConfigError`) a method's option outside its choices, or what its options'
    own ``validate()`` refuses."""
    if hasattr(options, "validate"):
        options.validate()
    for each in dataclasses.fields(options):
        choices, value = declaration_of(each).choices, getattr(options, each.name)  # type: ignore[union-attr]
        choices = tuple(choices() if callable(choices) else choices or ())
        if choices and value not in choices:
            raise ConfigError(f"{each.name} must be one of {choices}, got {value!r}")


__all__ = [
    "BUILTIN_HELP",
    "BUILTIN_METHODS",
    "BUILTIN_OPTIONS",
    "Method",
    "RELATIONS",
    "TUNINGS",
    "check_options",
    "get_method",
    "method_names",
    "methods_help",
    "option_declarations",
    "option_fields",
    "options_class",
    "options_of",
    "register_method",
]
