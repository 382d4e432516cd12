"""A small convolutional network for 28x28 grey-scale images (MNIST family)."""

from __future__ import annotations

from torch import nn

from labeldp.models.pooling import MaxPool2d


def _layers(
    in_channels: int, num_classes: int, image_size: int, channels: tuple[int, int], hidden: int, batch_norm: bool
) -> list[nn.Module]:
    """The layers of :class:`SmallCNN` (``batch_norm`` False) or :class:`BatchNormCNN` (True): two 5x5
    conv blocks (with batch norm and no conv bias, or a conv bias), each ReLU and a 2x2 max-pool, a hidden
    ReLU layer and the classifier."""
    layers: list[nn.Module] = []
    for inputs, outputs in ((in_channels, channels[0]), (channels[0], channels[1])):
        layers.append(nn.Conv2d(inputs, outputs, 5, padding=2, bias=not batch_norm))
        layers += [nn.BatchNorm2d(outputs)] if batch_norm else []
        layers += [nn.ReLU(inplace=True), MaxPool2d(2)]
    feature_size = image_size // 4
    return [
        *layers,
        nn.Flatten(),
        nn.Linear(channels[1] * feature_size * feature_size, hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, num_classes),
    ]


class SmallCNN(nn.Sequential):
    """Two 5x5 conv blocks (16 and 32 channels, ReLU, 2x2 max-pool), a 256-unit hidden layer.

    Sized for CPUs: 417,482 parameters for 1x28x28 inputs and 10 classes; an MNIST epoch takes about
    15 to 25 CPU seconds on one thread (more on a busy machine), evaluation included. Non-private,
    the MNIST recipe's 12 epochs reach 99.4-99.6 % test accuracy (``benchmarks/image_networks.py``);
    the batch-norm :class:`~labeldp.models.convnet.ConvNet` reaches as much in half the time and is the
    default for 28x28 images. The MNIST profiles (the results page's figures) and MNIST's PATE and
    cluster-prior recipes train this network.

    Uses no batch statistics, so it is the default where per-example gradients are needed (DP-SGD).

    Maps images (B, in_channels, image_size, image_size) to logits (B, num_classes).

    Parameters
    ----------
    in_channels : int, optional
        Channels of the input images (default 1).
    num_classes : int, optional
        Number of outputs (default 10).
    image_size : int, optional
        Side of the square input images, divisible by 4 (default 28).
    channels : tuple of int, optional
        Channels of the two conv blocks (default (16, 32)).
    hidden : int, optional
        Width of the hidden layer (default 256).
    """

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 10,
        image_size: int = 28,
        channels: tuple[int, int] = (16, 32),
        hidden: int = 256,
    ):
        super().__init__(*_layers(in_channels, num_classes, image_size, channels, hidden, batch_norm=False))


class BatchNormCNN(nn.Sequential):
    """:class:`SmallCNN` with batch norm after each convolution (model ``"cnn-bn"``).

    5x5 conv (16 channels), batch norm, ReLU, 2x2 max-pool; 5x5 conv (32), batch norm, ReLU, 2x2
    max-pool; a 256-unit ReLU layer; the classifier. The convolutions have no bias (batch norm's shift
    takes its place): 417,530 parameters for 1x28x28 inputs and 10 classes, 48 more than
    :class:`SmallCNN`. A training step costs 1.26x SmallCNN's (one thread, batch 128, timed side by
    side; its first batch norm works on 16 channels at full resolution). Non-private on MNIST with one
    thread (``benchmarks/image_networks.py``), 8 epochs at learning rate 0.1 reached 99.45 % in 196
    CPU seconds, SmallCNN's 8 epochs 99.53 % in 200 (at a higher load) and its 12 epochs 99.60 % in
    229: it learns no faster per second than SmallCNN, and the ConvNet learns faster than both.

    Its batch norm layers mix the examples of a batch, so DP-SGD refuses it (use ``"cnn"`` or
    ``"tanh-cnn"`` there); label-DP methods train it like any network.

    Maps images (B, in_channels, image_size, image_size) to logits (B, num_classes).

    Parameters
    ----------
    in_channels : int, optional
        Channels of the input images (default 1).
    num_classes : int, optional
        Number of outputs (default 10).
    image_size : int, optional
        Side of the square input images, divisible by 4 (default 28).
    channels : tuple of int, optional
        Channels of the two conv blocks (default (16, 32)).
    hidden : int, optional
        Width of the hidden layer (default 256).
    """

    def __init__(
        self,
        in_channels: int = 1,
        num_classes: int = 10,
        image_size: int = 28,
        channels: tuple[int, int] = (16, 32),
        hidden: int = 256,
    ):
        super().__init__(*_layers(in_channels, num_classes, image_size, channels, hidden, batch_norm=True))


class TanhCNN(nn.Sequential):
    """The DP-SGD network for 28x28 images of Papernot et al. (2021) and Tramer & Boneh (2021).

    8x8/2 conv (16), 4x4/2 conv (32), each with tanh and a 2x2 max-pool of stride 1, a 32-unit
    tanh layer; 26k parameters. Bounded activations suit clipped, noisy gradients.

    Maps images (B, in_channels, 28, 28) to logits (B, num_classes).

    Parameters
    ----------
    in_channels : int, optional
        Channels of the input images (default 1).
    num_classes : int, optional
        Number of outputs (default 10).
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10):
        super().__init__(
            nn.Conv2d(in_channels, 16, 8, stride=2, padding=3),
            nn.Tanh(),
            MaxPool2d(2, 1),
            nn.Conv2d(16, 32, 4, stride=2),
            nn.Tanh(),
            MaxPool2d(2, 1),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 32),
            nn.Tanh(),
            nn.Linear(32, num_classes),
        )
