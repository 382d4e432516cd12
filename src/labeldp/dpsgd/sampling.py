"""Poisson subsampling, the batch selection DP-SGD's accounting assumes.

Each step includes each example independently with probability q, so batches are Binomial(n, q) in
size and may be empty (still a step, still accounted). Amplification by sampling needs the batches
to be secret: an attacker who knows them faces the unsampled Gaussian mechanism (docs/dpsgd.md). So
the sampler's generator is noise, ChaCha20 by default (torch's CPU generator keeps only 32 bits of a
seed: searchable), and its state is never saved: a resumed run samples its remaining steps afresh,
with the same distribution.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from labeldp.errors import ConfigError
from labeldp.randomness import NoiseSource, SecureGenerator

#: inclusion is decided on float64 uniforms, which lie on the 2^-53 grid of [0, 1)
_GRID = 2.0**53


class PoissonSampler:
    """Index batches for ``steps`` steps of Poisson sampling at rate ``sampling_probability`` (q).

    Usable as a ``DataLoader``'s ``batch_sampler``. The realised inclusion probability is q rounded down
    to the 2^-53 grid, never above the q the accounting uses. The batches must stay secret (see
    :mod:`labeldp.dpsgd.sampling`).

    Parameters
    ----------
    generator : torch.Generator or labeldp.randomness.SecureGenerator or None, optional
        Source of the sampling, never saved (default a new SecureGenerator).
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
        """q n, the expected number of examples in a batch."""
        return self.num_examples * self.sampling_probability

    def sample(self) -> torch.Tensor:
        """One step's batch: the sorted int64 indices of the examples drawn (possibly none)."""
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

    ChaCha20, or when ``source`` is insecure a torch generator seeded from it.
    """
    seed = source.seed("dpsgd-sampling", *ids)  # None only for a secure source, a private one
    return torch.Generator().manual_seed(seed) if not source.private and seed is not None else SecureGenerator()
