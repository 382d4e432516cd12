"""Poisson subsampling, the batch selection DP-SGD's accounting assumes.

Every step includes each example independently with probability q, so batch sizes vary (they are
Binomial(n, q)) and may be empty; an empty batch is still a step (its update is pure noise) and is
still accounted. Fixed-size shuffled batches would not match the accounting and are not offered.

The amplification by sampling that the accounting counts on needs the batches to be secret: an
attacker who knows who was sampled at each step faces the unsampled Gaussian mechanism (for the
MNIST DP-SGD recipe, epsilon about 29.6 instead of 2). The sampler's generator is therefore noise:
the ChaCha20 CSPRNG unless the caller gives another (torch's CPU generator would keep only 32 bits
of any seed: few enough to search), and its state is never saved: a resumed run samples its
remaining steps afresh, which has the same distribution.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from labeldp.errors import ConfigError
from labeldp.randomness import NoiseSource, SecureGenerator

#: inclusion is decided on float64 uniforms, which lie on the 2^-53 grid of [0, 1)
_GRID = 2.0**53


class PoissonSampler:
    """Index batches for ``steps`` steps of Poisson sampling at rate ``sampling_probability``.

    ``generator``: a ``torch.Generator`` or a :class:`~labeldp.randomness.SecureGenerator` (the
    default, a new one). Usable as a ``torch.utils.data.DataLoader`` ``batch_sampler``. The realised
    inclusion probability is q rounded down to the 2^-53 grid, never above the q the accounting uses.

    The amplification by sampling that the accounting counts on holds only while the batches stay
    secret (see the module docstring).

    Parameters
    ----------
    num_examples : int
        n, the number of examples, >= 1.
    sampling_probability : float
        q, in (0, 1].
    steps : int
        Number of batches an iteration yields, >= 0.
    generator : torch.Generator or labeldp.randomness.SecureGenerator or None, optional
        Source of the sampling (default a new SecureGenerator).

    Attributes
    ----------
    num_examples : int
        n.
    sampling_probability : float
        q.
    steps : int
        Number of batches per iteration.
    generator : torch.Generator or labeldp.randomness.SecureGenerator
        Source of the sampling (never saved).
    expected_batch_size : float
        q n.

    Raises
    ------
    labeldp.errors.ConfigError
        If ``num_examples`` is below 1, ``sampling_probability`` is not in (0, 1], or ``steps`` is
        negative.
    """

    def __init__(
        self,
        num_examples: int,
        sampling_probability: float,
        steps: int,
        generator: torch.Generator | SecureGenerator | None = None,
    ):
        if num_examples < 1:
            raise ConfigError(f"num_examples must be at least 1, got {num_examples}")
        if not 0.0 < sampling_probability <= 1.0:
            raise ConfigError(f"sampling_probability must lie in (0, 1], got {sampling_probability}")
        if steps < 0:
            raise ConfigError(f"steps must be >= 0, got {steps}")
        self.num_examples, self.sampling_probability, self.steps = num_examples, sampling_probability, steps
        self.generator = generator if generator is not None else SecureGenerator()
        self._threshold = int(sampling_probability * _GRID) / _GRID

    @property
    def expected_batch_size(self) -> float:
        """q n, the expected number of examples in a batch.

        Returns
        -------
        float
            ``num_examples * sampling_probability``.
        """
        return self.num_examples * self.sampling_probability

    def sample(self) -> torch.Tensor:
        """One step's batch: the sorted indices of the examples drawn (possibly none).

        Returns
        -------
        torch.Tensor
            int64 indices in [0, num_examples), shape (batch size,).
        """
        if isinstance(self.generator, SecureGenerator):
            uniforms = torch.from_numpy(self.generator.random(self.num_examples))
        else:
            uniforms = torch.rand(self.num_examples, generator=self.generator, dtype=torch.float64)
        return torch.nonzero(uniforms < self._threshold).flatten()

    def __iter__(self) -> Iterator[list[int]]:
        for _ in range(self.steps):
            yield self.sample().tolist()

    def __len__(self) -> int:
        return self.steps


def sampling_generator(source: NoiseSource, *ids: int) -> torch.Generator | SecureGenerator:
    """The generator of the batches of stream ``ids`` (e.g. an epoch) under ``source``.

    ChaCha20, or in the insecure mode a torch generator seeded from it.

    Parameters
    ----------
    source : labeldp.randomness.NoiseSource
        The run's noise source.
    *ids : int
        Identifiers of the stream.

    Returns
    -------
    torch.Generator or labeldp.randomness.SecureGenerator
        The generator for :class:`PoissonSampler`.
    """
    seed = source.seed("dpsgd-sampling", *ids)
    return torch.Generator().manual_seed(seed) if not source.private else SecureGenerator()
