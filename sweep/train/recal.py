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

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep import vocab
from sweep.train import backends, devices
from sweep.train.data import batches

QUIET: dict[str, Any] = {"verbose": 0, "return_dict": True}
RECAL_BATCH = 512  # images per forward pass; large, so downstream layers see near-population statistics


@dataclass(frozen=True)
class Recalibrated:
    """Inference-mode accuracy and loss on the train_eval subset and on validation, after recalibration."""

    train_eval_acc: float
    train_eval_loss: float
    val_acc: float
    val_loss: float

    def fields(self) -> dict[str, float]:
        """The record's *_recal fields."""
        return {
            vocab.TRAIN_EVAL_ACC_RECAL: self.train_eval_acc,
            vocab.VAL_ACC_RECAL: self.val_acc,
            vocab.TRAIN_EVAL_LOSS_RECAL: self.train_eval_loss,
            vocab.VAL_LOSS_RECAL: self.val_loss,
            vocab.EVAL_GAP_RECAL: self.train_eval_acc - self.val_acc,
        }


class Twin:
    """A compiled copy of a model's architecture that evaluates with recalibrated BatchNorm statistics."""

    def __init__(self, build: Any, eval_batch: int) -> None:
        """`build()` returns a fresh uncompiled model of the run's architecture."""
        import keras

        self.model = build()
        self.model.compile(
            loss="sparse_categorical_crossentropy", metrics=["accuracy"], jit_compile=backends.jit_compile()
        )
        self.norms, probe = norms_and_probe(self.model)
        self.eval_batch = eval_batch
        # Training mode: each BatchNorm normalises with its batch's statistics, so every layer's
        # input is what it would be with recalibrated statistics above it. (It also moves the
        # twin's moving averages; they are overwritten right after.)
        self._inputs = lambda x: probe(x, training=True)
        # traced once; on JAX the pass runs eagerly; a model without BatchNorm has nothing to trace
        if probe is not None and keras.backend.backend() == backends.TENSORFLOW:
            import tensorflow as tf

            self._inputs = tf.function(self._inputs, reduce_retracing=True)

    def evaluate(self, weights: list[np.ndarray], split: Any) -> Recalibrated:
        """Numbers of a model with these weights, its BatchNorm statistics recomputed on split.x_train_eval."""
        self.model.set_weights(weights)
        if self.norms:
            self._recalibrate(split.x_train_eval)
        train = self.model.evaluate(batches(split.x_train_eval, split.y_train_eval, self.eval_batch), **QUIET)
        val = self.model.evaluate(batches(split.x_val, split.y_val, self.eval_batch), **QUIET)
        return Recalibrated(
            train_eval_acc=float(train["accuracy"]),
            train_eval_loss=float(train["loss"]),
            val_acc=float(val["accuracy"]),
            val_loss=float(val["loss"]),
        )

    def _recalibrate(self, x: np.ndarray) -> None:
        """Set every BatchNorm layer's moving mean and variance to its input's pooled statistics over x."""
        set_statistics([self.norms], lambda chunks: [as_list(self._inputs(chunks[0]))], [x])


def norms_and_probe(model: Any) -> tuple[list[Any], Any]:
    """A model's BatchNorm layers, and a model from its inputs to theirs (its probe). Made before the
    model is called inside another, so each input is the one in the model's own graph. A model without
    BatchNorm (a user's MLP) has no statistics to recompute and no probe (None): its recalibrated
    numbers are its own.
    """
    import keras

    norms = [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]
    return norms, (keras.Model(model.inputs, [layer.input for layer in norms]) if norms else None)


def set_statistics(norms: list[list[Any]], probe: Any, xs: list[np.ndarray]) -> None:
    """Set each model's BatchNorm moving means and variances to their inputs' pooled statistics.

    `norms[k]` are model k's BatchNorm layers and `xs[k]` its images (all of one length);
    `probe(chunks)` returns, for each model, the inputs of its BatchNorm layers on its chunk, in
    training mode. A pack (sweep/train/pack.py) probes its K towers in one call; a run alone, K = 1.
    """
    import keras

    sums = [[np.zeros(layer.moving_mean.shape, np.float64) for layer in layers] for layers in norms]
    squares = [[np.zeros_like(s) for s in model_sums] for model_sums in sums]
    counts = [[0] * len(layers) for layers in norms]  # values per channel: images x positions, per layer
    cells = [(k, i) for k, model_norms in enumerate(norms) for i in range(len(model_norms))]
    # The sums are most of a recalibration's time (float64 over every position of every image), and
    # numpy leaves the GIL while it adds: every layer of every model in a thread of its own.
    with ThreadPoolExecutor(max_workers=min(len(cells), devices.cpu_threads()) or 1) as pool:
        for start in range(0, len(xs[0]), RECAL_BATCH):
            found = [
                [np.asarray(keras.ops.convert_to_numpy(v)) for v in inputs]
                for inputs in probe([x[start : start + RECAL_BATCH] for x in xs])
            ]
            flats = [found[k][i].reshape(-1, found[k][i].shape[-1]) for k, i in cells]
            for (k, i), flat, (total, square) in zip(cells, flats, pool.map(_sums, flats), strict=True):
                sums[k][i] += total
                squares[k][i] += square
                counts[k][i] += flat.shape[0]
    for layers, model_sums, model_squares, model_counts in zip(norms, sums, squares, counts, strict=True):
        for layer, total, square, count in zip(layers, model_sums, model_squares, model_counts, strict=True):
            mean = total / count
            layer.moving_mean.assign(mean.astype(np.float32))
            layer.moving_variance.assign(np.maximum(square / count - mean**2, 0.0).astype(np.float32))


def _sums(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per channel (column), the sum and the sum of squares of float32 values, in float64: each value
    and its square cast exactly, added row after row as `flat.astype(float64).sum(axis=0)` adds them
    (the same bits; tests/test_recal.py), without that float64 copy of every value.
    """
    return np.add.reduce(flat, axis=0, dtype=np.float64), np.add.reduce(np.square(flat, dtype=np.float64), axis=0)


def as_list(inputs: Any) -> list[Any]:
    """A probe's output as a list (a model with one BatchNorm layer returns its input alone)."""
    return list(inputs) if isinstance(inputs, list | tuple) else [inputs]
