"""The method registry: each training method is a small :class:`Method` registered under its name.

A method declares what it needs (an epsilon, a delta, how many stages, which of the options that only
some methods use) and brings two functions: ``check``, which refuses a configuration it cannot run
before anything is written or released, and ``run``, which releases through the run's context
(:class:`labeldp.runs.RunContext`), trains, and returns the final model with the facts for the
summary. Adding a method is one module that calls :func:`register_method`, plus its name in
:data:`BUILTIN_MODULES`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from labeldp.accounting.events import DPSGD_RELATION, NEIGHBORING_RELATION
from labeldp.errors import ConfigError

if TYPE_CHECKING:  # only for type hints: runs import this registry
    import dp_accounting
    from torch import nn

    from labeldp.data import LabeledDataset
    from labeldp.runs.config import RunConfig
    from labeldp.runs.context import RunContext

#: The RunConfig options that only some methods use. With a method that does not use one, a value
#: other than the default is refused rather than silently ignored, and a sweep's grid resets it.
METHOD_OPTIONS = ("temperature", "reuse_labels", "warm_start", "combine_priors", "loss", "prior", "secure_rng",
                  "insecure_noise_seed", "delta", "dpsgd", "pate")
#: The modules that register labeldp's own methods (under ``labeldp.methods``).
BUILTIN_MODULES = ("stages", "regression", "alibi", "pate", "dpsgd")


@dataclass(frozen=True)
class Method:
    """One training method.

    ``uses`` names the :data:`METHOD_OPTIONS` it reads. ``private`` methods take an epsilon,
    ``gaussian`` ones also a delta (their noise gives (epsilon, delta)-DP; they use ``delta``). ``stages`` is the number
    of stages it trains (None: two or more), ``default_stages`` the fractions of the training set
    they get by default. ``relation`` is the neighbouring relation its ledger is kept under.
    ``check(config)`` refuses a resolved configuration the method cannot honour, ``plan(config,
    data)`` one it cannot run on the data (both before anything is written). ``run(context)``
    trains and returns ``(model, facts)``. ``independent_of`` names, for each of its releases, the
    options (``train.lr``, ``model``, ...) that release does not depend on: an unfinished run may
    continue from it when only those changed. ``training_releases`` marks a method whose training
    steps are themselves releases (DP-SGD): its checkpoints and metrics are then part of the record.
    ``default_prior`` is the stage-1 prior it uses when none is named (``histogram`` for RR-on-bins).
    ``releases(config)`` names the releases a run of ``config`` makes (``labeldp tune`` checks with it,
    before any spend, that none of them depends on the options it tries); None: not declared.
    ``first_stage_options`` names the options (``train`` for all of its fields) that act on the first
    stage's model only through its training, after the first stage's release (named ``stage1``): where
    a later release depends on them (drawn with that model as its prior), ``labeldp tune`` chooses them
    on the first stage's release alone, before any later release is drawn.
    """

    name: str
    help: str
    run: Callable[[RunContext], tuple[nn.Module, dict[str, Any]]]
    uses: frozenset[str] = frozenset()
    private: bool = True
    gaussian: bool = False
    stages: int | None = 1
    default_stages: tuple[float, ...] = (1.0,)
    relation: dp_accounting.NeighboringRelation = NEIGHBORING_RELATION
    check: Callable[[RunConfig], None] | None = None
    plan: Callable[[RunConfig, LabeledDataset], None] | None = None
    independent_of: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    training_releases: bool = False
    default_prior: str = "uniform"
    releases: Callable[[RunConfig], tuple[str, ...]] | None = None
    first_stage_options: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = set(self.uses) - set(METHOD_OPTIONS)
        if unknown:
            raise ConfigError(f"method {self.name!r} uses unknown options {sorted(unknown)}; known: {METHOD_OPTIONS}")
        if ("delta" in self.uses) != self.gaussian:
            raise ConfigError(f"method {self.name!r}: a gaussian method uses delta, and only it")
        if self.relation not in (NEIGHBORING_RELATION, DPSGD_RELATION):
            raise ConfigError(f"method {self.name!r}: unsupported neighbouring relation {self.relation!r}")


_REGISTRY: dict[str, Method] = {}


def register_method(method: Method, *aliases: str) -> Method:
    """Add ``method`` under its name (and ``aliases``); a name registered twice is an error."""
    for name in (method.name, *aliases):
        if name in _REGISTRY:
            raise ConfigError(f"method {name!r} is already registered")
        _REGISTRY[name] = method
    return method


def _load_builtin() -> None:
    for module in BUILTIN_MODULES:
        importlib.import_module(f"labeldp.methods.{module}")


def method_names() -> tuple[str, ...]:
    """Every registered name, aliases included, in registration order."""
    _load_builtin()
    return tuple(_REGISTRY)


def get_method(name: str) -> Method:
    _load_builtin()
    if name not in _REGISTRY:
        raise ConfigError(f"unknown method {name!r}; choose one of {', '.join(_REGISTRY)}")
    return _REGISTRY[name]


def methods_using(option: str) -> tuple[str, ...]:
    """The names of the methods that use ``option`` (one of :data:`METHOD_OPTIONS`)."""
    return tuple(name for name in method_names() if option in _REGISTRY[name].uses)
