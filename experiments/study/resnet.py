"""A small ResNet-style model with BatchNorm (two residual blocks): a model nobody tuned for this harness
(docs/study.md).
"""

import keras


def _block(x, filters, stride):
    shortcut = x
    y = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
    y = keras.layers.BatchNormalization()(y)
    y = keras.layers.Activation("relu")(y)
    y = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(y)
    y = keras.layers.BatchNormalization()(y)
    if stride != 1 or shortcut.shape[-1] != filters:
        shortcut = keras.layers.Conv2D(filters, 1, strides=stride, use_bias=False)(shortcut)
        shortcut = keras.layers.BatchNormalization()(shortcut)
    return keras.layers.Activation("relu")(keras.layers.Add()([y, shortcut]))


def build(input_shape, num_classes, filters=16):
    inputs = keras.Input(input_shape)
    x = keras.layers.Conv2D(filters, 3, padding="same", use_bias=False)(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.Activation("relu")(x)
    x = _block(x, filters, 1)
    x = _block(x, 2 * filters, 2)
    x = keras.layers.GlobalAveragePooling2D()(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(x))
