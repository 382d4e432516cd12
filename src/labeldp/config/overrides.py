"""``NAME=VALUE`` overrides of a run's configuration, parsed one way for the command line, sweeps and tunes.

A name is a field of :class:`~labeldp.config.run_config.RunConfig` or of one of its nested settings, with ``-`` or
``_``, or the field's own flag (``mixup``, ``vote-noise``). A value is typed by its field: numbers,
``true``/``false`` for a switch, ``none`` for an optional value left out, a tuple as ``0.3:0.7``."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from labeldp.config.run_config import RunConfig
from labeldp.errors import ConfigError
from labeldp.options import annotation_type

#: the settings nested in a RunConfig, by field name
SECTIONS = ("train", "dpsgd", "pate", "marginals")


def _fields() -> dict[str, tuple[str | None, dataclasses.Field]]:
    """Every overridable name (field names and flags) -> (its section, None for RunConfig's own; its field)."""
    defaults = RunConfig()
    found: dict[str, tuple[str | None, dataclasses.Field]] = {}
    for field in dataclasses.fields(RunConfig):
        if field.name in SECTIONS:
            for inner in dataclasses.fields(type(getattr(defaults, field.name))):
                found[inner.name] = (field.name, inner)
        else:
            found[field.name] = (None, field)
    for section, field in list(found.values()):
        flag = field.metadata.get("flag")
        if flag:
            found.setdefault(flag.lstrip("-").replace("-", "_"), (section, field))
    return found


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
    section, field = fields[key]
    return section, field.name


def parse_value(name: str, text: str) -> Any:
    """The value of option ``name`` written as ``text`` (as the module says), typed by its field; ConfigError
    if it is not one."""
    section, field_name = resolve_name(name)
    field = next(
        f
        for f in dataclasses.fields(RunConfig if section is None else type(getattr(RunConfig(), section)))
        if f.name == field_name
    )
    annotation = str(field.type)
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
    for name, value in overrides.items():
        section, field_name = resolve_name(name)
        value = parse_value(name, value) if isinstance(value, str) else value
        (top if section is None else nested[section])[field_name] = value
    sections = {
        section: dataclasses.replace(getattr(config, section), **values) for section, values in nested.items() if values
    }
    try:
        return dataclasses.replace(config, **top, **sections)
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
