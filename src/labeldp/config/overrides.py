"""``NAME=VALUE`` overrides of a run's configuration, parsed one way for the command line, sweeps and tunes.

A name is a field of :class:`~labeldp.config.run_config.RunConfig`, of its training settings or of a method's
options (``Method.options``), with ``-`` or ``_``, or the field's own flag (``mixup``, ``vote-noise``). A value is
typed by its declaration (:class:`~labeldp.options.Option`): numbers, ``true``/``false`` for a switch, ``none``
for an optional value left out, a tuple as ``0.3:0.7``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from labeldp.config.method_registry import option_fields
from labeldp.config.run_config import RunConfig
from labeldp.config.train_config import TrainConfig
from labeldp.errors import ConfigError
from labeldp.options import Option, annotation_type, declaration_of

#: where an override's value goes besides RunConfig's own fields: its training settings, the method's options
SECTIONS = ("train", "options")


def _fields() -> dict[str, tuple[str | None, str, Option, str]]:
    """Every overridable name (field names and flags) -> (its section: None for RunConfig's own; its name; its
    declaration; its annotation)."""
    shared = [(None, f) for f in dataclasses.fields(RunConfig) if f.name not in SECTIONS]
    own = [("options", each) for _, each in option_fields().values()]
    found: dict[str, tuple[str | None, str, Option, str]] = {}
    for section, each in [*shared, *(("train", f) for f in dataclasses.fields(TrainConfig)), *own]:
        declaration = declaration_of(each)
        assert declaration is not None, f"{each.name} is an option"
        found.setdefault(each.name, (section, each.name, declaration, str(each.type)))
    for section, name, declaration, annotation in list(found.values()):
        if declaration.flag:
            found.setdefault(declaration.flag.lstrip("-").replace("-", "_"), (section, name, declaration, annotation))
    return found


def override_names() -> list[str]:
    """Every name an override or a grid may give, longest first."""
    return sorted(_fields(), key=len, reverse=True)


def resolve_name(name: str) -> tuple[str | None, str]:
    """``(section, field)`` of an override's name (``lr`` -> ``("train", "lr")``, ``epsilon`` -> ``(None,
    "epsilon")``); :class:`~labeldp.errors.ConfigError` for a name that is no option."""
    fields = _fields()
    key = name.replace("-", "_")
    if key not in fields:
        raise ConfigError(
            f"unknown option {name!r}; use a setting of the run, of its training or of a method's options "
            "(e.g. epsilon, lr, epochs, max-grad-norm)"
        )
    return fields[key][:2]


def parse_value(name: str, text: str) -> Any:
    """The value of option ``name`` written as ``text`` (as the module says), typed by its field; ConfigError
    if it is not one."""
    resolve_name(name)  # refuses an unknown name
    annotation = _fields()[name.replace("-", "_")][3]
    if annotation == "bool":
        if text.lower() not in ("true", "false", "1", "0", "yes", "no"):
            raise ConfigError(f"{name}={text!r} is not a boolean (true or false)")
        return text.lower() in ("true", "1", "yes")
    if "None" in annotation and text.lower() == "none":
        return None
    element, is_tuple = annotation_type(annotation)
    try:
        return tuple(element(v) for v in text.split(":")) if is_tuple else element(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r} is not of type {element.__name__}") from None


def apply_overrides(config: RunConfig, overrides: Mapping[str, Any]) -> RunConfig:
    """``config`` with ``overrides`` (name -> value, or its text for :func:`parse_value`) applied at their
    level, unresolved: values given as objects are checked by ``resolved()``, the method's options by
    :func:`~labeldp.config.method_registry.options_of` (one it does not use is refused)."""
    values: dict[str | None, dict[str, Any]] = {None: {}, "train": {}, "options": {}}
    for name, value in overrides.items():
        section, field_name = resolve_name(name)
        values[section][field_name] = parse_value(name, value) if isinstance(value, str) else value
    options = values["options"]
    if options:  # the options kept from config, with the overrides over them, for the method the overrides name
        kept = config.options
        options = {f.name: getattr(kept, f.name) for f in dataclasses.fields(kept)} | options
    changed: dict[str, Any] = {**values[None], "train": dataclasses.replace(config.train, **values["train"])}
    if options:
        changed["options"] = options
    try:
        return dataclasses.replace(config, **changed)
    except TypeError as error:
        raise ConfigError(str(error)) from None


def parse_assignments(items: Iterable[str]) -> dict[str, list[str]]:
    """``NAME=V1,V2`` items as ``{name: [values]}``, names checked and written with ``_`` (a later item
    replaces an earlier one of the same name)."""
    grid: dict[str, list[str]] = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not values or "" in values.split(","):
            raise ConfigError(f"{item!r} must look like name=value1,value2 (no empty value)")
        resolve_name(name)
        grid[name.replace("-", "_")] = values.split(",")
    return grid


__all__ = ["SECTIONS", "apply_overrides", "parse_assignments", "parse_value", "resolve_name"]
