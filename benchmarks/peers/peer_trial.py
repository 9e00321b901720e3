"""One run of the grid as a trial of a peer tuner (Ray Tune, KerasTuner) trains it.

The peers of `python -m benchmarks.peers.peer_bench` train each run of the grid exactly as the plain Keras
loop does (benchmarks/speed/keras_baseline.py, `--feed tfdata`): seed with the harness's init seed and
op determinism, `load_split` (from the warm dataset cache), `build_model`, compile with
`make_optimizer` and the harness's loss and metric, then one `fit` per epoch on that epoch's
batches in the harness's order (`epoch_order`), validation at the harness's evaluation batch.
The work is split where a tuner needs it split: `start` (KerasTuner's `HyperModel.build`) and
`epochs` (its `fit`; Ray Tune's trainable reports after each), so both peers train the same
thing the loop and `sweep run` train, and report train and val accuracy every epoch.

A trial names its run by (batch size, seed): what a user's search space holds. The peers
benchmark therefore takes grids whose points differ in `train.batch_size` only (benchmarks/grid.yaml
and benchmarks/quick.yaml); `plan_runs` refuses others before anything trains.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from benchmarks.speed.keras_baseline import check_plain
from sweep.train.compiled import EVAL_BATCH  # the harness's evaluation batch, as the loop's


def plan_runs(grid: Path) -> list[Any]:
    """The grid's runs in `sweep plan`'s order, each one (batch size, seed) a trial can name."""
    from sweep.config import load_grid
    from sweep.config.plan import plan

    runs = plan(load_grid(grid))
    for spec in runs:
        check_plain(spec)
    keys = [key_of(spec) for spec in runs]
    if len(set(keys)) != len(keys):
        raise SystemExit(f"error: {grid}: the peers benchmark takes grids over train.batch_size (and seeds) only")
    return runs


def key_of(spec: Any) -> tuple[int, int]:
    """(batch size, seed): a run's place in a peer's search space."""
    return int(spec.point.train.batch_size), int(spec.seed)


def find_run(runs: Sequence[Any], batch_size: int, seed: int) -> Any:
    """The run a trial with these hyperparameters trains."""
    return next(spec for spec in runs if key_of(spec) == (int(batch_size), int(seed)))


def start(spec: Any) -> tuple[Any, Any]:
    """Seed, load the data, build and compile the model: keras_baseline.train_run's first steps,
    in its order (the seed comes before the data and the model, so the initial weights are the
    harness's). Returns (compiled model, split).
    """
    import keras
    import tensorflow as tf

    from sweep.base.seeds import derive_seed
    from sweep.train import data
    from sweep.train import model as model_module
    from sweep.train.optim import make_optimizer

    point, cfg = spec.point, spec.point.train
    keras.utils.set_random_seed(derive_seed(spec.seed, "init"))
    tf.config.experimental.enable_op_determinism()
    split = data.load_split(point.data)
    model = model_module.build_model(point.model, point.data.image_size, split.num_classes)
    model.compile(
        optimizer=make_optimizer(cfg.optimizer, cfg.lr),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
        jit_compile=False,  # the harness's and the loop's default
    )
    return model, split


def epochs(spec: Any, model: Any, split: Any, callbacks: Sequence[Any] = ()) -> Iterator[dict[str, float]]:
    """Train every epoch of the run, one `fit` each on the harness's order; yield each epoch's
    numbers (epoch, accuracy, loss, val_accuracy, val_loss) for the peer to report.
    `callbacks` are the tuner's own (KerasTuner's per-epoch reporting and best-epoch checkpoint).
    """
    import tensorflow as tf

    from sweep.train import data

    point, cfg = spec.point, spec.point.train
    for epoch in range(1, cfg.epochs + 1):
        order = data.epoch_order(split.y_train, point.data.shuffle, spec.seed, epoch)
        batches = tf.data.Dataset.from_tensor_slices((split.x_train[order], split.y_train[order]))
        history = model.fit(
            batches.batch(cfg.batch_size).prefetch(tf.data.AUTOTUNE),
            initial_epoch=epoch - 1,
            epochs=epoch,
            validation_data=(split.x_val, split.y_val),
            validation_batch_size=EVAL_BATCH,
            shuffle=False,
            verbose=0,
            callbacks=list(callbacks),
        ).history
        yield {"epoch": float(epoch), **{name: float(values[-1]) for name, values in history.items()}}
