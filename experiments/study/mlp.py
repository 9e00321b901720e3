"""A small multi-layer perceptron, no BatchNorm: a model nobody tuned for this harness (docs/study.md)."""

import keras


def build(input_shape, num_classes, units=64):
    inputs = keras.Input(input_shape)
    x = keras.layers.Flatten()(inputs)
    x = keras.layers.Dense(units, activation="relu")(x)
    x = keras.layers.Dense(units, activation="relu")(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(x))
