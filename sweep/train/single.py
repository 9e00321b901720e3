"""One run's compiled model, as the trainer drives it (sweep/train/trainer.py): a pack of one.

It is the run's own Keras model, built under its distribution strategy (one device, or G replicas
with MirroredStrategy), and the only compiled model that takes user callbacks, TensorFlow's
TerminateOnNaN and the noise-scale measurement. Packs of two or more runs are towers of one model
instead (sweep/train/pack.py); both answer the trainer's calls (`Engine`) with one entry per run.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from sweep import vocab
from sweep.base.seeds import derive_seed
from sweep.config.plan import RunSpec
from sweep.train import backends, devices, noise, optim, recal, usercode
from sweep.train import data as data_module
from sweep.train import model as model_module
from sweep.train.compiled import (
    EVAL_BATCH,
    Compiled,
    graph_key,
    reset_compiled,
    seed_everything,
    steps_per_execution,
)
from sweep.train.session import Session

Stretch = tuple[float, float]  # a fit call's running accuracy and loss at its end


class Single:
    """The compiled model of a run trained alone (fresh, or the session's with this run's weights)."""

    def __init__(self, spec: RunSpec, split: data_module.Split, steps_per_epoch: int, session: Session) -> None:
        self.spec = spec
        self.split = split
        self.session = session
        self.replicas = devices.replicas_for(spec.point.train.gpus)
        devices.check_even_split(self.replicas, len(split.y_train), spec.point.train.batch_size)
        self.compiled, self.reused = _model_for(spec, split, steps_per_epoch, self.replicas, session)
        self.model, self.strategy = self.compiled.model, self.compiled.strategy
        self.own_model = self.model  # whose parameters the run counts
        self.callbacks = usercode.callbacks(spec.point.train.callbacks)  # fresh ones: their state is per run

    def fit(self, xs: list[np.ndarray], ys: list[np.ndarray], epoch: int) -> tuple[list[Stretch], float]:
        """Train on this stretch's batches; the running accuracy and loss at its end, and its seconds."""
        import keras

        dataset = data_module.batches(xs[0], ys[0], self.spec.point.train.batch_size)
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
        took = time.perf_counter() - started
        return [(float(history.history["accuracy"][-1]), float(history.history["loss"][-1]))], took

    def evaluate(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[str, float]]:
        """The compiled metrics (accuracy) and the loss in inference mode on (x, y)."""
        x, y = pairs[0]
        result = self.model.evaluate(self.session.eval_batches(x, y, EVAL_BATCH), verbose=0, return_dict=True)
        return [{name: float(result[name]) for name in (*vocab.COMPILE_METRICS, vocab.LOSS)}]

    def recalibrated(self, train_eval: list[dict[str, float]], val: list[dict[str, float]]) -> list[dict[str, float]]:
        """The *_recal fields: the evaluations again, BatchNorm statistics recomputed for these weights."""
        spec, split = self.spec, self.split
        if not spec.point.model.batchnorm:  # nothing to recalibrate: the raw numbers
            return [raw_recalibrated(train_eval[0], val[0])]
        if self.compiled.twin is None:  # built and traced once per compiled model, like its training function
            point, classes = spec.point, split.num_classes
            self.compiled.twin = recal.Twin(
                lambda: model_module.build_model(point.model, point.data.image_size, classes, point.data.channels),
                EVAL_BATCH,
            )
        return [self.compiled.twin.evaluate(self.model.get_weights(), split, self.session.eval_batches).fields()]

    def predicted(self, xs: list[np.ndarray]) -> list[np.ndarray]:
        """Class probabilities on x in inference mode (the balanced accuracy of imbalanced data)."""
        return [self.model.predict(self.session.eval_batches(xs[0], None, EVAL_BATCH), verbose=0)]

    def noise_scale(self, step: int) -> dict[str, float]:
        """B_simple at the current weights, from training batches drawn by a sub-seed of the run seed."""
        import keras

        if self.compiled.gradient is None:  # traced once per compiled model, like its training function
            self.compiled.gradient = noise.keras_gradient(self.model, keras.losses.SparseCategoricalCrossentropy())
        rng = np.random.default_rng(derive_seed(self.spec.seed, "noise-scale", step))
        with noise.preserved(self.model):
            measured = noise.measure(
                self.compiled.gradient, self.split.x_train, self.split.y_train, self.spec.point.train.batch_size, rng
            )
        return {
            vocab.NOISE_SCALE: measured.b_simple,
            vocab.GRAD_NORM_SQ: measured.grad_norm_sq,
            vocab.GRAD_NOISE_TRACE: measured.grad_noise_trace,
        }

    def lr(self, k: int) -> float:
        """The learning rate the optimizer applies now."""
        return optim.current_lr(self.model)

    def view(self, k: int) -> Any:
        """What the run's checkpoint holds: its model and optimizer variables."""
        return self.model

    def end(self) -> None:
        """Tell the user's callbacks the run has ended (`on_train_end`, once)."""
        for callback in self.callbacks:
            callback.end_run()


def raw_recalibrated(train_eval: dict[str, float], val: dict[str, float]) -> dict[str, float]:
    """The *_recal fields of a model without BatchNorm: its raw numbers, nothing to recompute."""
    numbers = recal.Recalibrated(train_eval["accuracy"], train_eval["loss"], val["accuracy"], val["loss"])
    return numbers.fields()


def _model_for(
    spec: RunSpec, split: data_module.Split, steps_per_epoch: int, replicas: devices.Replicas, session: Session
) -> tuple[Compiled, bool]:
    """(the compiled model with this run's initial weights and its strategy, whether it was the session's).

    Seeding comes right before the weights are drawn, as in a fresh process; a new
    graph first clears Keras's global state, as a fresh process would have it (`Session.take`).
    """
    lr = optim.learning_rate(spec.point.train, steps_per_epoch)
    key = graph_key(spec, split.num_classes, lr, replicas)
    kept = session.take(key)
    seed_everything(spec.seed)
    strategy = kept.strategy if kept is not None else devices.strategy_for(replicas)
    with strategy.scope():
        data = spec.point.data
        fresh = model_module.build_model(spec.point.model, data.image_size, split.num_classes, data.channels)
        if kept is not None:
            reset_compiled(kept.model, fresh, lr)
            return kept, True
        fresh.compile(
            optimizer=optim.make_optimizer(spec.point.train.optimizer, lr),
            loss="sparse_categorical_crossentropy",
            metrics=list(vocab.COMPILE_METRICS),
            jit_compile=backends.jit_compile(),
            steps_per_execution=steps_per_execution(spec.point.train.batch_size, len(replicas.devices)),
        )
    return Compiled(key, fresh, strategy), False
