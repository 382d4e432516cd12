"""Poisson subsampling, the batch selection DP-SGD's accounting assumes.

Every step includes each example independently with probability q, so batch sizes vary (they are
Binomial(n, q)) and may be empty; an empty batch is still a step (its update is pure noise) and is
still accounted. Fixed-size shuffled batches would not match the accounting and are not offered.
"""

from __future__ import annotations

from typing import Iterator

import torch


class PoissonSampler:
    """Index batches for ``steps`` steps of Poisson sampling at rate ``sampling_probability``.

    Usable as a ``torch.utils.data.DataLoader`` ``batch_sampler``. The generator's state is the whole
    sampler state, so a resumed run continues the same sequence (see :meth:`state_dict`).
    """

    def __init__(self, num_examples: int, sampling_probability: float, steps: int,
                 generator: torch.Generator | None = None):
        if num_examples < 1:
            raise ValueError(f"num_examples must be at least 1, got {num_examples}")
        if not 0.0 < sampling_probability <= 1.0:
            raise ValueError(f"sampling_probability must lie in (0, 1], got {sampling_probability}")
        if steps < 0:
            raise ValueError(f"steps must be >= 0, got {steps}")
        self.num_examples, self.sampling_probability, self.steps = num_examples, sampling_probability, steps
        self.generator = generator if generator is not None else torch.Generator().manual_seed(
            int(torch.randint(2**62, (1,)).item()))

    @property
    def expected_batch_size(self) -> float:
        return self.num_examples * self.sampling_probability

    def sample(self) -> torch.Tensor:
        """One step's batch: the sorted indices of the examples drawn (possibly none)."""
        mask = torch.rand(self.num_examples, generator=self.generator) < self.sampling_probability
        return torch.nonzero(mask).flatten()

    def __iter__(self) -> Iterator[list[int]]:
        for _ in range(self.steps):
            yield self.sample().tolist()

    def __len__(self) -> int:
        return self.steps

    def state_dict(self) -> dict:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
