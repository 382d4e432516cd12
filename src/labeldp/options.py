"""Command-line options, each declared once (:class:`Option`): the configuration fields, every command's
flags and the overrides of sweeps and tunes are all built from the declarations (after nanoGPT's
configurator).

A dataclass field declared with :func:`option` (or :func:`declared` for a shared declaration) gets
``--its-name`` (``flag`` renames it), a type from its annotation and its help; a boolean defaulting to True
becomes ``--no-its-name``; a nested settings dataclass becomes an argument group. A command's other flags
come from :func:`add_options`. Each flag's argparse action keeps its declaration (``action.declaration``).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterable, Mapping
from typing import Any

_MISSING = dataclasses.MISSING


@dataclasses.dataclass(frozen=True, eq=False)  # compared by identity: one declaration, one object
class Option:
    """One option: its flag, type, default, help and choices, stated once.

    Parameters
    ----------
    type : str
        Its annotation (``"float | None"``, ``"tuple[str, ...]"``, ``"bool"``: a switch); a dataclass field's
        own annotation where empty.
    choices : iterable or callable, optional
        The allowed values, or a function returning them when the parser is built (so a registry filled on
        import can supply them).
    commands : mapping
        What a command means of its own by the option, by command (``"train"``, ``"hashed train"``...): its
        ``help`` is added to the shared help; ``default``, ``choices``, ``type``, ``metavar`` or ``nargs``
        replace the shared ones.
    """

    help: str
    default: Any = None
    type: str = ""
    flag: str | None = None
    choices: Iterable[str] | Callable[[], Iterable[str]] | None = None
    metavar: str | None = None
    nargs: int | str | None = None
    action: str | None = None
    commands: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)

    def on(self, command: str | None) -> Option:
        """The option as ``command`` takes it: its own words added to the help, its own settings."""
        own = dict(self.commands.get(command, {})) if command else {}
        words = own.pop("help", "")
        return dataclasses.replace(self, help="; ".join(filter(None, (self.help, words))), commands={}, **own)


def option(
    default: Any = _MISSING,
    *,
    help: str,
    default_factory: Any = _MISSING,
    free_of: tuple[str, ...] = (),
    **settings: Any,
) -> Any:
    """A dataclass field declaring an option of its own (``settings``: :class:`Option`'s).

    ``default_factory`` is for a mutable default (a nested settings dataclass). ``free_of``: of a method's option,
    the releases it never changes (drawn before it acts), :meth:`~labeldp.config.method_registry.Method.independent`.
    """
    declaration = Option(help, None if default is _MISSING else default, **settings)
    metadata = {"option": declaration, "help": help, "free_of": free_of}
    if default_factory is not _MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def declared(declaration: Option, command: str | None = None, free_of: tuple[str, ...] = ()) -> Any:
    """A dataclass field of a shared declaration, with ``command``'s default (``free_of``: :func:`option`'s)."""
    metadata = {"option": declaration, "help": declaration.help, "free_of": free_of}
    return dataclasses.field(default=declaration.on(command).default, metadata=metadata)


def declaration_of(field: dataclasses.Field) -> Option | None:
    """The :class:`Option` a dataclass field was declared with (None for a field of no option)."""
    return field.metadata.get("option")


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


def flag_name(declaration: Option, name: str, default: Any) -> str:
    """The flag of option ``name``: its own, else ``--name`` (``--no-name`` for a switch defaulting to True)."""
    return declaration.flag or f"--{'no-' if default is True else ''}{name.replace('_', '-')}"


def add_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    declaration: Option,
    command: str | None,
    name: str | None = None,
    *,
    dest: str | None = None,
    annotation: str = "",
    typed_only: bool = False,
    required: bool = False,
) -> argparse.Action:
    """Add the flag of ``declaration`` as ``command`` takes it; the generator of every flag.

    ``name`` is its field's name (default: the flag's words), ``dest`` where its value goes (default: ``name``),
    ``annotation`` a dataclass field's type; with ``typed_only`` the flag sets nothing unless typed
    (``argparse.SUPPRESS``), a required one has no default.
    """
    use = declaration.on(command)
    field = name
    if field is None:
        assert use.flag is not None, "an option of no dataclass field names its flag"
        field = use.flag.lstrip("-").replace("-", "_")
    flag = flag_name(use, field, use.default)
    kwargs: dict[str, Any] = {
        "dest": dest or name or flag.lstrip("-").replace("-", "_"),
        "help": _help(use, show_default=not required),
        "default": argparse.SUPPRESS if typed_only else None if required else use.default,
    }
    annotation = use.type or annotation
    if annotation == "bool" or isinstance(use.default, bool):
        kwargs.update(action="store_false" if use.default else "store_true")
    else:
        element, is_tuple = annotation_type(annotation)
        choices = use.choices() if callable(use.choices) else use.choices
        metavar = use.metavar or (None if choices else flag.lstrip("-").replace("-", "_").upper())
        kwargs.update(type=element, choices=choices, metavar=metavar, nargs=use.nargs or ("+" if is_tuple else None))
        if use.action:
            kwargs.update(action=use.action)
    if required:
        kwargs.update(required=True)
    action = parser.add_argument(flag, **kwargs)
    action.declaration = declaration  # type: ignore[attr-defined]  # read by the tests: one declaration a flag
    return action


def add_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    command: str,
    *declarations: Option,
    required: Iterable[Option] = (),
) -> None:
    """Add the flags of ``declarations`` as ``command`` takes them; those of ``required`` must be given."""
    needed = {id(declaration) for declaration in required}
    for declaration in declarations:
        add_option(parser, declaration, command, required=id(declaration) in needed)


def _help(use: Option, show_default: bool) -> str:
    default = use.default
    shown = show_default and default is not None and not isinstance(default, (bool, tuple, list))
    shown = shown and default != argparse.SUPPRESS
    return use.help.replace("%", "%%") + (f" (default {default})" if shown else "")


def add_dataclass_arguments(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    command: str,
    groups: dict[str, tuple[str, str | None]] | None = None,
) -> None:
    """Add a flag for every option field of dataclass ``cls``, as ``command`` takes it; a nested dataclass
    becomes a group.

    ``groups`` gives a group's (title, description) by field name. A flag not typed sets nothing
    (``argparse.SUPPRESS``), so the namespace holds exactly what was typed (:func:`typed_options`) and
    :func:`dataclass_from_args` takes the rest from the dataclass's defaults. The help shows each default.
    """
    groups = groups or {}
    defaults = cls()
    for field in dataclasses.fields(cls):
        default, declaration = getattr(defaults, field.name), declaration_of(field)
        if declaration is None:  # no option (a configuration's method options: their own flags)
            continue
        if dataclasses.is_dataclass(default):
            title, description = groups.get(field.name, (field.name, None))
            add_dataclass_arguments(parser.add_argument_group(title, description), type(default), command)
        else:
            add_option(parser, declaration, command, field.name, annotation=str(field.type), typed_only=True)


def flag_of(cls: type, name: str) -> str:
    """The flag of field ``name`` of ``cls`` or of a dataclass it nests (KeyError if none).

    ``--no-augment`` for a switch that defaults to True.
    """
    defaults = cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if declaration_of(field) is not None and dataclasses.is_dataclass(default):
            try:
                return flag_of(type(default), name)
            except KeyError:
                continue
        if field.name == name:
            return flag_name(declaration_of(field) or Option(""), name, default)
    raise KeyError(name)


def typed_options(args: argparse.Namespace, cls: type) -> set[str]:
    """The field names of ``cls`` (and of the settings it nests) that the user typed a flag for."""
    typed, defaults = set(), cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if declaration_of(field) is not None and dataclasses.is_dataclass(default):
            typed |= typed_options(args, type(default))
        elif declaration_of(field) is not None and hasattr(args, field.name):
            typed.add(field.name)
    return typed


def dataclass_from_args(cls: type, args: argparse.Namespace) -> Any:
    """An instance of ``cls`` from the flags of :func:`add_dataclass_arguments`: what was typed, else the defaults."""
    values, defaults = {}, cls()
    for field in dataclasses.fields(cls):
        default = getattr(defaults, field.name)
        if declaration_of(field) is not None and dataclasses.is_dataclass(default):
            values[field.name] = dataclass_from_args(type(default), args)
        elif declaration_of(field) is not None and hasattr(args, field.name):
            value = getattr(args, field.name)
            values[field.name] = tuple(value) if isinstance(value, list) else value
    return cls(**values)
