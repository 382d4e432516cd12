"""Public names of a package imported on first use (PEP 562), so that importing one light module (a
configuration, a registry of names) does not import torch, scikit-learn or dp_accounting.

A package states its names once, as ``from module import name as name`` under ``if TYPE_CHECKING:``
(what type checkers and IDEs read); :func:`lazy_exports` reads that block from the package's source.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def type_checking_imports(source: str) -> dict[str, str]:
    """``name -> module`` of the ``from module import name as name`` statements under ``if TYPE_CHECKING:``."""
    exports = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module is not None:
                    exports.update({alias.name: statement.module for alias in statement.names})
    return exports


def lazy_exports(package: str) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, its names those of its ``TYPE_CHECKING`` imports."""
    module_file = sys.modules[package].__file__
    assert module_file is not None, "a package with an __init__.py"
    exports = type_checking_imports(Path(module_file).read_text(encoding="utf-8"))

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__, sorted(exports)
