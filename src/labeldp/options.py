"""Configuration fields that carry their own command-line help: each default is stated once, in its
dataclass, and the ``labeldp`` flags are generated from the fields (after nanoGPT's configurator).

A field declared with :func:`option` gets ``--its-name`` (``flag`` renames it), a type from its
annotation and its help; a boolean defaulting to True becomes ``--no-its-name``; a nested settings
dataclass becomes an argument group.
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable
from typing import Any

_MISSING = dataclasses.MISSING


def option(
    default: Any = _MISSING,
    *,
    help: str,
    flag: str | None = None,
    choices: Iterable[str] | Callable[[], Iterable[str]] | None = None,
    metavar: str | None = None,
    default_factory: Any = _MISSING,
    method_specific: bool = False,
) -> Any:
    """A dataclass field with its command-line help.

    Parameters
    ----------
    choices : iterable or callable, optional
        The allowed values, or a function returning them when the parser is built (so a registry
        filled on import can supply them).
    default_factory : callable, optional
        For a mutable default (a nested settings dataclass).
    method_specific : bool
        An option only some methods use (named in ``Method.uses``): with another method, a value other
        than the default is refused rather than ignored.
    """
    metadata = {"help": help, "flag": flag, "choices": choices, "metavar": metavar, "method_specific": method_specific}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def annotation_type(annotation: str) -> tuple[type, bool]:
    """(element type, is a tuple) of a string annotation such as ``"tuple[str, ...] | None"``.

    The element type is float, int or str; an annotation with no command-line type (``bool`` is a
    switch, a dataclass a group) is a TypeError.
    """
    text = annotation.replace(" ", "")
    for name, python_type in (("float", float), ("int", int), ("str", str)):
        if text.startswith(f"tuple[{name},") or text.startswith(f"{name}|") or text == name:
            return python_type, text.startswith("tuple[")
    raise TypeError(f"no command-line type for annotation {annotation!r}")


def _help(field: dataclasses.Field, default: Any) -> str:
    text = field.metadata["help"]
    shown = default is not None and not isinstance(default, (bool, tuple)) and "%(default)" not in text
    return text.replace("%", "%%") + (f" (default {default})" if shown else "")


def add_dataclass_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    groups: dict[str, tuple[str, str]] | None = None,
) -> None:
    """Add a flag for every :func:`option` field of dataclass ``cls``; a nested dataclass becomes a group.

    ``groups`` gives a group's (title, description) by field name. An untyped flag sets nothing
    (``argparse.SUPPRESS``), so the namespace holds exactly what was typed (:func:`typed_options`) and
    :func:`dataclass_from_args` takes the rest from the dataclass's defaults. The help shows each default.
    """
    groups = groups or {}
    defaults = cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if dataclasses.is_dataclass(default):
            title, description = groups.get(field.name, (field.name, None))
            add_dataclass_arguments(parser.add_argument_group(title, description), type(default))
            continue
        if "help" not in field.metadata:
            continue
        meta = field.metadata
        flag = meta["flag"] or f"--{'no-' if default is True else ''}{field.name.replace('_', '-')}"
        kwargs: dict[str, Any] = {"dest": field.name, "help": _help(field, default), "default": argparse.SUPPRESS}
        if isinstance(default, bool):
            kwargs.update(action="store_false" if default else "store_true")
        else:
            element, is_tuple = annotation_type(str(field.type))
            choices = meta["choices"]() if callable(meta["choices"]) else meta["choices"]
            metavar = meta["metavar"] or (meta["flag"].lstrip("-").replace("-", "_").upper() if meta["flag"] else None)
            kwargs.update(type=element, choices=choices, metavar=metavar)
            if is_tuple:
                kwargs.update(nargs="+")
        parser.add_argument(flag, **kwargs)


def flag_of(cls: type, name: str) -> str:
    """The flag of field ``name`` of ``cls`` or of a dataclass it nests (KeyError if none).

    ``--no-augment`` for a switch that defaults to True.
    """
    defaults = cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if dataclasses.is_dataclass(default):
            try:
                return flag_of(type(default), name)
            except KeyError:
                continue
        if field.name == name:
            return field.metadata.get("flag") or f"--{'no-' if default is True else ''}{name.replace('_', '-')}"
    raise KeyError(name)


def typed_options(args: argparse.Namespace, cls: type) -> set[str]:
    """The field names of ``cls`` (and of the settings it nests) that the user typed a flag for."""
    typed, defaults = set(), cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if dataclasses.is_dataclass(default):
            typed |= typed_options(args, type(default))
        elif "help" in field.metadata and hasattr(args, field.name):
            typed.add(field.name)
    return typed


def dataclass_from_args(cls: type, args: argparse.Namespace) -> Any:
    """An instance of ``cls`` from the flags of :func:`add_dataclass_arguments`: what was typed, else the defaults."""
    values, defaults = {}, cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if dataclasses.is_dataclass(default):
            values[field.name] = dataclass_from_args(type(default), args)
        elif "help" in field.metadata and hasattr(args, field.name):
            value = getattr(args, field.name)
            values[field.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)
