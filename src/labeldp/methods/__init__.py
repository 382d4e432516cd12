"""Training methods, one module each, found by name in a registry (:mod:`labeldp.methods.registry`).

- :mod:`~labeldp.methods.stages`: the label-DP stages of Ghazi et al. (2021): ``non-private``,
  ``lp-1st`` (alias ``rr``), ``lp-2st``, ``lp-mst``;
- :mod:`~labeldp.methods.alibi`: ALIBI, Laplace noise on the one-hot label (Malek et al. 2021);
- :mod:`~labeldp.methods.pate`: PATE, teachers' noisy votes label a student's queries;
- :mod:`~labeldp.methods.dpsgd`: DP-SGD, the full-DP baseline.
"""

from labeldp.methods.registry import METHOD_OPTIONS, Method, get_method, method_names, methods_using, register_method

__all__ = ["METHOD_OPTIONS", "Method", "get_method", "method_names", "methods_using", "register_method"]
