"""The losses (training/losses.py): the likelihood loss on one-hot targets is cross-entropy, the
forward loss recovers clean posteriors from RR labels, and the posterior loss pulls back a
confidently wrong model."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from labeldp.mechanisms import randomized_response, randomized_response_likelihood
from labeldp.models import MLP
from labeldp.training import TrainConfig, accuracy, predict_proba, train_stage
from labeldp.training.losses import likelihood_loss


def test_likelihood_loss_with_one_hot_is_cross_entropy() -> None:
    logits = torch.randn(5, 4)
    labels = torch.tensor([0, 3, 1, 1, 2])
    one_hot_log = F.one_hot(labels, 4).float().log()
    assert torch.allclose(likelihood_loss(logits, one_hot_log), F.cross_entropy(logits, labels, reduction="none"))


def test_forward_loss_recovers_clean_posteriors_from_rr_labels() -> None:
    """With heavy RR noise, plain CE learns flat noisy-label probabilities; the forward loss learns
    the clean ones (max probability near 1 on separable data)."""
    rng = np.random.default_rng(0)
    centers = rng.normal(0, 4, size=(5, 10))
    y = rng.integers(0, 5, 3000)
    x = (centers[y] + rng.normal(size=(3000, 10))).astype(np.float32)
    noisy = randomized_response(y, 5, 0.7, rng=1)
    config = TrainConfig(epochs=15, batch_size=100, lr=0.05, weight_decay=0.0, augment=False)
    results = {}
    for loss, targets in (("ce", noisy), ("forward", randomized_response_likelihood(noisy, 5, 0.7))):
        torch.manual_seed(0)
        model = MLP((10,), 5, hidden=(64,))
        train_stage(model, x, targets, 5, config, progress=False)
        results[loss] = (predict_proba(model, x).max(axis=1).mean(), accuracy(model, x, y))
    assert results["ce"][0] < 0.6 < 0.9 < results["forward"][0]
    assert results["forward"][1] > 0.95


def test_the_posterior_loss_pulls_back_a_confidently_wrong_model() -> None:
    """A cluster prior says class 1 (0.95), the model says class 0 with logit gap 10: the forward
    loss's gradient has all but vanished, the posterior loss's has not."""
    import torch

    from labeldp.training.losses import likelihood_loss, posterior_loss

    log_evidence = torch.tensor([[0.05, 0.95]]).log()
    gradients = {}
    for name, loss_of in (("forward", likelihood_loss), ("posterior", posterior_loss)):
        logits = torch.tensor([[10.0, 0.0]], requires_grad=True)
        loss_of(logits, log_evidence).sum().backward()
        gradients[name] = logits.grad.abs().max().item()
    assert gradients["forward"] < 1e-2
    assert gradients["posterior"] == pytest.approx(0.95, abs=1e-3)
    # right where the model agrees with the evidence: both losses are at a minimum direction-wise
    logits = torch.tensor([[-3.0, 3.0]])
    assert posterior_loss(logits, log_evidence) < posterior_loss(-logits, log_evidence)
