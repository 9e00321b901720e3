"""Which Keras backend trains, and what the trainer can do on it.

The backend is the process's, as Keras reads it (`KERAS_BACKEND`, else `keras.json`, else
tensorflow); it is not a grid key. It is a fact of every run (`backend` in runs.csv) and part of
what makes two runs comparable: the report never pairs runs across backends (sweep/analysis/settings.py).

On TensorFlow everything works. On JAX and torch the trainer runs the default path and most
controls: training, evaluation, recalibrated BatchNorm evaluation, the noise scale, data feeding as
numpy batches, packed runs (`--pack`); on JAX also replicas (`keras.distribution`), while torch
trains one device per run. What a backend cannot do yet is refused by `check` before anything is
queued or trained, one line per refusal, so a grid never fails halfway. This module imports neither
Keras nor TensorFlow.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from sweep import vocab
from sweep.exits import UsageError

if TYPE_CHECKING:
    from sweep.config import PointConfig

TENSORFLOW, JAX, TORCH = vocab.TENSORFLOW, "jax", "torch"
SUPPORTED = (TENSORFLOW, JAX, TORCH)


class UnsupportedError(UsageError):
    """The grid or the command asks for something the current backend cannot do: exit 2, one line."""


def current() -> str:
    """The backend Keras will use in this process, found as Keras finds it, without importing it."""
    named = os.environ.get("KERAS_BACKEND")
    if named:
        return named
    home = os.environ.get("KERAS_HOME") or str(Path.home() / ".keras")
    try:
        config = json.loads((Path(home) / "keras.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return TENSORFLOW
    return str(config.get("backend") or TENSORFLOW) if isinstance(config, dict) else TENSORFLOW


def is_tensorflow() -> bool:
    return current() == TENSORFLOW


def check(source: str, points: Iterable[PointConfig]) -> None:
    """Raise UnsupportedError naming the first key (and value) the current backend cannot train.

    `points` are the grid's points. Nothing to check on TensorFlow.
    """
    backend = current()
    if backend == TENSORFLOW:
        return
    where = f"{source}: " if source else ""
    tail = f"is not supported on the {backend} backend (KERAS_BACKEND={backend})"
    if backend not in SUPPORTED:
        raise UnsupportedError(f"{where}training {tail}; use KERAS_BACKEND={' or '.join(SUPPORTED)}")
    for point in points:
        train = point.train
        if backend == TORCH and train.gpus > 1:
            raise UnsupportedError(
                f"{where}train.gpus: {train.gpus} {tail}; use gpus: 1, or KERAS_BACKEND=tensorflow or jax"
            )


def jit_compile() -> bool:
    """Keras's `jit_compile` for every model the trainer compiles. Off on TensorFlow: XLA is off under
    op determinism anyway. On JAX, on: without it Keras runs every step op by op, not through jax.jit.
    Off on torch: there it means torch.compile, which costs more to compile than these small runs take.
    """
    return current() == JAX
