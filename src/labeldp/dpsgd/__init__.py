"""DP-SGD (inputs *and* labels private): composable pieces for your own loop, and a ready trainer
(:mod:`labeldp.dpsgd.trainer`, read it first). The accounting lives in :mod:`labeldp.accounting.calibration`.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.dpsgd.clipping import ClippedGradients as ClippedGradients
    from labeldp.dpsgd.clipping import UnsupportedModelError as UnsupportedModelError
    from labeldp.dpsgd.clipping import check_per_example_model as check_per_example_model
    from labeldp.dpsgd.clipping import clipped_gradient_sum as clipped_gradient_sum
    from labeldp.dpsgd.clipping import cross_entropy_per_example as cross_entropy_per_example
    from labeldp.dpsgd.clipping import replace_batchnorm as replace_batchnorm
    from labeldp.dpsgd.noise import gaussian_noise as gaussian_noise
    from labeldp.dpsgd.noise import privatize_gradients as privatize_gradients
    from labeldp.dpsgd.noise import secure_normal as secure_normal
    from labeldp.dpsgd.sampling import PoissonSampler as PoissonSampler

__getattr__, __dir__, __all__ = lazy_exports(__name__)
