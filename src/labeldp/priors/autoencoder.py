"""A small autoencoder trained on the public inputs only, whose codes are public representations for
cluster priors (the paper's self-supervised-prior recipe, with reconstruction as the pretext task).

Privacy: it reads inputs, never labels, so its codes and the clusters built on them are public.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm


class Autoencoder(nn.Module):
    """A fully connected autoencoder: d -> 512 -> 128 -> code_dim -> 128 -> 512 -> d.

    Trained on public inputs only (:func:`autoencoder_codes`), so its codes are public.

    Parameters
    ----------
    input_dim : int
        d, the width of a flattened input.
    code_dim : int, optional
        Width of the code (default 32).

    Attributes
    ----------
    encoder : torch.nn.Sequential
        d -> 512 -> 128 -> code_dim, with ReLUs between.
    decoder : torch.nn.Sequential
        code_dim -> 128 -> 512 -> d, with ReLUs between.
    """

    def __init__(self, input_dim: int, code_dim: int = 32):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Linear(input_dim, 512), nn.ReLU(), nn.Linear(512, 128), nn.ReLU(), nn.Linear(128, code_dim)
        )
        self.decoder = nn.Sequential(
            nn.Linear(code_dim, 128), nn.ReLU(), nn.Linear(128, 512), nn.ReLU(), nn.Linear(512, input_dim)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The reconstruction of ``x``.

        Parameters
        ----------
        x : torch.Tensor
            Inputs of shape (B, input_dim).

        Returns
        -------
        torch.Tensor
            Reconstructions of shape (B, input_dim).
        """
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
    """Train an :class:`Autoencoder` on ``inputs`` and return their codes.

    The inputs are flattened and standardised, the loss is the mean squared error, the optimiser
    Adam. It reads inputs, never labels, so the codes are public. torch's global random state is left
    as it was.

    Parameters
    ----------
    inputs : numpy.ndarray
        Public inputs of shape (n, ...); each is flattened.
    code_dim : int, optional
        Width of the code (default 32).
    epochs : int, optional
        Training epochs (default 10).
    batch_size : int, optional
        Examples per step (default 256).
    lr : float, optional
        Adam's learning rate (default 1e-3).
    seed : int, optional
        Seed of the initialisation and of the data order (default 0).
    progress : bool, optional
        Show a progress bar over the epochs (default False).

    Returns
    -------
    numpy.ndarray
        The codes, standardised per dimension, as float32 (n, code_dim).
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
