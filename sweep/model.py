"""The classifier family: a small CNN, about 70k parameters at 120 classes.

Four blocks of 3x3 convolution -> BatchNormalization (optional) -> ReLU ->
2x2 max-pooling, then global average pooling and a softmax layer. At
`width: 1.0` and 120 classes it has about 72k trainable parameters (the post's
"70k-parameter model"; tests pin the range 60k-80k). Global pooling keeps the
count independent of the image size. Channels grow as the resolution shrinks,
so the parameters sit in the cheap late layers: about 5.8 MFLOP per 32x32
image forward, half of a three-block design with the same parameter count.
"""

from __future__ import annotations

import math
from typing import Any

from sweep.config import ModelConfig

BASE_CHANNELS = (16, 32, 48, 96)


def channels(width: float) -> tuple[int, ...]:
    return tuple(max(4, round(c * width)) for c in BASE_CHANNELS)


def build_model(cfg: ModelConfig, image_size: int, num_classes: int) -> Any:
    """A fresh, uncompiled `keras.Model`."""
    import keras
    from keras import layers

    inputs = keras.Input((image_size, image_size, 1), name="image")
    x = inputs
    for i, filters in enumerate(channels(cfg.width)):
        # No conv bias under BatchNorm: its beta makes the bias redundant.
        x = layers.Conv2D(filters, 3, padding="same", use_bias=not cfg.batchnorm, name=f"conv{i}")(x)
        if cfg.batchnorm:
            x = layers.BatchNormalization(momentum=cfg.bn_momentum, name=f"bn{i}")(x)
        x = layers.ReLU(name=f"relu{i}")(x)
        x = layers.MaxPooling2D(2, padding="same", name=f"pool{i}")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    outputs = layers.Dense(num_classes, activation="softmax", name="classes")(x)
    return keras.Model(inputs, outputs, name="glyphnet")


def trainable_parameters(model: Any) -> int:
    return int(sum(math.prod(w.shape) for w in model.trainable_weights))
