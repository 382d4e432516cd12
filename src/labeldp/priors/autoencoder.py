"""An autoencoder trained on the public inputs only, whose codes feed cluster priors.

It reads inputs, never labels, so its codes and the clusters built on them are public.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm


class Autoencoder(nn.Module):
    """A fully connected autoencoder: input_dim -> 512 -> 128 -> code_dim -> 128 -> 512 -> input_dim."""

    def __init__(self, input_dim: int, code_dim: int = 32):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(input_dim, 512), nn.ReLU(), nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, code_dim)
        )
        self.decoder = nn.Sequential(
            nn.Linear(code_dim, 128), nn.ReLU(), nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, input_dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))


def autoencoder_codes(
    inputs: np.ndarray,
    code_dim: int = 32,
    epochs: int = 10,
    batch_size: int = 256,
    lr: float = 1e-3,
    seed: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """The standardised codes, (n, code_dim) float32, of an :class:`Autoencoder` trained on ``inputs``.

    Flattened, standardised inputs, mean squared error, Adam; torch's global random state is left as it was.
    Public: it reads inputs, never labels.
    """
    flat = torch.as_tensor(np.asarray(inputs, dtype=np.float32).reshape(len(inputs), -1))
    flat = (flat - flat.mean(0)) / (flat.std(0) + 1e-6)
    with torch.random.fork_rng(devices=[]):  # the initialisation from the seed, leaving torch's global state alone
        torch.manual_seed(seed)
        model = Autoencoder(flat.shape[1], code_dim)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    for _ in tqdm(range(epochs), desc="autoencoder", unit="epoch", disable=None if progress else True):
        for batch in torch.randperm(len(flat), generator=generator).split(batch_size):
            loss = nn.functional.mse_loss(model(flat[batch]), flat[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        codes = torch.cat([model.encoder(chunk) for chunk in flat.split(4096)])
    codes = (codes - codes.mean(0)) / (codes.std(0) + 1e-6)
    return codes.numpy().astype(np.float32)
