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
    default : object
        The default value, stated here once.
    help : str
        The help text of its flag.
    flag : str, optional
        The flag, when not ``--its-name``.
    choices : iterable or callable, optional
        The allowed values, or a function returning them, called when the parser is built (so that a
        registry filled on import can supply them).
    metavar : str, optional
        The flag's metavar.
    default_factory : callable, optional
        For a mutable default (a nested settings dataclass).
    method_specific : bool
        An option that only some methods use (they name it in ``Method.uses``): with a method that
        does not, a value other than the default is refused rather than ignored.

    Returns
    -------
    dataclasses.Field
        The field.
    """
    metadata = {"help": help, "flag": flag, "choices": choices, "metavar": metavar, "method_specific": method_specific}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def annotation_type(annotation: str) -> tuple[type, bool]:
    """(element type, is a tuple) of an annotation written as a string (postponed annotations).

    Parameters
    ----------
    annotation : str
        A field's annotation, e.g. ``"float | None"`` or ``"tuple[str, ...] | None"``.

    Returns
    -------
    element : type
        ``float``, ``int`` or ``str``: the type of the value, or of each element of a tuple.
    is_tuple : bool
        Whether the annotation is a tuple.

    Raises
    ------
    TypeError
        For an annotation with no command-line type (e.g. ``bool``, which is a switch, or a dataclass).
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
    """Add a flag for every :func:`option` field of dataclass ``cls``; a field holding a dataclass
    becomes an argument group (``groups`` gives its title and description by field name).

    A flag the user does not type sets nothing (``argparse.SUPPRESS``): the parsed namespace holds
    exactly what was typed (:func:`typed_options`), and :func:`dataclass_from_args` fills in the rest
    from the dataclass's defaults, stated once in its fields. The help shows each default.

    Parameters
    ----------
    parser : argparse.ArgumentParser or argparse._ArgumentGroup
        Where the flags are added.
    cls : type
        A dataclass whose fields are declared with :func:`option` (it must build with no arguments).
    groups : dict or None, optional
        Field name -> (title, description) of the argument group of a nested settings dataclass
        (default: the field's name as the title, no description).
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
    """The command-line flag of field ``name`` of dataclass ``cls`` (or of a settings dataclass it nests),
    as :func:`add_dataclass_arguments` names it (``--no-augment`` for a switch that defaults to True).

    Parameters
    ----------
    cls : type
        A dataclass whose fields are declared with :func:`option`.
    name : str
        A field's name.

    Returns
    -------
    str
        The flag, e.g. ``"--epsilon"``.

    Raises
    ------
    KeyError
        If neither ``cls`` nor a settings dataclass it nests has a field ``name``.
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
    """The fields of dataclass ``cls`` (and of the settings it nests) that the user typed a flag for.

    Parameters
    ----------
    args : argparse.Namespace
        What :func:`add_dataclass_arguments`' flags parsed.
    cls : type
        The dataclass.

    Returns
    -------
    set of str
        Field names (a nested setting's fields by their own names).
    """
    typed, defaults = set(), cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if dataclasses.is_dataclass(default):
            typed |= typed_options(args, type(default))
        elif "help" in field.metadata and hasattr(args, field.name):
            typed.add(field.name)
    return typed


def dataclass_from_args(cls: type, args: argparse.Namespace) -> Any:
    """An instance of ``cls`` from the parsed flags of :func:`add_dataclass_arguments`: what was typed,
    the defaults for the rest.

    Parameters
    ----------
    cls : type
        The dataclass the flags were added for.
    args : argparse.Namespace
        The parsed flags.

    Returns
    -------
    object
        An instance of ``cls`` (nested settings built the same way); a tuple option's list becomes a tuple.
    """
    values, defaults = {}, cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if dataclasses.is_dataclass(default):
            values[field.name] = dataclass_from_args(type(default), args)
        elif "help" in field.metadata and hasattr(args, field.name):
            value = getattr(args, field.name)
            values[field.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)
