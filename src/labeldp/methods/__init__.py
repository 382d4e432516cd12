"""Training methods, one module each, found by name in :mod:`labeldp.config.method_registry`.

Start with :mod:`labeldp.methods.protocol`: a method is written against its ``MethodContext``, never
against a run. What each method releases: docs/methods.md.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.config.method_registry import Method as Method
    from labeldp.config.method_registry import get_method as get_method
    from labeldp.config.method_registry import method_names as method_names
    from labeldp.config.method_registry import register_method as register_method

__getattr__, __dir__, __all__ = lazy_exports(__name__)
