"""The gradient noise scale B_simple (McCandlish et al. 2018, "An Empirical Model of Large-Batch Training").

B_simple = tr(Sigma) / |G|^2: the per-example gradient covariance's trace over the
squared norm of the true gradient. Below it, doubling the batch nearly halves the
steps needed; far above it, a larger batch mostly wastes images.

Their appendix A.1 estimator: the expected squared norm of a batch-B gradient is
|G|^2 + tr(Sigma) / B, so squared norms measured at two batch sizes give unbiased
estimates of both terms. Each estimate alone is noisy, so the two terms are
averaged separately over several measurements before taking their ratio.

Here the small batch is the run's own batch (so BatchNorm sees the batch it trains
with) and the big batch is the mean of `MICRO_BATCHES` small-batch gradients.
Measuring runs the model in training mode and restores BatchNorm's moving
statistics afterwards, so the run's own numbers do not change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep.train import backends

MICRO_BATCHES = 4  # small-batch gradients averaged into one big-batch gradient
IMAGES_PER_MEASUREMENT = 1024  # images per record, whatever the batch size (groups = this / (4 x batch))


@dataclass(frozen=True)
class NoiseScale:
    """One record's estimate: |G|^2, tr(Sigma) and their ratio B_simple (NaN if |G|^2 <= 0)."""

    grad_norm_sq: float
    grad_noise_trace: float

    @property
    def b_simple(self) -> float:
        return self.grad_noise_trace / self.grad_norm_sq if self.grad_norm_sq > 0 else float("nan")


def estimate(small_sq: float, big_sq: float, b_small: int, b_big: int) -> NoiseScale:
    """Unbiased |G|^2 and tr(Sigma) from mean squared gradient norms at batch sizes b_small < b_big."""
    grad_norm_sq = (b_big * big_sq - b_small * small_sq) / (b_big - b_small)
    trace = (small_sq - big_sq) / (1.0 / b_small - 1.0 / b_big)
    return NoiseScale(float(grad_norm_sq), float(trace))


def measure(
    gradient: Callable[[np.ndarray, np.ndarray], np.ndarray],
    x: np.ndarray,
    y: np.ndarray,
    batch: int,
    rng: np.random.Generator,
    images: int = IMAGES_PER_MEASUREMENT,
) -> NoiseScale:
    """Estimate from groups of MICRO_BATCHES disjoint batches drawn from (x, y).

    `gradient(xb, yb)` returns the flattened mean gradient of a batch. Per group: the
    mean squared norm of its small-batch gradients, and the squared norm of their mean
    (one gradient over MICRO_BATCHES x batch images); both averaged over the groups.
    """
    per_group = MICRO_BATCHES * batch
    groups = max(1, images // per_group)
    small, big = [], []
    for _ in range(groups):
        rows = rng.choice(len(y), size=min(per_group, len(y)), replace=False)
        grads = [gradient(x[part], y[part]) for part in np.array_split(rows, MICRO_BATCHES)]
        small.append(np.mean([float(g @ g) for g in grads]))
        mean = np.mean(grads, axis=0)
        big.append(float(mean @ mean))
    return estimate(float(np.mean(small)), float(np.mean(big)), len(rows) // MICRO_BATCHES, len(rows))


def keras_gradient(model: Any, loss: Callable[[Any, Any], Any]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """`gradient(xb, yb)` for a Keras model in training mode, by the backend's own autodiff. It may
    move BatchNorm's moving statistics: call it inside `preserved(model)`.
    """
    import keras

    backend = keras.backend.backend()
    if backend == backends.JAX:
        return _jax_gradient(model, loss)
    if backend == backends.TORCH:
        return _torch_gradient(model, loss)
    import tensorflow as tf

    @tf.function(reduce_retracing=True)
    def grads(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            value = loss(yb, model(xb, training=True))
        return tf.concat([tf.reshape(g, [-1]) for g in tape.gradient(value, model.trainable_variables)], 0)

    return lambda xb, yb: grads(tf.constant(xb), tf.constant(yb)).numpy().astype(np.float64)


def _jax_gradient(model: Any, loss: Callable[[Any, Any], Any]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """jax.grad of the loss over the trainable values, through `stateless_call` (which leaves the
    model's variables alone), compiled once per batch shape.
    """
    import jax

    def value(trainable: list[Any], non_trainable: list[Any], xb: Any, yb: Any) -> Any:
        predicted, _ = model.stateless_call(trainable, non_trainable, xb, training=True)
        return loss(yb, predicted)

    grads = jax.jit(jax.grad(value))

    def gradient(xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
        found = grads(
            [v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables], xb, yb
        )
        return _flat(found)

    return gradient


def _torch_gradient(model: Any, loss: Callable[[Any, Any], Any]) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """torch.autograd.grad of the loss over the trainable variables, op by op (as torch trains here)."""
    import keras
    import torch

    def gradient(xb: np.ndarray, yb: np.ndarray) -> np.ndarray:
        value = loss(keras.ops.convert_to_tensor(yb), model(keras.ops.convert_to_tensor(xb), training=True))
        found = torch.autograd.grad(value, [v.value for v in model.trainable_variables])
        return _flat([g.detach().cpu() for g in found])

    return gradient


def _flat(arrays: list[Any]) -> np.ndarray:
    """The gradients of every variable as one float64 vector."""
    return np.concatenate([np.asarray(a).reshape(-1) for a in arrays]).astype(np.float64)


@contextmanager
def preserved(model: Any) -> Iterator[None]:
    """Put the model's non-trainable state (BatchNorm's moving statistics) back as it was."""
    saved = [v.numpy() for v in model.non_trainable_variables]
    try:
        yield
    finally:
        for variable, value in zip(model.non_trainable_variables, saved, strict=True):
            variable.assign(value)
