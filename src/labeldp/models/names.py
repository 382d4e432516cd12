"""The models' names and the rule that picks one from the inputs' shape: no torch."""

from __future__ import annotations

from collections.abc import Callable

MODELS = ("mlp", "cnn", "cnn-bn", "convnet", "tanh-cnn", "resnet18", "wrn16-4", "recommender", "gbdt")
#: the models fitted from a stage's released targets (scikit-learn's gradient boosting), not trained by SGD
FITTED_MODELS = ("gbdt",)

#: the default, in order: the inputs it applies to, whether one input's shape and categorical sizes are such,
#: the model, and the model when per-example gradients forbid batch norm (DP-SGD). Why these:
#: docs/guides/images.md.
RULE: tuple[tuple[str, Callable[[tuple[int, ...], tuple[int, ...]], bool], str, str], ...] = (
    ("tables with categorical columns", lambda shape, categorical: bool(categorical), "recommender", "recommender"),
    ("28x28 images", lambda shape, _: len(shape) == 3 and shape[1:] == (28, 28), "convnet", "cnn"),
    ("32x32 images", lambda shape, _: len(shape) == 3 and shape[1:] == (32, 32), "resnet18", "wrn16-4"),
    ("other inputs", lambda shape, _: True, "mlp", "mlp"),
)


def default_model_name(
    input_shape: tuple[int, ...], categorical: tuple[int, ...] = (), per_example: bool = False
) -> str:
    """The model of :data:`RULE` for one input of ``input_shape``, whose leading ``categorical`` columns are
    integer codes of those sizes; ``per_example``: for a method that needs per-example gradients."""
    _, _, model, without_batch_norm = next(
        case for case in RULE if case[1](tuple(input_shape), tuple(categorical or ()))
    )
    return without_batch_norm if per_example else model


def described_rule() -> str:
    """:data:`RULE` in words, as ``--model``'s help says it."""
    return "; ".join(
        f"{model} for {inputs}" + ("" if private == model else f" ({private} under DP-SGD)")
        for inputs, _, model, private in RULE
    )


__all__ = ["FITTED_MODELS", "MODELS", "RULE", "default_model_name", "described_rule"]
