"""The built-in models and the loader for a user's own model (imports TensorFlow).

Every model is a Keras classifier: inputs of ``model.input_shape`` (without the
batch dimension), integer class labels in ``[0, num_classes)``, logits of shape
``(batch, num_classes)`` out. Build them inside ``strategy.scope()``.

A user's model (``--model package.module:function``): ``function()`` is called
with no arguments inside the strategy scope and returns either

* a Keras model: gpuscale then feeds it synthetic data shaped like
  ``model.input_shape`` with integer labels below ``model.output_shape[-1]``; or
* ``(model, dataset)``: a ``tf.data.Dataset`` of single, *unbatched*
  ``(features, label)`` examples with integer labels; gpuscale repeats, batches
  (global batch), prefetches and distributes it.

The last layer may output logits or a softmax (a ``softmax`` activation on the
last layer is detected); the loss is sparse categorical cross-entropy.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from gpuscale.errors import GpuscaleError


@dataclass
class BuiltModel:
    """A model and what the trainer needs to know to feed it."""

    model: keras.Model
    input_shape: tuple[int, ...]
    """Per-example input shape (no batch dimension)."""
    input_dtype: str
    """``float32`` images/features or ``int32`` token ids."""
    num_classes: int
    from_logits: bool = True
    vocab_size: int | None = None
    """For token inputs: ids are drawn below this."""
    dataset: Any = None
    """A user's unbatched ``tf.data.Dataset`` of (features, label), or None."""


def mnist_cnn(width: int = 128) -> BuiltModel:
    """Seed 002's network: six ``width``-channel ReLU convolutions (5x5, 5x5,
    pool, 3x3, 3x3, pool, 3x3, 3x3, pool; SAME padding, 2x2 max pools), flatten,
    dense 10 (logits). ``width=128`` is the original."""
    layers = keras.layers
    model = keras.Sequential(
        [
            keras.Input((28, 28, 1)),
            layers.Conv2D(width, 5, padding="same", activation="relu"),
            layers.Conv2D(width, 5, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(width, 3, padding="same", activation="relu"),
            layers.Conv2D(width, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Conv2D(width, 3, padding="same", activation="relu"),
            layers.Conv2D(width, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(2),
            layers.Flatten(),
            layers.Dense(10, dtype="float32"),
        ],
        name=f"mnist_cnn_w{width}",
    )
    return BuiltModel(model, (28, 28, 1), "float32", 10)


def resnet50(image_size: int = 224, num_classes: int = 1000) -> BuiltModel:
    """Keras' ResNet-50 with random weights (``weights=None``), logits out."""
    model = keras.applications.ResNet50(
        weights=None,
        input_shape=(image_size, image_size, 3),
        classes=num_classes,
        classifier_activation=None,
    )
    return BuiltModel(model, (image_size, image_size, 3), "float32", num_classes)


def mlp(
    input_dim: int = 784, hidden: int = 1024, depth: int = 3, num_classes: int = 10
) -> BuiltModel:
    """``depth`` dense ReLU layers of ``hidden`` units, dense logits out: few
    FLOPs per gradient byte, so communication shows."""
    layers = keras.layers
    stack: list[Any] = [keras.Input((input_dim,))]
    stack += [layers.Dense(hidden, activation="relu") for _ in range(depth)]
    stack.append(layers.Dense(num_classes, dtype="float32"))
    return BuiltModel(keras.Sequential(stack, name="mlp"), (input_dim,), "float32", num_classes)


class _PositionEmbedding(keras.layers.Layer):
    def __init__(self, length: int, dim: int, **kwargs):
        super().__init__(**kwargs)
        self.length, self.dim = length, dim

    def build(self, input_shape):
        self.table = self.add_weight(
            shape=(self.length, self.dim), initializer="random_normal", name="positions"
        )

    def call(self, x):
        return x + keras.ops.cast(self.table, x.dtype)[None, :, :]


def transformer(
    seq_len: int = 128,
    vocab_size: int = 8192,
    dim: int = 256,
    heads: int = 4,
    depth: int = 4,
    num_classes: int = 10,
) -> BuiltModel:
    """A small pre-norm transformer encoder classifying token sequences:
    embedding + learned positions, ``depth`` blocks of multi-head
    self-attention and a 4x MLP, mean pooling, dense logits."""
    layers = keras.layers
    tokens = keras.Input((seq_len,), dtype="int32")
    x = layers.Embedding(vocab_size, dim)(tokens)
    x = _PositionEmbedding(seq_len, dim)(x)
    for _ in range(depth):
        h = layers.LayerNormalization()(x)
        h = layers.MultiHeadAttention(heads, dim // heads)(h, h)
        x = x + h
        h = layers.LayerNormalization()(x)
        h = layers.Dense(4 * dim, activation="gelu")(h)
        x = x + layers.Dense(dim)(h)
    x = layers.GlobalAveragePooling1D()(layers.LayerNormalization()(x))
    logits = layers.Dense(num_classes, dtype="float32")(x)
    model = keras.Model(tokens, logits, name="transformer")
    return BuiltModel(model, (seq_len,), "int32", num_classes, vocab_size=vocab_size)


def build_model(spec: str, *, width: int = 128, image_size: int = 224) -> BuiltModel:
    """Build a built-in model by name, or call the user's ``module:function``."""
    if spec == "mnist-cnn":
        return mnist_cnn(width)
    if spec == "resnet50":
        return resnet50(image_size)
    if spec == "mlp":
        return mlp()
    if spec == "transformer":
        return transformer()
    return load_user_model(spec)


def _is_softmax(layer: Any) -> bool:
    activation = getattr(layer, "activation", None)
    return (
        activation is keras.activations.softmax or getattr(activation, "__name__", "") == "softmax"
    )


def load_user_model(spec: str) -> BuiltModel:
    """Import ``package.module:function``, call it, check what it returned.
    Raises :class:`GpuscaleError` with one line for every way the spec is wrong;
    exceptions raised inside the user's function propagate (with their traceback)."""
    module_name, _, func_name = spec.partition(":")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: the current directory is importable
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise GpuscaleError(
                f"--model {spec}: cannot import module {module_name!r} "
                "(run from the directory that holds it, or install it)"
            ) from exc
        raise
    func = getattr(module, func_name, None)
    if func is None or not callable(func):
        raise GpuscaleError(f"--model {spec}: module {module_name!r} has no function {func_name!r}")
    result = func()
    dataset = None
    if isinstance(result, tuple):
        if len(result) != 2:
            raise GpuscaleError(
                f"--model {spec}: {func_name}() returned a tuple of {len(result)}; "
                "expected a Keras model or (model, dataset)"
            )
        result, dataset = result
        if not isinstance(dataset, tf.data.Dataset):
            raise GpuscaleError(
                f"--model {spec}: the second value {func_name}() returned is "
                f"{type(dataset).__name__!r}, not a tf.data.Dataset"
            )
    if not isinstance(result, keras.Model):
        raise GpuscaleError(
            f"--model {spec}: {func_name}() returned {type(result).__name__!r}, "
            "not a Keras model (or (model, dataset))"
        )
    model = result
    try:
        input_shape = model.input_shape
        output_shape = model.output_shape
    except (AttributeError, ValueError) as exc:
        raise GpuscaleError(
            f"--model {spec}: the model is not built (give it a keras.Input): {exc}"
        ) from exc
    if isinstance(input_shape, list) or isinstance(output_shape, list):
        raise GpuscaleError(
            f"--model {spec}: models with several inputs or outputs are not supported"
        )
    if any(d is None for d in input_shape[1:]):
        raise GpuscaleError(
            f"--model {spec}: input shape {input_shape} has unknown dimensions; give keras.Input a full shape"
        )
    num_classes = output_shape[-1]
    if len(output_shape) != 2 or not num_classes or num_classes < 2:
        raise GpuscaleError(
            f"--model {spec}: output shape {output_shape}; expected (batch, classes) with at least 2 classes"
        )
    dtype = model.inputs[0].dtype
    dtype = getattr(dtype, "name", str(dtype))
    input_dtype = "int32" if "int" in dtype else "float32"
    vocab = None
    if input_dtype == "int32":
        embeddings = [layer for layer in model.layers if isinstance(layer, keras.layers.Embedding)]
        vocab = embeddings[0].input_dim if embeddings else 2
    return BuiltModel(
        model,
        tuple(int(d) for d in input_shape[1:]),
        input_dtype,
        int(num_classes),
        from_logits=not _is_softmax(model.layers[-1]),
        vocab_size=vocab,
        dataset=dataset,
    )
