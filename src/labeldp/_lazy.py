"""Packages whose public names are imported on first use (PEP 562), so that importing one light
module of a package (a configuration, a registry of names) does not import torch, scikit-learn or
dp_accounting through the package's ``__init__``."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """``(__getattr__, __dir__, __all__)`` for ``package``, whose public names live in the modules
    ``exports`` maps them to (a name -> the module that defines it).

    Parameters
    ----------
    package : str
        The package's ``__name__``.
    exports : dict
        Public name -> dotted module name.

    Returns
    -------
    tuple
        The module-level ``__getattr__`` and ``__dir__`` functions, and ``__all__``.
    """

    def __getattr__(name: str) -> Any:
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted(exports)

    return __getattr__, __dir__, sorted(exports)
