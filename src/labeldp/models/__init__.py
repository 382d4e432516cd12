"""Torch modules for each kind of data, built by name (:mod:`labeldp.models.build`). Names are imported
on first use; :mod:`labeldp.models.names` (the names and the default rule) needs no torch.
"""

from labeldp._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        "BatchNormCNN": "labeldp.models.cnn",
        "ConvNet": "labeldp.models.convnet",
        "MLP": "labeldp.models.mlp",
        "MODELS": "labeldp.models.names",
        "MaxPool2d": "labeldp.models.pooling",
        "RecommenderMLP": "labeldp.models.recommender",
        "ResNet18": "labeldp.models.resnet",
        "SmallCNN": "labeldp.models.cnn",
        "TanhCNN": "labeldp.models.cnn",
        "WSConv2d": "labeldp.models.wideresnet",
        "WideResNet": "labeldp.models.wideresnet",
        "build_model": "labeldp.models.build",
        "default_model_name": "labeldp.models.names",
    },
)
