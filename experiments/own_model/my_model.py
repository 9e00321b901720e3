# my_model.py
import keras


def build(input_shape, num_classes, filters=16, dropout=0.0):
    inputs = keras.Input(input_shape)
    x = keras.layers.Conv2D(filters, 3, padding="same", activation="relu")(inputs)
    x = keras.layers.BatchNormalization()(x)
    x = keras.layers.MaxPooling2D()(x)
    x = keras.layers.Conv2D(2 * filters, 3, padding="same", activation="relu")(x)
    x = keras.layers.GlobalAveragePooling2D()(x)
    x = keras.layers.Dropout(dropout)(x)
    return keras.Model(inputs, keras.layers.Dense(num_classes, activation="softmax")(x))
