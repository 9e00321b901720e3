"""Evaluation with recalibrated BatchNorm statistics: the model without BatchNorm's lag.

In inference mode BatchNorm normalises with moving averages of the batch
statistics it saw in training (momentum 0.99: after n steps, 0.99**n of the
average is still its initial value, 0.38 after 95 steps). Early in training, or
after few steps at a large batch size, those averages lag far behind the
current weights, and inference-mode accuracy is low although the weights fit
the data. Recalibration (the "precise BN" of Wu & Johnson 2021, "Rethinking
'Batch' in BatchNorm") replaces them with the statistics of the current
weights: one forward pass in training mode over a fixed training subset (the
run's `train_eval` images, training preprocessing) in batches of
`RECAL_BATCH`, pooling every BatchNorm layer's input mean and variance over all
images and positions. Evaluation then runs in inference mode as usual.

The run's own model is never touched: the pass and the evaluation use a twin
(the same architecture, built once per compiled model, outside any
distribution strategy) that receives the run's weights at each record. So
training and every other number of the record are exactly as without it
(tests/test_recal.py). A model without BatchNorm has nothing to recalibrate:
its recalibrated numbers are its raw ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

RECAL_BATCH = 512  # images per forward pass; large, so downstream layers see near-population statistics


@dataclass(frozen=True)
class Recalibrated:
    """Inference-mode accuracy and loss on the train_eval subset and on validation, after recalibration."""

    train_eval_acc: float
    train_eval_loss: float
    val_acc: float
    val_loss: float


class Twin:
    """A compiled copy of a model's architecture that evaluates with recalibrated BatchNorm statistics."""

    def __init__(self, build: Any, eval_batch: int) -> None:
        """`build()` returns a fresh uncompiled model of the run's architecture."""
        import keras
        import tensorflow as tf

        self.model = build()
        self.model.compile(loss="sparse_categorical_crossentropy", metrics=["accuracy"], jit_compile=False)
        self.norms = [layer for layer in self.model.layers if isinstance(layer, keras.layers.BatchNormalization)]
        probe = keras.Model(self.model.inputs, [layer.input for layer in self.norms])
        self.eval_batch = eval_batch
        # Training mode: each BatchNorm normalises with its batch's statistics, so every layer's
        # input is what it would be with recalibrated statistics above it. (It also moves the
        # twin's moving averages; they are overwritten right after.)
        self._inputs = tf.function(lambda x: probe(x, training=True), reduce_retracing=True)

    def evaluate(self, weights: list[np.ndarray], split: Any) -> Recalibrated:
        """Numbers of a model with these weights, its BatchNorm statistics recomputed on split.x_train_eval."""
        self.model.set_weights(weights)
        if self.norms:
            self._recalibrate(split.x_train_eval)
        train = self.model.evaluate(
            split.x_train_eval, split.y_train_eval, batch_size=self.eval_batch, verbose=0, return_dict=True
        )
        val = self.model.evaluate(split.x_val, split.y_val, batch_size=self.eval_batch, verbose=0, return_dict=True)
        return Recalibrated(
            train_eval_acc=float(train["accuracy"]),
            train_eval_loss=float(train["loss"]),
            val_acc=float(val["accuracy"]),
            val_loss=float(val["loss"]),
        )

    def _recalibrate(self, x: np.ndarray) -> None:
        """Set every BatchNorm layer's moving mean and variance to its input's pooled statistics over x."""
        sums = [np.zeros(layer.moving_mean.shape, np.float64) for layer in self.norms]
        squares = [np.zeros_like(s) for s in sums]
        counts = [0] * len(sums)  # values per channel: images x positions, different per layer
        for start in range(0, len(x), RECAL_BATCH):
            inputs = self._inputs(x[start : start + RECAL_BATCH])
            inputs = inputs if isinstance(inputs, list | tuple) else [inputs]
            for i, values in enumerate(inputs):
                flat = values.numpy().astype(np.float64).reshape(-1, values.shape[-1])
                sums[i] += flat.sum(axis=0)
                squares[i] += np.square(flat).sum(axis=0)
                counts[i] += flat.shape[0]
        for layer, total, square, count in zip(self.norms, sums, squares, counts, strict=True):
            mean = total / count
            layer.moving_mean.assign(mean.astype(np.float32))
            layer.moving_variance.assign(np.maximum(square / count - mean**2, 0.0).astype(np.float32))
