"""One run: `RunSpec -> iterator of EpochRecord`. No file I/O; the worker writes.

Each epoch is one `model.fit(..., initial_epoch=e, epochs=e+1)` call on that
epoch's batches, followed by two inference-mode evaluations: a fixed subset of
the training set (`train_eval_*`) and the validation set (`val_*`). So every
record holds both the number the post read (`train_acc`, Keras's running mean
over the epoch, in training mode, while the weights change) and the number
that is comparable with `val_acc` (`train_eval_acc`, the end-of-epoch model in
inference mode). With `train.recalibrate_bn` both evaluations are repeated with
BatchNorm statistics recomputed for the current weights (`*_recal`, sweep/train/recal.py).

Controls (docs/design.md, "Controls"): the learning rate used is
`optim.effective_lr` (scaled by batch size on request) with an optional linear
warm-up per step; `budget: steps` stops after exactly `train.steps` optimizer
steps; `eval_every_steps` adds records inside an epoch. A record's `epoch` is
then fractional, epochs completed (1.25 = a quarter into epoch 2); at the end
of an epoch it is the integer epoch, as before. An epoch with records inside it
is trained by one `fit` call per stretch between records, and its `train_acc`
and `train_loss` are Keras's running means since the start of the epoch
(stretch means weighted by images). With every control at its default an epoch
is one `fit` call, exactly as before the controls existed.

Seeding is in one place (`seed_everything`): weights from a sub-seed of the
run seed, data order from another, and TensorFlow op determinism on, so the
same spec gives identical records (timings aside).

A worker trains many runs of one architecture, and tracing Keras's training
and evaluation functions costs 4-5 s per run on a CPU (docs/levers.md). So the
last compiled model is kept (`_CompiledCache`) and reused by the next run whose
graph is the same (`graph_key`): it gets that run's freshly initialised weights
and a zeroed optimizer, and trains bit for bit like a fresh model
(tests/test_train.py). `forget_compiled` drops it after a failed run.

`Run.position` says where the run stands after each record, for its checkpoint
(sweep/train/checkpoint.py); `epochs(position)` goes on from a restored one.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from sweep import vocab
from sweep.config import declared, stopping
from sweep.config.plan import RunSpec, derive_seed
from sweep.train import backends, checkpoint, devices, noise, optim, recal, usercode
from sweep.train import data as data_module
from sweep.train import model as model_module
from sweep.train.records import (
    EpochRecord,
    assemble,
    balanced,
    check_finite,
    epoch_number,
    record_stops,
    total_steps,
)

EVAL_BATCH = 512  # fixed, so evaluation numbers do not depend on the training batch size
# Small batches run this many images per call into TensorFlow (steps_per_execution), so the
# Python side of a step is paid once per 128 images: 1.20x less CPU at batch 8, same numbers.
IMAGES_PER_EXECUTION = 128


@dataclass(frozen=True)
class RunInfo:
    """Facts about a run known before its first epoch; columns of runs.csv."""

    parameters: int
    train_samples: int
    val_samples: int
    num_classes: int
    replicas: int
    per_replica_batch: int
    virtual_devices: bool
    devices: str
    steps_per_epoch: int
    skipped_files: int = 0  # dataset folder: non-image files (notes.txt, .DS_Store), left out (docs/inputs.md)
    threads: int = 0  # TensorFlow intra-op threads: the same seed gives the same numbers at the same thread count
    cpu: str = ""  # and on the same CPU model (docs/levers.md, "Same numbers")
    jit_compile: bool = False  # XLA as Keras applied it (it turns it off under op determinism)
    steps_per_execution: int = 1
    reused_model: bool = False  # trained in the previous run's compiled model (fresh weights): no tracing
    pack_size: int = 1  # runs trained as towers of one model (sweep/train/pack.py); epoch_seconds are each one's share
    backend: str = backends.TENSORFLOW  # Keras's backend (KERAS_BACKEND); runs on different backends never pair


class Run:
    """A prepared run: data loaded, model built under its strategy. Iterate `epochs()`."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        self.split = data_module.load_split(spec.point.data)  # seeds of its own: no global random state
        replicas = devices.replicas_for(spec.point.train.gpus)
        batch = spec.point.train.batch_size
        steps_per_epoch = math.ceil(len(self.split.y_train) / batch)
        devices.check_even_split(replicas, len(self.split.y_train), batch)
        self.strategy, self.model, reused = COMPILED.model_for(spec, self.split, steps_per_epoch, replicas)
        self.info = run_info(spec, self.split, self.model, replicas, reused)
        self.callbacks = usercode.callbacks(spec.point.train.callbacks)  # fresh ones per run
        self.stopped_early: int | None = None  # the epoch after which train.early_stopping (or a callback) stopped it
        self.position = checkpoint.Position(0, 0)  # where the run stands after its latest record

    def epochs(self, resume: checkpoint.Position | None = None) -> Iterator[EpochRecord]:
        """The run's records in order; from `resume` on, those after it (a restored checkpoint's).

        Before each record is yielded, `position` says where the run then stands, early stopping's
        verdict at the end of an epoch included, so a checkpoint written at the record is complete.
        """
        cfg, steps_per_epoch = self.spec.point.train, self.info.steps_per_epoch
        stops = record_stops(steps_per_epoch, total_steps(cfg, steps_per_epoch), cfg.eval_every_steps)
        rule = stopping.parse(cfg.early_stopping)
        watch = stopping.Watch(rule) if rule else None
        if watch is not None and resume is not None and resume.watch is not None:
            watch.best, watch.waited = resume.watch[0], int(resume.watch[1])
        if resume is not None and resume.stopped:  # stopped at its last record: nothing left to train
            self.stopped_early = resume.epoch
        for epoch, epoch_stops in enumerate(stops, start=1):
            if resume is not None and (resume.stopped or resume.covers(epoch, len(epoch_stops))):
                continue
            for record in self._one_epoch(epoch, epoch_stops, resume):
                stop = self.position.index == len(epoch_stops) - 1 and (
                    bool(self.model.stop_training) or (watch is not None and watch.stop(record.to_dict()))
                )
                stop = stop and epoch < len(stops)
                state = [watch.best, watch.waited] if watch is not None else None
                self.position = replace(self.position, watch=state, stopped=stop)
                yield record
            if self.position.stopped:
                self.stopped_early = epoch
                break
        for callback in self.callbacks:
            callback.end_run()

    def _one_epoch(self, epoch: int, stops: list[int], resume: checkpoint.Position | None) -> Iterator[EpochRecord]:
        """Train one epoch up to each stop (steps into the epoch) in turn; a record at every stop.
        An epoch a checkpoint stopped inside goes on from there, its running means included.
        """
        split, batch = self.split, self.spec.point.train.batch_size
        order = data_module.epoch_order(split.y_train, self.spec.point.data.shuffle, self.spec.seed, epoch)
        x, y = split.x_train[order], split.y_train[order]
        first = resume.index + 1 if resume is not None and resume.epoch == epoch else 0
        done = 0
        seconds = 0.0
        stretches = []
        if first and resume is not None:
            done = stops[first - 1]
            seconds = resume.seconds
            stretches = [tuple(s) for s in resume.stretches]
        for index in range(first, len(stops)):
            rows = slice(done * batch, stops[index] * batch)  # at the defaults: one stop, every row
            history, took = self._fit(x[rows], y[rows], epoch)
            seconds += took
            stretches.append((float(history["accuracy"][-1]), float(history["loss"][-1]), len(y[rows])))
            done = stops[index]
            record = self._record(epoch_number(epoch, done, self.info.steps_per_epoch), stretches, seconds)
            self.position = checkpoint.Position(epoch, index, [list(s) for s in stretches], seconds)
            yield record

    def timed_epoch(self, epoch: int) -> float:
        """Train one whole epoch with no records and return its seconds (sweep/train/timing.py)."""
        split = self.split
        order = data_module.epoch_order(split.y_train, self.spec.point.data.shuffle, self.spec.seed, epoch)
        return self._fit(split.x_train[order], split.y_train[order], epoch)[1]

    def _fit(self, x: Any, y: Any, epoch: int) -> tuple[dict[str, list[float]], float]:
        import keras

        dataset = data_module.batches(x, y, self.spec.point.train.batch_size)
        started = time.perf_counter()
        with devices.training_scope(self.strategy):
            history = self.model.fit(
                dataset,
                initial_epoch=epoch - 1,
                epochs=epoch,
                verbose=0,
                shuffle=False,
                callbacks=[keras.callbacks.TerminateOnNaN(), *self.callbacks],
            )
        return history.history, time.perf_counter() - started

    def _record(self, epoch: float, stretches: list[tuple[float, float, int]], seconds: float) -> EpochRecord:
        """Evaluate now; train_acc and train_loss are the running means over the epoch's stretches so far."""
        split, cfg = self.split, self.spec.point.train
        step = int(self.model.optimizer.iterations.numpy())
        check_finite(epoch, step, stretches)
        train_eval = self._evaluate(split.x_train_eval, split.y_train_eval)
        val = self._evaluate(split.x_val, split.y_val)
        extra = self._noise_scale(step) if cfg.noise_scale else {}
        if cfg.recalibrate_bn:
            extra |= recalibrated(self.spec, split, self.model.get_weights(), train_eval, val)
        if self.spec.point.data.imbalance:
            predicted = self.model.predict(data_module.batches(split.x_train_eval, None, EVAL_BATCH), verbose=0)
            extra |= balanced(predicted, split.y_train_eval)
        return assemble(epoch, step, stretches, seconds, train_eval, val, optim.current_lr(self.model), extra)

    def _noise_scale(self, step: int) -> dict[str, float]:
        """B_simple at the current weights, from training batches drawn by a sub-seed of the run seed."""
        import keras

        if COMPILED.gradient is None:  # traced once per compiled model, like its training function
            COMPILED.gradient = noise.keras_gradient(self.model, keras.losses.SparseCategoricalCrossentropy())
        rng = np.random.default_rng(derive_seed(self.spec.seed, "noise-scale", step))
        with noise.preserved(self.model):
            measured = noise.measure(
                COMPILED.gradient, self.split.x_train, self.split.y_train, self.spec.point.train.batch_size, rng
            )
        return {
            vocab.NOISE_SCALE: measured.b_simple,
            vocab.GRAD_NORM_SQ: measured.grad_norm_sq,
            vocab.GRAD_NOISE_TRACE: measured.grad_noise_trace,
        }

    def _evaluate(self, x: Any, y: Any) -> dict[str, float]:
        result = self.model.evaluate(data_module.batches(x, y, EVAL_BATCH), verbose=0, return_dict=True)
        return {"accuracy": float(result["accuracy"]), "loss": float(result["loss"])}


def recalibrated(
    spec: RunSpec, split: data_module.Split, weights: list[Any], train_eval: dict[str, float], val: dict[str, float]
) -> dict[str, float]:
    """The *_recal fields: the evaluations again, BatchNorm statistics recomputed for these weights."""
    if not spec.point.model.batchnorm:  # nothing to recalibrate: the raw numbers
        numbers = recal.Recalibrated(train_eval["accuracy"], train_eval["loss"], val["accuracy"], val["loss"])
    else:
        if COMPILED.twin is None:  # built and traced once per compiled model, like its training function
            point, classes = spec.point, split.num_classes
            COMPILED.twin = recal.Twin(
                lambda: model_module.build_model(point.model, point.data.image_size, classes, point.data.channels),
                EVAL_BATCH,
            )
        numbers = COMPILED.twin.evaluate(weights, split)
    return numbers.fields()


def run_info(
    spec: RunSpec, split: data_module.Split, model: Any, replicas: devices.Replicas, reused: bool, tower: Any = None
) -> RunInfo:
    """The facts of a prepared run: `model` is the compiled model it trains in (a pack's, with
    `tower` its own model among the pack's; sweep/train/pack.py).
    """
    import keras

    batch = spec.point.train.batch_size
    return RunInfo(
        parameters=model_module.trainable_parameters(tower if tower is not None else model),
        train_samples=len(split.y_train),
        val_samples=len(split.y_val),
        num_classes=split.num_classes,
        replicas=len(replicas.devices),
        per_replica_batch=batch // len(replicas.devices),
        virtual_devices=replicas.virtual,
        devices=",".join(replicas.devices),
        steps_per_epoch=math.ceil(len(split.y_train) / batch),
        skipped_files=len(data_module.skipped_files(spec.point.data)),
        threads=devices.intra_op_threads(),
        cpu=devices.cpu_model(),
        jit_compile=bool(model.jit_compile),
        steps_per_execution=int(model.steps_per_execution),
        reused_model=reused,
        pack_size=len(model.outputs) if tower is not None else 1,
        backend=keras.backend.backend(),
    )


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


def steps_per_execution(batch_size: int, replicas: int) -> int:
    """Optimizer steps per call into TensorFlow. One under MirroredStrategy: there Keras's
    multi-step loop fails ("You must feed a value for placeholder tensor", Keras 3.15). One on
    torch: Keras's torch trainer takes no other.
    """
    if replicas > 1 or backends.current() == backends.TORCH:
        return 1
    return max(1, IMAGES_PER_EXECUTION // batch_size)


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


class _CompiledCache:
    """The last compiled model of this process and its strategy, for the next run with the same graph."""

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.model: Any = None
        self.strategy: Any = None
        self.gradient: Any = None  # the noise-scale gradient function of this model, made on first use
        self.twin: Any = None  # its recalibrated-BatchNorm evaluator (sweep/train/recal.py), made on first use

    def model_for(
        self, spec: RunSpec, split: data_module.Split, steps_per_epoch: int, replicas: devices.Replicas
    ) -> tuple[Any, Any, bool]:
        """(strategy, compiled model with this run's initial weights, whether the model was reused).

        Seeding comes right before the weights are drawn, as in a fresh process; a new
        graph first clears Keras's global state, as a fresh process would have it.
        """
        lr = optim.learning_rate(spec.point.train, steps_per_epoch)
        key = graph_key(spec, split.num_classes, lr, replicas)
        reuse = key == self.key
        if not reuse:
            forget_compiled()
        seed_everything(spec.seed)
        strategy = self.strategy if reuse else devices.strategy_for(replicas)
        with strategy.scope():
            data = spec.point.data
            fresh = model_module.build_model(spec.point.model, data.image_size, split.num_classes, data.channels)
            if reuse:
                reset_compiled(self.model, fresh, lr)
                return strategy, self.model, True
            fresh.compile(
                optimizer=optim.make_optimizer(spec.point.train.optimizer, lr),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"],
                jit_compile=backends.jit_compile(),
                steps_per_execution=steps_per_execution(spec.point.train.batch_size, len(replicas.devices)),
            )
        self.key, self.model, self.strategy = key, fresh, strategy
        return strategy, fresh, False


COMPILED = _CompiledCache()


def forget_compiled() -> None:
    """Drop the cached model and Keras's global state (after a failed run, or before another graph)."""
    import keras

    COMPILED.key = COMPILED.model = COMPILED.strategy = COMPILED.gradient = COMPILED.twin = None
    keras.backend.clear_session()


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
