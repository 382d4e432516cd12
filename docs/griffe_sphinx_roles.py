"""A Griffe extension for the API pages (mkdocs.yml loads it): the Sphinx roles of labeldp's docstrings,
``:func:`target```, ``:class:`~target``` (shows the last name) and ``:meth:`text <target>```, become
cross-references before mkdocstrings renders them.

A target is resolved as Sphinx would, in the scope of the docstring that names it (the object, its class,
its module, what the module imports), else as a full path. A name a package exports on first use
(``labeldp.ads.hash_spec``, a PEP 562 ``__getattr__`` Griffe cannot read) is found where it is defined.
A resolved target becomes an optional autorefs reference: a link where the pages have an entry for it,
code where they have none. A target that does not resolve (a builtin, numpy) is shown as code.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from typing import Any

from griffe import Extension, GriffeError, GriffeLoader, Module, Object

ROLE = re.compile(r":(?:py:)?(?:func|meth|class|mod|attr|data|exc|obj|const):`(?P<body>[^`]+)`")
TITLED = re.compile(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>", re.DOTALL)


class SphinxRoles(Extension):
    """Rewrites the roles of every docstring of a package once it is loaded."""

    def on_package(self, *, pkg: Module, loader: GriffeLoader, **kwargs: Any) -> None:
        objects = list(_defined(pkg))
        # name -> paths of the module-level objects so named: where a lazily exported name is defined
        module_level: dict[str, list[str]] = {}
        for obj in objects:
            if not obj.is_module and obj.parent is not None and obj.parent.is_module:
                module_level.setdefault(obj.name, []).append(obj.path)
        for obj in objects:
            if obj.docstring is not None and ":`" in obj.docstring.value:
                rewrite = _Rewrite(obj, loader, module_level)
                obj.docstring.value = ROLE.sub(rewrite, obj.docstring.value)


def _defined(obj: Object) -> Iterator[Object]:
    """``obj`` and the objects defined in it (not imported), depth first."""
    yield obj
    for member in obj.members.values():
        if not member.is_alias:
            yield from _defined(member)


class _Rewrite:
    def __init__(self, obj: Object, loader: GriffeLoader, module_level: dict[str, list[str]]) -> None:
        self.obj, self.collection, self.module_level = obj, loader.modules_collection, module_level

    def __call__(self, match: re.Match) -> str:
        body = " ".join(match["body"].split())
        if titled := TITLED.fullmatch(body):
            title, target = titled["title"], titled["target"]
        else:
            target = body.lstrip("~!")
            title = target.lstrip(".").rsplit(".", 1)[-1] if body.startswith("~") else target.lstrip(".")
        code = f"<code>{html.escape(title)}</code>"
        path = None if body.startswith("!") else self.resolve(target.lstrip("~.").removesuffix("()"))
        return code if path is None else f'<autoref identifier="{path}" optional>{code}</autoref>'

    def resolve(self, target: str) -> str | None:
        head, _, rest = target.partition(".")
        candidates = [target, f"{self.obj.module.path}.{target}"]
        try:
            candidates.insert(0, self.obj.resolve(head) + (f".{rest}" if rest else ""))
        except GriffeError:  # not a name of this scope
            pass
        for candidate in candidates:
            if path := self.lookup(candidate) or self.lazy_export(candidate):
                return path
        return None

    def lookup(self, path: str) -> str | None:
        """The canonical path of the object at ``path``, or None. A class's attribute without a
        docstring of its own (one its class's docstring describes) has no entry: its class stands in."""
        try:
            found = self.collection[path]
            found = found.final_target if found.is_alias else found
        except (KeyError, GriffeError):
            return None
        if found.is_attribute and found.docstring is None and found.parent is not None and found.parent.is_class:
            return found.parent.path
        return found.path

    def lazy_export(self, path: str) -> str | None:
        """``package.name[.attr]`` where ``name`` is defined once in the project, below ``package`` or
        anywhere else: what ``package.__getattr__`` returns."""
        parts = path.split(".")
        for at in range(len(parts) - 1, 0, -1):
            package, name, rest = ".".join(parts[:at]), parts[at], parts[at + 1 :]
            if self.lookup(package) is None:
                continue
            if not self.collection[package].is_module:
                return None
            defined = self.module_level.get(name, [])
            for scope in (f"{package}.", f"{parts[0]}."):
                within = [candidate for candidate in defined if candidate.startswith(scope)]
                if len(within) == 1:
                    return self.lookup(".".join([within[0], *rest]))
            return None
        return None
