"""DP-SGD (inputs *and* labels private): composable pieces for your own loop, and a ready trainer.

- :mod:`~labeldp.dpsgd.clipping`: the sum of clipped per-example gradients of any per-example
  model (a fast book-keeping path and a general ``torch.func.vmap`` path), BatchNorm refusal.
- :mod:`~labeldp.dpsgd.sampling`: Poisson subsampling.
- :mod:`~labeldp.dpsgd.noise`: Gaussian noise (seeded or cryptographically secure) and the
  private gradient.
- :mod:`~labeldp.dpsgd.trainer`: a resumable DP-SGD training loop with micro-batches,
  augmentation multiplicity and a parameter EMA.

Accounting (events, epsilon, calibration) lives in :mod:`labeldp.accounting.events` and :mod:`labeldp.accounting.calibration`.
"""

from labeldp.dpsgd.clipping import (
    ClippedGradients,
    UnsupportedModelError,
    check_per_example_model,
    clipped_gradient_sum,
    cross_entropy_per_example,
    replace_batchnorm,
)
from labeldp.dpsgd.noise import gaussian_noise, privatize_gradients, secure_normal
from labeldp.dpsgd.sampling import PoissonSampler

__all__ = [
    "ClippedGradients",
    "PoissonSampler",
    "UnsupportedModelError",
    "check_per_example_model",
    "clipped_gradient_sum",
    "cross_entropy_per_example",
    "gaussian_noise",
    "privatize_gradients",
    "replace_batchnorm",
    "secure_normal",
]
