"""One run: `RunSpec -> iterator of EpochRecord`. No file I/O; the worker writes.

Each epoch is one `model.fit(..., initial_epoch=e, epochs=e+1)` call on that
epoch's batches, followed by two inference-mode evaluations: a fixed subset of
the training set (`train_eval_*`) and the validation set (`val_*`). So every
record holds both the number the post read (`train_acc`, Keras's running mean
over the epoch, in training mode, while the weights change) and the number
that is comparable with `val_acc` (`train_eval_acc`, the end-of-epoch model in
inference mode).

Seeding is in one place (`_seed_everything`): weights from a sub-seed of the
run seed, data order from another, and TensorFlow op determinism on, so the
same spec gives identical records (timings aside).
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any, Iterator

from sweep import data as data_module
from sweep import devices, model as model_module
from sweep.plan import RunSpec, derive_seed

EVAL_BATCH = 512  # fixed, so evaluation numbers do not depend on the training batch size


@dataclass(frozen=True)
class EpochRecord:
    """One row of epochs.csv (without the spec columns); names from sweep.vocab."""

    epoch: int  # 1-based: epoch 2 is the post's "epoch 2"
    step: int  # optimizer steps so far
    train_acc: float
    train_eval_acc: float
    val_acc: float
    train_loss: float
    train_eval_loss: float
    val_loss: float
    gap: float
    eval_gap: float
    epoch_seconds: float  # the fit call only, not evaluation; epoch 1 includes graph tracing
    samples_per_second: float
    lr: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


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


class Diverged(Exception):
    """The training loss became NaN or infinite."""

    def __init__(self, epoch: int, step: int, loss: float) -> None:
        super().__init__(f"training loss became {loss} in epoch {epoch} (step {step})")
        self.epoch, self.step, self.loss = epoch, step, loss


class Run:
    """A prepared run: data loaded, model built under its strategy. Iterate `epochs()`."""

    def __init__(self, spec: RunSpec) -> None:
        self.spec = spec
        _seed_everything(spec.seed)
        self.split = data_module.load_split(spec.point.data)
        replicas = devices.replicas_for(spec.point.train.gpus)
        self.strategy = devices.strategy_for(replicas)
        with self.strategy.scope():
            self.model = _compiled_model(spec, self.split)
        batch = spec.point.train.batch_size
        self.info = RunInfo(
            parameters=model_module.trainable_parameters(self.model),
            train_samples=len(self.split.y_train), val_samples=len(self.split.y_val),
            num_classes=self.split.num_classes, replicas=len(replicas.devices),
            per_replica_batch=batch // len(replicas.devices), virtual_devices=replicas.virtual,
            devices=",".join(replicas.devices), steps_per_epoch=math.ceil(len(self.split.y_train) / batch),
        )

    def epochs(self) -> Iterator[EpochRecord]:
        for epoch in range(1, self.spec.point.train.epochs + 1):
            yield self._one_epoch(epoch)

    def _one_epoch(self, epoch: int) -> EpochRecord:
        import keras

        split, train_cfg = self.split, self.spec.point.train
        order = data_module.epoch_order(split.y_train, self.spec.point.data.shuffle, self.spec.seed, epoch)
        dataset = data_module.batches(split.x_train[order], split.y_train[order], train_cfg.batch_size)
        started = time.perf_counter()
        history = self.model.fit(dataset, initial_epoch=epoch - 1, epochs=epoch, verbose=0, shuffle=False,
                                 callbacks=[keras.callbacks.TerminateOnNaN()])
        seconds = time.perf_counter() - started
        step = int(self.model.optimizer.iterations.numpy())
        loss = float(history.history["loss"][-1])
        if not math.isfinite(loss):
            raise Diverged(epoch, step, loss)
        train_eval = self._evaluate(split.x_train_eval, split.y_train_eval)
        val = self._evaluate(split.x_val, split.y_val)
        train_acc = float(history.history["accuracy"][-1])
        return EpochRecord(
            epoch=epoch, step=step, train_acc=train_acc, train_eval_acc=train_eval["accuracy"],
            val_acc=val["accuracy"], train_loss=loss, train_eval_loss=train_eval["loss"],
            val_loss=val["loss"], gap=train_acc - val["accuracy"],
            eval_gap=train_eval["accuracy"] - val["accuracy"], epoch_seconds=seconds,
            samples_per_second=len(order) / seconds, lr=_current_lr(self.model),
        )

    def _evaluate(self, x: Any, y: Any) -> dict[str, float]:
        result = self.model.evaluate(x, y, batch_size=EVAL_BATCH, verbose=0, return_dict=True)
        return {"accuracy": float(result["accuracy"]), "loss": float(result["loss"])}


def train(spec: RunSpec) -> Iterator[EpochRecord]:
    """The records of one run, one per epoch, as each epoch ends."""
    yield from Run(spec).epochs()


def _seed_everything(seed: int) -> None:
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(derive_seed(seed, "init"))
    tf.config.experimental.enable_op_determinism()


def _compiled_model(spec: RunSpec, split: data_module.Split) -> Any:
    import keras

    model = model_module.build_model(spec.point.model, spec.point.data.image_size, split.num_classes)
    model.compile(optimizer=_optimizer(spec.point.train.optimizer, spec.point.train.lr),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"], jit_compile=False)
    return model


def _optimizer(name: str, lr: float) -> Any:
    import keras

    if name == "adam":
        return keras.optimizers.Adam(learning_rate=lr)
    if name == "momentum":
        return keras.optimizers.SGD(learning_rate=lr, momentum=0.9)
    return keras.optimizers.SGD(learning_rate=lr)


def _current_lr(model: Any) -> float:
    import keras

    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
