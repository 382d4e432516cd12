"""Torch modules for each kind of data, built by name (:mod:`labeldp.models.build`). Names are imported
on first use; :mod:`labeldp.models.names` (the names and the default rule) needs no torch.
"""

from typing import TYPE_CHECKING

from labeldp._lazy import lazy_exports

if TYPE_CHECKING:  # the names as a type checker and an IDE see them; imported on first use at run time
    from labeldp.models.boosted_trees import BoostedTrees as BoostedTrees
    from labeldp.models.build import build_model as build_model
    from labeldp.models.cnn import BatchNormCNN as BatchNormCNN
    from labeldp.models.cnn import SmallCNN as SmallCNN
    from labeldp.models.cnn import TanhCNN as TanhCNN
    from labeldp.models.convnet import ConvNet as ConvNet
    from labeldp.models.mlp import MLP as MLP
    from labeldp.models.names import MODELS as MODELS
    from labeldp.models.names import default_model_name as default_model_name
    from labeldp.models.pooling import MaxPool2d as MaxPool2d
    from labeldp.models.recommender import RecommenderMLP as RecommenderMLP
    from labeldp.models.resnet import ResNet18 as ResNet18
    from labeldp.models.wideresnet import WideResNet as WideResNet
    from labeldp.models.wideresnet import WSConv2d as WSConv2d

__getattr__, __dir__, __all__ = lazy_exports(__name__)
