# recompute_batchnorm.py: copy this function into your own training (it needs only Keras 3).
#
# BatchNorm evaluates with moving averages of the batch statistics it saw in training, which lag behind the
# weights after few steps (a large batch, a short budget). `sweep study` reads val_acc_recal: accuracy with
# those averages recomputed for the final weights. Call this after training, before `evaluate`, to get the
# same numbers in your own training. `images`: training images (a few thousand are enough), preprocessed
# as in training. Batches of 512 give the harness's numbers; in several batches the mean is exact and the
# variance the mean of the batches' own (close, as the batches are large).
import keras


def recompute_batchnorm(model, images, batch_size=512):
    """Set every BatchNorm layer's moving mean and variance to the statistics of the current weights."""
    norms = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    momenta = [layer.momentum for layer in norms]
    seen = 0
    for start in range(0, len(images), batch_size):
        batch = images[start : start + batch_size]
        for layer in norms:  # the moving average becomes the mean over the images so far
            layer.momentum = seen / (seen + len(batch))
        model(batch, training=True)  # a forward pass only: no weight changes
        seen += len(batch)
    for layer, momentum in zip(norms, momenta, strict=True):
        layer.momentum = momentum
