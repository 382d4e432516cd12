"""A registry of named, versioned recipes ("profiles"), looked up by keys like ``mnist/e2/lp-2st/run0``.

A profile is a :class:`~labeldp.config.run_config.RunConfig` under a key. Built-in profiles live in
:mod:`labeldp.recipes.builtin_profiles`; a user adds their own in one small Python file that calls
:func:`register` and passes it with ``--recipes FILE`` (or imports it before using the registry).
"""

from __future__ import annotations

import difflib
import functools
import importlib
import importlib.util
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from labeldp.config.run_config import RunConfig
from labeldp.errors import ConfigError, MissingFileError

_REGISTRY: dict[str, Profile] = {}
_LOADED_RECIPES: set[Path] = set()


@dataclass(frozen=True)
class Profile:
    """A recipe: ``config`` under ``key``; bump ``version`` when the recipe changes its results."""

    key: str
    config: RunConfig
    version: int = 1
    description: str = ""


def register(key: str, config: RunConfig, *, version: int = 1, description: str = "") -> Profile:
    """Add a profile: ``key`` is slash-separated words of letters, digits, ``_``, ``.``, ``+`` and ``-``, and
    ``config`` is checked here (:meth:`~labeldp.config.run_config.RunConfig.resolved`) but kept as given.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``key`` is malformed or registered already, or ``config`` does not resolve.
    """
    if not re.fullmatch(r"[A-Za-z0-9_.+-]+(/[A-Za-z0-9_.+-]+)*", key):
        raise ConfigError(f"profile key {key!r} must be slash-separated words of letters, digits, _ . + -")
    if key in _REGISTRY:
        raise ConfigError(f"profile {key!r} is already registered")
    config.resolved()  # refuse a broken recipe when it is registered, not when it runs
    profile = Profile(key, config, version, description)
    _REGISTRY[key] = profile
    return profile


def get_profile(key: str) -> Profile:
    """The profile registered under ``key``; a ConfigError suggests close keys."""
    _load_builtin()
    if key not in _REGISTRY:
        close = difflib.get_close_matches(key, list(_REGISTRY), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else "; see `labeldp profiles`"
        raise ConfigError(
            f"unknown profile {key!r}{hint} (a profile of your own is registered by a file passed with --recipes FILE)"
        )
    return _REGISTRY[key]


def list_profiles(pattern: str | None = None) -> list[Profile]:
    """The profiles whose key starts with a match of the regular expression ``pattern`` (``mnist/`` does not
    match ``fashion-mnist/...``), sorted by key; None: all."""
    _load_builtin()
    try:
        regex = re.compile(pattern or "")
    except re.error as error:
        raise ConfigError(f"invalid profile pattern {pattern!r}: {error}") from None
    return [p for key, p in sorted(_REGISTRY.items()) if regex.match(key)]


def load_recipes(path: str | Path) -> None:
    """Execute a user's recipe file, which registers profiles with :func:`register`; once per process, as an
    import is."""
    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"recipe file {path} does not exist")
    if path.resolve() in _LOADED_RECIPES:
        return
    spec = importlib.util.spec_from_file_location(f"labeldp_user_recipes_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"recipe file {path} is not a Python file (.py) that Python can execute")
    _LOADED_RECIPES.add(path.resolve())
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # as an import does: a dataclass of the file (a method's options) needs it
    spec.loader.exec_module(module)


def loaded_recipes() -> tuple[Path, ...]:
    """The recipe files this process has executed, resolved and sorted (a sweep's workers execute them too)."""
    return tuple(sorted(_LOADED_RECIPES))


@functools.cache  # once per process, as an import is
def _load_builtin() -> None:
    for key, config, description in importlib.import_module("labeldp.recipes.builtin_profiles").PROFILES:
        register(key, config, description=description)
