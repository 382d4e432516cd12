"""Training methods, one module each, found by name in a registry (:mod:`labeldp.methods.registry`);
a method runs against the small protocol of :mod:`labeldp.methods.protocol`, never against a run.

- :mod:`~labeldp.methods.stages`: the label-DP stages of Ghazi et al. (2021): ``non-private``,
  ``lp-1st`` (alias ``rr``), ``lp-2st``, ``lp-mst``;
- :mod:`~labeldp.methods.numeric`: numeric labels: ``rr-on-bins``, ``rr-on-bins-mst``, ``laplace-regression``;
- :mod:`~labeldp.methods.alibi`: ALIBI, Laplace noise on the one-hot label (Malek et al. 2021);
- :mod:`~labeldp.methods.pate`: PATE, teachers' noisy votes label a student's queries;
- :mod:`~labeldp.methods.dp_sgd`: DP-SGD, the full-DP baseline.
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
