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

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep import vocab
from sweep.train import backends

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
        self.model = build()
        self.model.compile(
            loss="sparse_categorical_crossentropy",
            metrics=list(vocab.COMPILE_METRICS),
            jit_compile=backends.jit_compile(),
        )
        self.norms = batch_norms(self.model)
        self.eval_batch = eval_batch
        if self.norms:  # a model without BatchNorm has nothing to recalibrate
            of_chunk = statistics_of(self.model, self.norms)
            self._moments = traced(lambda chunks: [of_chunk(chunks[0])])

    def evaluate(
        self, weights: list[np.ndarray], split: Any, eval_batches: Callable[[Any, Any, int], Any]
    ) -> Recalibrated:
        """Numbers of a model with these weights, its BatchNorm statistics recomputed on split.x_train_eval;
        evaluated on `eval_batches` of the sets (the trainer's, `Session.eval_batches`).
        """
        self.model.set_weights(weights)
        if self.norms:
            self._recalibrate(split.x_train_eval)
        train = self.model.evaluate(eval_batches(split.x_train_eval, split.y_train_eval, self.eval_batch), **QUIET)
        val = self.model.evaluate(eval_batches(split.x_val, split.y_val, self.eval_batch), **QUIET)
        return Recalibrated(
            train_eval_acc=float(train["accuracy"]),
            train_eval_loss=float(train["loss"]),
            val_acc=float(val["accuracy"]),
            val_loss=float(val["loss"]),
        )

    def _recalibrate(self, x: np.ndarray) -> None:
        """Set every BatchNorm layer's moving mean and variance to its input's pooled statistics over x."""
        set_statistics([self.norms], self._moments, [x])


def batch_norms(model: Any) -> list[Any]:
    """A model's BatchNorm layers (subclasses such as ghost batch norm included)."""
    import keras

    return [layer for layer in model.layers if isinstance(layer, keras.layers.BatchNormalization)]


def statistics_of(model: Any, norms: list[Any]) -> Any:
    """A function of a chunk of images: each BatchNorm layer's input (mean, variance) per channel over
    the chunk's images and positions, in float32, from one training-mode pass of `model` (its twin).

    Training mode: each BatchNorm normalises with its chunk's statistics, so every layer's input is
    what it would be with recalibrated statistics above it. Where every layer is Keras's own
    BatchNormalization, its own moments are read: with momentum 0 a training-mode call leaves a
    layer's moving mean and variance at the moments it normalised with, so they are computed once,
    as in training (a pass 1.15x faster than reducing the inputs again at two threads, the same
    statistics bit for bit; docs/levers.md). Any other (ghost batch norm averages its sub-batches' moments,
    renorm corrects them) has its inputs reduced by a probe instead (`moments`).
    """
    import keras

    if not norms:
        return lambda chunk: []
    if all(_plain(layer) for layer in norms):
        for layer in norms:
            layer.momentum = 0.0  # the twin's only: its moving statistics are overwritten at every record
        if keras.backend.backend() == backends.JAX:
            return _compiled_on_jax(model, norms)

        def own(chunk: Any) -> list[tuple[Any, Any]]:
            model(chunk, training=True)
            convert = keras.ops.convert_to_tensor
            return [(convert(layer.moving_mean), convert(layer.moving_variance)) for layer in norms]

        return own
    probe = keras.Model(model.inputs, [layer.input for layer in norms])
    return lambda chunk: moments(as_list(probe(chunk, training=True)))


def _compiled_on_jax(model: Any, norms: list[Any]) -> Any:
    """`statistics_of`'s own-moments pass on JAX, compiled: `jax.jit` over Keras's stateless training-mode
    call, whose updated non-trainable variables hold each layer's moments (eagerly, every op of the
    pass would be dispatched on its own, as `traced` leaves it on JAX).
    """
    import jax

    index = {id(variable): k for k, variable in enumerate(model.non_trainable_variables)}
    where = [(index[id(layer.moving_mean)], index[id(layer.moving_variance)]) for layer in norms]
    updated = jax.jit(lambda trainable, fixed, chunk: model.stateless_call(trainable, fixed, chunk, training=True)[1])

    def own(chunk: Any) -> list[tuple[Any, Any]]:
        trainable = [variable.value for variable in model.trainable_variables]
        fixed = updated(trainable, [variable.value for variable in model.non_trainable_variables], chunk)
        return [(fixed[mean], fixed[variance]) for mean, variance in where]

    return own


def moments(inputs: list[Any]) -> list[tuple[Any, Any]]:
    """Per channel (last axis), each BatchNorm input's mean and variance over its chunk's images and
    positions, in float32: computed inside the traced pass, so only these vectors leave it.
    """
    import keras

    found = []
    for values in inputs:
        axes = tuple(range(len(values.shape) - 1))
        found.append((keras.ops.mean(values, axis=axes), keras.ops.var(values, axis=axes)))
    return found


def _plain(layer: Any) -> bool:
    """Keras's own BatchNormalization, training-mode statistics as it computes them."""
    import keras

    return type(layer) is keras.layers.BatchNormalization and layer.trainable and not layer.renorm


def traced(pass_: Any) -> Any:
    """The statistics pass, traced once on TensorFlow (reduce_retracing: a last short chunk); on JAX
    and torch it runs eagerly.
    """
    import keras

    if keras.backend.backend() == backends.TENSORFLOW:
        import tensorflow as tf

        return tf.function(pass_, reduce_retracing=True)
    return pass_


def set_statistics(norms: list[list[Any]], moments_of: Any, xs: list[np.ndarray]) -> None:
    """Set each model's BatchNorm moving means and variances to their inputs' pooled statistics.

    `norms[k]` are model k's BatchNorm layers and `xs[k]` its images (all of one length);
    `moments_of(chunks)` returns, for each model, each BatchNorm layer's (mean, variance) on its
    chunk (`moments`), in training mode. A pack (sweep/train/pack.py) probes its K towers in one
    call; a run alone, K = 1. Chunks are pooled in float64 (`pool`).
    """
    import keras

    found: list[list[list[Chunk]]] = [[[] for _ in layers] for layers in norms]
    for start in range(0, len(xs[0]), RECAL_BATCH):
        chunks = [x[start : start + RECAL_BATCH] for x in xs]
        images = len(chunks[0])  # every layer of a model sees as many positions per image in every chunk
        for kept, model_moments in zip(found, moments_of(chunks), strict=True):
            for layer_kept, (mean, var) in zip(kept, model_moments, strict=True):
                layer_kept.append((images, keras.ops.convert_to_numpy(mean), keras.ops.convert_to_numpy(var)))
    for layers, kept in zip(norms, found, strict=True):
        for layer, chunks_of_layer in zip(layers, kept, strict=True):
            mean, var = pool(chunks_of_layer)
            layer.moving_mean.assign(mean.astype(np.float32))
            layer.moving_variance.assign(var.astype(np.float32))


Chunk = tuple[int, np.ndarray, np.ndarray]  # (images, per-channel mean, per-channel variance) of one chunk


def pool(chunks: list[Chunk]) -> tuple[np.ndarray, np.ndarray]:
    """The per-channel mean and variance of all chunks' values together, from each chunk's own, in
    float64: means weighted by images, and the variance as the mean squared deviation within chunks
    plus that of the chunk means around the pooled mean (the law of total variance).
    """
    weights = np.array([images for images, _, _ in chunks], np.float64)[:, None] / sum(c[0] for c in chunks)
    means = np.stack([np.asarray(m, np.float64) for _, m, _ in chunks])
    variances = np.stack([np.asarray(v, np.float64) for _, _, v in chunks])
    mean = (weights * means).sum(axis=0)
    return mean, (weights * (variances + (means - mean) ** 2)).sum(axis=0)


def as_list(inputs: Any) -> list[Any]:
    """A probe's output as a list (a model with one BatchNorm layer returns its input alone)."""
    return list(inputs) if isinstance(inputs, list | tuple) else [inputs]
