"""The compiled model a worker keeps between runs, and what decides whether the next run may reuse it.

A worker trains many runs of one architecture, and tracing Keras's training and evaluation
functions costs 4-5 s per run on a CPU (docs/levers.md). So the last compiled model (one run's,
or a pack's towers, sweep/train/pack.py) is kept by the worker's session (`Compiled`,
sweep/train/session.py) and reused by the next run whose graph is the same (`graph_key`): it gets
that run's freshly initialised weights and a zeroed optimizer, and trains bit for bit like a fresh
model (tests/test_train.py). A model is kept only once its runs trained to their ends with none
diverged; another graph, or a run that failed, builds a fresh one.

Seeding is in one place (`seed_everything`): weights from a sub-seed of the run seed (data order
has its own, sweep/train/data.py), and TensorFlow op determinism on, so the same spec gives
identical records (timings aside).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep.base.seeds import derive_seed
from sweep.config import declared
from sweep.config.plan import RunSpec
from sweep.train import backends, devices

EVAL_BATCH = 512  # fixed, so evaluation numbers do not depend on the training batch size
# Small batches run this many images per call into TensorFlow (steps_per_execution), so the
# Python side of a step is paid once per 128 images: 1.20x less CPU at batch 8, same numbers.
IMAGES_PER_EXECUTION = 128


@dataclass
class Compiled:
    """A compiled model (one run's, or a pack's) with its strategy and what was traced for it, for the next
    run of the same graph (`key`, `graph_key`'s): a session keeps it between trainers (sweep/train/session.py).
    """

    key: tuple
    model: Any
    strategy: Any
    gradient: Any = None  # the noise-scale gradient function of this model, made on first use
    twin: Any = None  # its recalibrated-BatchNorm evaluator (sweep/train/recal.py), made on first use


def graph_key(spec: RunSpec, num_classes: int, lr: Any, replicas: devices.Replicas) -> tuple:
    """Everything that shapes a compiled model's graph: the values of the keys declared to (`keys.GRAPH`),
    and what the graph takes from other keys: the number of classes, the replicas, the steps per execution
    (from the batch size) and a warm-up schedule's numbers, which are traced into it. A constant learning
    rate is not in it: it is a variable, set per run.
    """
    cfg = spec.point.train
    schedule = lr.get_config() if not isinstance(lr, float) else None
    shaping = tuple(spec.point.value(name) for name in declared.graph_keys())
    return (*shaping, num_classes, schedule, replicas, steps_per_execution(cfg.batch_size, len(replicas.devices)))


def steps_per_execution(batch_size: int, replicas: int) -> int:
    """Optimizer steps per call into TensorFlow. One under MirroredStrategy: there Keras's
    multi-step loop fails ("You must feed a value for placeholder tensor", Keras 3.15). One on
    torch: Keras's torch trainer takes no other.
    """
    if replicas > 1 or backends.current() == backends.TORCH:
        return 1
    return max(1, IMAGES_PER_EXECUTION // batch_size)


def reset_compiled(model: Any, fresh: Any, lr: Any) -> None:
    """Make a compiled model start where `fresh` (a newly built, uncompiled model of the same
    architecture) starts: its weights, a zeroed optimizer, this learning rate (a float is assigned;
    a schedule is part of the compiled graph). Its traced functions are kept, so the next `fit`
    does not trace again; the numbers are a fresh model's (tests/test_train.py).
    """
    model.set_weights(fresh.get_weights())
    zero_optimizer(model.optimizer)
    if isinstance(lr, float):
        model.optimizer.learning_rate = lr
    model.stop_training = False


def zero_optimizer(optimizer: Any) -> None:
    """An optimizer as before its first step: the step count, Adam's moments, SGD's momentum zeroed;
    its learning rate left as it is.
    """
    for variable in optimizer.variables:
        if "learning_rate" not in variable.path:
            variable.assign(np.zeros(variable.shape, variable.dtype))


def seed_everything(seed: int) -> None:
    """Weights from the run seed's "init" sub-seed; on TensorFlow, op determinism too (JAX on the
    CPU is deterministic as it is). On torch, deterministic algorithms: an op without a
    deterministic kernel raises rather than vary (on the CPU they all have one; on CUDA cuBLAS
    needs its fixed workspace, set before it starts). The same records then need the same intra-op
    thread count too (RunInfo.threads), as on TensorFlow.
    """
    import keras

    set_random_seed(derive_seed(seed, "init"))
    if keras.backend.backend() == backends.TENSORFLOW:
        import tensorflow as tf

        tf.config.experimental.enable_op_determinism()
    elif keras.backend.backend() == backends.TORCH:
        import torch

        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)


def set_random_seed(seed: int) -> None:
    """`keras.utils.set_random_seed` (Keras 3.15), without its `tf.random.set_seed` off TensorFlow:
    that imports TensorFlow whenever it is installed, and only TensorFlow's own ops read it. The
    rest is the state it sets: its global seed and fresh global seed generator (drawn from
    Python's `random`), Python's and numpy's generators, and torch's on torch.
    """
    import random

    import keras

    if keras.backend.backend() == backends.TENSORFLOW:
        keras.utils.set_random_seed(seed)
        return
    from keras.src.backend.common import global_state  # no public setter for these two
    from keras.src.random import seed_generator
    from keras.src.utils import rng_utils

    global_state.set_global_attribute(rng_utils.GLOBAL_RANDOM_SEED, seed)
    global_state.set_global_attribute(seed_generator.GLOBAL_SEED_GENERATOR, None)
    random.seed(seed)
    np.random.seed(seed)
    if keras.backend.backend() == backends.TORCH:
        import torch

        torch.manual_seed(seed)
