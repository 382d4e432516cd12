"""``NAME=VALUE`` overrides of a run's configuration, parsed one way for the command line, sweeps and tunes.

A name is a field of :class:`~labeldp.config.run_config.RunConfig` or of one of its nested settings, with ``-`` or
``_``, the field's own flag (``mixup``, ``vote-noise``), or an option a registered method declares of its own
(``Method.options``). A value is typed by its declaration (:class:`~labeldp.options.Option`): numbers,
``true``/``false`` for a switch, ``none`` for an optional value left out, a tuple as ``0.3:0.7``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from labeldp.config.method_registry import registered_options
from labeldp.config.run_config import RunConfig
from labeldp.errors import ConfigError
from labeldp.options import Option, annotation_type, declaration_of

#: the settings nested in a RunConfig, by field name
SECTIONS = ("train", "dpsgd", "pate", "marginals")
#: the section of the options methods declare of their own
OWN = "method_options"


def _fields() -> dict[str, tuple[str | None, str, Option, str]]:
    """Every overridable name (field names and flags) -> (its section: None for RunConfig's own; its name; its
    declaration; its annotation)."""
    defaults = RunConfig()
    found: dict[str, tuple[str | None, str, Option, str]] = {}
    for field in dataclasses.fields(RunConfig):
        section = field.name if field.name in SECTIONS else None
        for each in dataclasses.fields(type(getattr(defaults, field.name))) if section else [field]:
            declaration = declaration_of(each)
            assert declaration is not None, f"{each.name} is an option"
            found[each.name] = (section, each.name, declaration, str(each.type))
    del found[OWN]
    for name, (_, declaration) in registered_options().items():
        switch = "bool" if isinstance(declaration.default, bool) else ""
        found.setdefault(name, (OWN, name, declaration, declaration.type or switch))
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
            f"unknown option {name!r}; use a field of the run, training, DP-SGD, PATE or marginals settings "
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
    level, unresolved: values given as objects are checked by ``resolved()``."""
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    own = dict(config.method_options)
    for name, value in overrides.items():
        section, field_name = resolve_name(name)
        value = parse_value(name, value) if isinstance(value, str) else value
        (top if section is None else own if section == OWN else nested[section])[field_name] = value
    sections = {
        section: dataclasses.replace(getattr(config, section), **values) for section, values in nested.items() if values
    }
    try:
        return dataclasses.replace(config, **top, **sections, method_options=own)
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
