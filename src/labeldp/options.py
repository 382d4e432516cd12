"""Configuration fields that carry their own command-line help: each default is stated once, in its
dataclass, and the ``labeldp`` flags are generated from the fields (in the manner of nanoGPT's
configurator).

A field declared with :func:`option` gets ``--its-name`` (``flag`` renames it), a type from its
annotation, and the help text; a boolean that defaults to True becomes ``--no-its-name``. Nested
configuration dataclasses (the training, DP-SGD and PATE settings) become argument groups.
"""

from __future__ import annotations

import argparse
import dataclasses
from typing import Any, Callable, Iterable

_MISSING = dataclasses.MISSING


def option(default: Any = _MISSING, *, help: str, flag: str | None = None,
           choices: Iterable[str] | Callable[[], Iterable[str]] | None = None, metavar: str | None = None,
           default_factory: Any = _MISSING) -> Any:
    """A dataclass field with its command-line help. ``choices`` may be a function, called when the
    parser is built (so that a registry filled on import can supply them)."""
    metadata = {"help": help, "flag": flag, "choices": choices, "metavar": metavar}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def annotation_type(annotation: str) -> tuple[type, bool]:
    """(element type, is a tuple) of an annotation written as a string (postponed annotations)."""
    text = annotation.replace(" ", "")
    for name, python_type in (("float", float), ("int", int), ("str", str)):
        if text.startswith(f"tuple[{name},") or text.startswith(f"{name}|") or text == name:
            return python_type, text.startswith("tuple[")
    raise TypeError(f"no command-line type for annotation {annotation!r}")


def _help(field: dataclasses.Field, default: Any) -> str:
    text = field.metadata["help"]
    shown = default is not None and not isinstance(default, (bool, tuple)) and "%(default)" not in text
    return text.replace("%", "%%") + (f" (default {default})" if shown else "")


def add_dataclass_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type,
                            groups: dict[str, tuple[str, str]] | None = None) -> None:
    """Add a flag for every :func:`option` field of dataclass ``cls``; a field holding a dataclass
    becomes an argument group (``groups`` gives its title and description by field name)."""
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
        kwargs: dict[str, Any] = {"dest": field.name, "help": _help(field, default)}
        if isinstance(default, bool):
            kwargs.update(action="store_false" if default else "store_true")
        else:
            element, is_tuple = annotation_type(str(field.type))
            choices = meta["choices"]() if callable(meta["choices"]) else meta["choices"]
            metavar = meta["metavar"] or (meta["flag"].lstrip("-").replace("-", "_").upper() if meta["flag"] else None)
            kwargs.update(type=element, default=default, choices=choices, metavar=metavar)
            if is_tuple:
                kwargs.update(nargs="+")
        parser.add_argument(flag, **kwargs)


def dataclass_from_args(cls: type, args: argparse.Namespace) -> Any:
    """An instance of ``cls`` from the parsed flags of :func:`add_dataclass_arguments`."""
    values, defaults = {}, cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if dataclasses.is_dataclass(default):
            values[field.name] = dataclass_from_args(type(default), args)
        elif "help" in field.metadata and hasattr(args, field.name):
            value = getattr(args, field.name)
            values[field.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)
