"""DP-SGD (inputs *and* labels private): composable pieces for your own loop, and a ready trainer.

- :mod:`~labeldp.dpsgd.clipping`: the sum of clipped per-example gradients of any per-example
  model (a fast book-keeping path and a general ``torch.func.vmap`` path), BatchNorm refusal.
- :mod:`~labeldp.dpsgd.sampling`: Poisson subsampling.
- :mod:`~labeldp.dpsgd.noise`: Gaussian noise (seeded or cryptographically secure) and the
  private gradient.
- :mod:`~labeldp.dpsgd.trainer`: a resumable DP-SGD training loop with micro-batches,
  augmentation multiplicity and a parameter EMA.

Accounting (events, epsilon, calibration) lives in :mod:`labeldp.accounting.events` and
:mod:`labeldp.accounting.calibration`.
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
