"""Small convolutional networks for 28x28 grey-scale images (MNIST family)."""

from __future__ import annotations

from torch import nn

from labeldp.models.pooling import MaxPool2d


def _layers(
    in_channels: int, num_classes: int, image_size: int, channels: tuple[int, int], hidden: int, batch_norm: bool
) -> list[nn.Module]:
    """Two 5x5 conv blocks (batch norm and no conv bias, or a conv bias), ReLU and 2x2 max-pool each, a hidden layer."""
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
    """Two 5x5 conv blocks (16 and 32 channels, ReLU, 2x2 max-pool), a 256-unit hidden layer (model ``"cnn"``).

    Sized for CPUs. It uses no batch statistics, so it is the 28x28 network where per-example gradients
    are needed (DP-SGD); the MNIST profiles and MNIST's PATE and cluster-prior recipes train it.
    ``image_size`` is the side of the square images, divisible by 4.
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
    """:class:`SmallCNN` with batch norm after each bias-free convolution (model ``"cnn-bn"``).

    Batch norm mixes a batch's examples, so DP-SGD refuses it; label-DP methods train it like any network.
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

    8x8/2 conv (16), 4x4/2 conv (32), each with tanh and a 2x2 max-pool of stride 1, a 32-unit tanh layer.
    Bounded activations suit clipped, noisy gradients.
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
