"""Training methods, one module each, found by name in :mod:`labeldp.methods.registry`.

Start with :mod:`labeldp.methods.protocol`: a method is written against its ``MethodContext``, never
against a run. What each method releases: docs/methods.md.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "Method": "labeldp.methods.registry",
        "get_method": "labeldp.methods.registry",
        "method_names": "labeldp.methods.registry",
        "methods_using": "labeldp.methods.registry",
        "register_method": "labeldp.methods.registry",
    },
)
