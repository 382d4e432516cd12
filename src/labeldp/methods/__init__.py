"""Training methods, one module each, found by name in :mod:`labeldp.methods.registry`.

A method is written against :class:`~labeldp.methods.protocol.MethodContext`, never against a run:
``stages`` (``non-private``, ``lp-1st`` alias ``rr``, ``lp-2st``, ``lp-mst``), ``numeric``
(``rr-on-bins``, ``rr-on-bins-mst``, ``laplace-regression``), ``alibi``, ``marginals``, ``pate`` and
``dp_sgd`` (the full-DP baseline). What each releases: docs/methods.md.
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
