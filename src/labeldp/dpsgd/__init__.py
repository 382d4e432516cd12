"""DP-SGD (inputs *and* labels private): composable pieces for your own loop, and a ready trainer
(:mod:`labeldp.dpsgd.trainer`, read it first). The accounting lives in :mod:`labeldp.accounting`.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "ClippedGradients": "labeldp.dpsgd.clipping",
        "UnsupportedModelError": "labeldp.dpsgd.clipping",
        "check_per_example_model": "labeldp.dpsgd.clipping",
        "clipped_gradient_sum": "labeldp.dpsgd.clipping",
        "cross_entropy_per_example": "labeldp.dpsgd.clipping",
        "replace_batchnorm": "labeldp.dpsgd.clipping",
        "gaussian_noise": "labeldp.dpsgd.noise",
        "privatize_gradients": "labeldp.dpsgd.noise",
        "secure_normal": "labeldp.dpsgd.noise",
        "PoissonSampler": "labeldp.dpsgd.sampling",
    },
)
