"""The classifier family: a small CNN, about 70k parameters at 120 classes.

Four blocks of 3x3 convolution -> BatchNormalization (optional) -> ReLU ->
2x2 max-pooling, then global average pooling and a softmax layer. At
`width: 1.0` and 120 classes it has about 72k trainable parameters (the post's
"70k-parameter model"; tests pin the range 60k-80k). Global pooling keeps the
count independent of the image size. Channels grow as the resolution shrinks,
so the parameters sit in the cheap late layers: about 5.8 MFLOP per 32x32
image forward, half of a three-block design with the same parameter count.

`model.ghost_batch_size` swaps BatchNormalization for `GhostBatchNormalization`
(Hoffer et al. 2017): in training, each consecutive sub-batch of that many
images is normalised with its own mean and variance, so the normalisation
batch stays the same when the batch size changes. Inference uses the moving
statistics as usual. Under MirroredStrategy each replica splits its own share
of the batch.

`model.builder` replaces the CNN with the user's own model (sweep/train/usercode.py);
ghost batch norm then swaps the BatchNormalization layers of that model, when it
is a functional or Sequential one, for `GhostBatchNormalization` with the same
settings.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from sweep.config import ModelConfig
from sweep.train import backends

BASE_CHANNELS = (16, 32, 48, 96)


def channels(width: float) -> tuple[int, ...]:
    return tuple(max(4, round(c * width)) for c in BASE_CHANNELS)


def build_model(cfg: ModelConfig, image_size: int, num_classes: int, channels_in: int = 1) -> Any:
    """A fresh, uncompiled `keras.Model`: the built-in CNN, or the user's (`model.builder`)."""
    if cfg.builder:
        from sweep.train import usercode

        model = usercode.build_model(cfg.builder, cfg.options, (image_size, image_size, channels_in), num_classes)
        return with_ghost_batch_norm(model, cfg.ghost_batch_size) if cfg.ghost_batch_size else model
    return _built_in(cfg, image_size, num_classes, channels_in)


def _built_in(cfg: ModelConfig, image_size: int, num_classes: int, channels_in: int) -> Any:
    import keras
    from keras import layers

    inputs = keras.Input((image_size, image_size, channels_in), name="image")
    x = inputs
    for i, filters in enumerate(channels(cfg.width)):
        # No conv bias under BatchNorm: its beta makes the bias redundant.
        x = layers.Conv2D(filters, 3, padding="same", use_bias=not cfg.batchnorm, name=f"conv{i}")(x)
        if cfg.batchnorm and cfg.ghost_batch_size:
            x = ghost_batch_norm_class()(cfg.ghost_batch_size, momentum=cfg.bn_momentum, name=f"bn{i}")(x)
        elif cfg.batchnorm:
            x = layers.BatchNormalization(momentum=cfg.bn_momentum, name=f"bn{i}")(x)
        x = layers.ReLU(name=f"relu{i}")(x)
        x = layers.MaxPooling2D(2, padding="same", name=f"pool{i}")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    outputs = layers.Dense(num_classes, activation="softmax", name="classes")(x)
    return keras.Model(inputs, outputs, name="glyphnet")


def with_ghost_batch_norm(model: Any, ghost_batch_size: int) -> Any:
    """The user's model with each BatchNormalization layer replaced by a ghost one of the same settings."""
    import keras

    from sweep.train.usercode import UserCodeError

    def swap(layer: Any) -> Any:
        if type(layer) is keras.layers.BatchNormalization:
            return ghost_batch_norm_class()(ghost_batch_size, **layer.get_config())
        return layer.__class__.from_config(layer.get_config())

    if not any(type(layer) is keras.layers.BatchNormalization for layer in model.layers):
        raise UserCodeError(
            "model.ghost_batch_size: the model of model.builder has no BatchNormalization layer to swap"
        )
    try:
        return keras.models.clone_model(model, clone_function=swap)
    except (ValueError, TypeError) as err:  # a subclassed model cannot be cloned layer by layer
        raise UserCodeError(
            f"model.ghost_batch_size needs a functional or Sequential model from model.builder to swap "
            f"its BatchNormalization layers ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
        ) from None


def trainable_parameters(model: Any) -> int:
    return int(sum(math.prod(w.shape) for w in model.trainable_weights))


@functools.cache  # one class per process; it subclasses a Keras layer, so it is made on first use
def ghost_batch_norm_class() -> Any:
    """The `GhostBatchNormalization` layer class."""
    import keras
    from keras import ops

    class GhostBatchNormalization(keras.layers.BatchNormalization):
        """BatchNormalization whose training statistics come from ghost batches of `ghost_batch_size` images.

        Channels-last 4-D inputs. A batch not divisible by the ghost size (an epoch's
        short last batch) ends with one smaller ghost. The moving mean and variance
        are updated with the averages of the ghost means and variances, weighted by
        ghost size (what tf.keras' `virtual_batch_size` did).
        """

        def __init__(self, ghost_batch_size: int, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.ghost_batch_size = ghost_batch_size

        def call(self, inputs: Any, training: Any = None, mask: Any = None) -> Any:
            if not (training and self.trainable):
                return super().call(inputs, training=training, mask=mask)
            x = ops.cast(inputs, "float32")
            ghost = ops.arange(ops.shape(x)[0]) // self.ghost_batch_size  # each image's ghost batch
            ghosts = self._ghost_count(ops.shape(x)[0])
            mean = self._per_image(ops.mean(x, axis=(1, 2)), ghost, ghosts)  # (N, C): its ghost's mean
            centred = x - mean[:, None, None, :]
            variance = self._per_image(ops.mean(ops.square(centred), axis=(1, 2)), ghost, ghosts)
            self.moving_mean.assign(self.moving_mean * self.momentum + ops.mean(mean, axis=0) * (1.0 - self.momentum))
            self.moving_variance.assign(
                self.moving_variance * self.momentum + ops.mean(variance, axis=0) * (1.0 - self.momentum)
            )
            outputs = centred * ops.rsqrt(variance + self.epsilon)[:, None, None, :] * self.gamma + self.beta
            return ops.cast(outputs, self.compute_dtype)

        def _ghost_count(self, images: Any) -> int | None:
            """Ghost batches in a batch of `images`. JAX needs it (a static shape under jit); TensorFlow's
            batch size is dynamic in its graph, and it counts them itself (as it always has: same numbers).
            """
            if keras.backend.backend() == backends.TENSORFLOW:
                return None
            return -(-int(images) // self.ghost_batch_size)

        @staticmethod
        def _per_image(values: Any, ghost: Any, ghosts: int | None) -> Any:
            """Average per-image values (N, C) over each ghost batch, then hand each image its ghost's average."""
            totals = ops.segment_sum(values, ghost, num_segments=ghosts, sorted=True)
            counts = ops.segment_sum(ops.ones_like(values[:, :1]), ghost, num_segments=ghosts, sorted=True)
            return ops.take(totals / counts, ghost, axis=0)

        def get_config(self) -> dict[str, Any]:
            return {**super().get_config(), "ghost_batch_size": self.ghost_batch_size}

    return GhostBatchNormalization
