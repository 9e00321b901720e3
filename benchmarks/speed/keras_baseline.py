"""The plain-Keras baseline: what a user writes instead of the harness.

    python -m benchmarks.speed.keras_baseline benchmarks/grid.yaml --out results/bench/baseline_epochs.csv

One process, one Python loop over the grid's runs (the same expansion as
`python -m sweep plan`: every grid point times every seed, in the same order),
and for each run: seed, load the data, build and compile the model, then
`model.fit(...)`. The model, data, seeds, optimiser and epochs are the
harness's own (`sweep.train.model.build_model`, `sweep.train.data.load_split`,
`sweep.base.seeds.derive_seed`, `sweep.train.optim.make_optimizer`), so the only
difference from `python -m sweep run` is the machinery around training: no
store, no worker processes, no inference-mode train subset, no CSV export and
no report.

Feeding (`--feed`):

- `tfdata` (default): one `fit` call per epoch on that epoch's batches, in the
  order the harness uses (`sweep.train.data.epoch_order`: a numpy permutation per
  epoch from a sub-seed of the run seed), as
  `tf.data.Dataset.from_tensor_slices((x, y)).batch(batch_size).prefetch(AUTOTUNE)`,
  validation through `fit(validation_data=...)`. This is a loop a user writes
  to control the data order, and it gives exactly the harness's per-epoch
  numbers for the same seed (`train_acc`, `train_loss`, `val_acc`, `val_loss`;
  tests/test_bench.py).
- `numpy`: the same loop, with the arrays handed to `fit(x, y, batch_size=...)`.
  Keras's own array pipeline then feeds the same images in the same order, yet
  `train_loss` can move in its last bits at some batch sizes (measured:
  2.6623969 against the harness's 2.6623967 at batch 4 on tiny data; equal at
  batch 8 and 32; the cause inside Keras was not traced further).
- `keras`: the one-liner of the post, `model.fit(x, y, batch_size, epochs,
  validation_data=..., shuffle=True)`: Keras draws its own order each epoch,
  so the numbers are a different (equally valid) sample of the same training,
  not the harness's numbers.

Seeding is train.py's: `keras.utils.set_random_seed(derive_seed(seed, "init"))`
and `tf.config.experimental.enable_op_determinism()` before the data and the
model; `jit_compile` is set explicitly (default false, as in the harness; Keras's
"auto" means false on a CPU-only machine and XLA on a GPU) and the CSV records the
value Keras actually uses (`model.jit_compile`): with op determinism on, Keras
turns `True` into `False` with only a warning.
`validation_batch_size` is the harness's evaluation batch (512), so validation
numbers do not depend on the training batch; `keras.backend.clear_session()`
after every run, as Keras advises for loops (and as the harness's worker does).

`--train-eval` (not with feed keras) also evaluates the harness's fixed training
subset after every epoch, so every metric of the harness is computed.
`--reuse-model` is a lever experiment for the harness (docs/levers.md), not what
a user writes: one compiled model per architecture, fresh weights per run
(`sweep.train.compiled.reset_compiled`, the reset the harness's workers use).

Writes one CSV row per (run, epoch); `epoch_seconds` is the training part of the
epoch only (from the epoch's start to the start of its validation), like the
harness's, so `samples_per_second` is comparable.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import csv
import os
import time
from typing import Any

from sweep.train.compiled import EVAL_BATCH  # the harness's evaluation batch, so validation numbers match

COLUMNS = (
    "run_id",
    "seed",
    "batch_size",
    "epoch",
    "step",
    "train_acc",
    "train_loss",
    "val_acc",
    "val_loss",
    "train_eval_acc",
    "train_eval_loss",
    "epoch_seconds",
    "samples_per_second",
    "feed",
    "jit_compile",
    "run_seconds",
)


def check_plain(spec: Any) -> None:
    """The baseline trains what a user's loop trains: no controls, one device."""
    cfg = spec.point.train
    unsupported = {
        "train.gpus": cfg.gpus != 1,
        "train.lr_scaling": cfg.lr_scaling != "none",
        "train.warmup_epochs": cfg.warmup_epochs != 0,
        "train.budget": cfg.budget != "epochs",
        "train.eval_every_steps": cfg.eval_every_steps is not None,
        "model.ghost_batch_size": spec.point.model.ghost_batch_size is not None,
    }
    bad = [key for key, flag in unsupported.items() if flag]
    if bad:
        raise SystemExit(
            f"error: {spec.run_id}: the baseline trains plain points only; not supported: {', '.join(bad)}"
        )


class TrainTimer:
    """Per epoch: seconds from the epoch's start to its validation's start (training only)."""

    def __new__(cls) -> Any:  # a keras.callbacks.Callback, defined lazily (keras is imported late)
        import keras

        class _Timer(keras.callbacks.Callback):
            def __init__(self) -> None:
                super().__init__()
                self.seconds: list[float] = []
                self._start = 0.0
                self._in_epoch = False

            def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
                self._start, self._in_epoch = time.perf_counter(), True

            def on_test_begin(self, logs: Any = None) -> None:
                if self._in_epoch:
                    self.seconds.append(time.perf_counter() - self._start)
                    self._in_epoch = False

            def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
                if self._in_epoch:  # no validation this epoch
                    self.on_test_begin()

        return _Timer()


_COMPILED: dict[tuple, Any] = {}  # --reuse-model: compiled models by everything that shapes their graph


def train_run(
    spec: Any, feed: str = "tfdata", jit_compile: bool = False, train_eval: bool = False, reuse_model: bool = False
) -> list[dict[str, Any]]:
    """One run of the grid as a user's loop trains it; one dict per epoch (COLUMNS).

    reuse_model (a lever experiment, not what a user writes): keep one compiled model per
    architecture and optimiser and, for each run, load a freshly built model's initial weights
    into it and zero the optimiser's state, so its traced training and evaluation functions are
    reused instead of traced again; the numbers are those of a fresh model (tests/test_bench.py).
    """
    import keras
    import tensorflow as tf

    from sweep.base.seeds import derive_seed
    from sweep.train import data
    from sweep.train import model as model_module
    from sweep.train.compiled import reset_compiled
    from sweep.train.optim import make_optimizer

    check_plain(spec)
    started = time.perf_counter()
    point, cfg = spec.point, spec.point.train
    keras.utils.set_random_seed(derive_seed(spec.seed, "init"))
    tf.config.experimental.enable_op_determinism()
    split = data.load_split(point.data)
    model = model_module.build_model(point.model, point.data.image_size, split.num_classes)
    key = (point.model, point.data.image_size, split.num_classes, cfg.optimizer, cfg.lr, jit_compile)
    if reuse_model and key in _COMPILED:
        fresh, model = model, _COMPILED[key]
        reset_compiled(model, fresh, cfg.lr)  # the harness's own reset: what its workers do between runs
    else:
        model.compile(
            optimizer=make_optimizer(cfg.optimizer, cfg.lr),
            loss="sparse_categorical_crossentropy",
            metrics=["accuracy"],
            jit_compile=jit_compile,
        )
        if reuse_model:
            _COMPILED[key] = model
    timer = TrainTimer()
    validation = (split.x_val, split.y_val)
    rows: list[dict[str, Any]] = []
    if feed == "keras":
        history = model.fit(
            split.x_train,
            split.y_train,
            batch_size=cfg.batch_size,
            epochs=cfg.epochs,
            validation_data=validation,
            validation_batch_size=EVAL_BATCH,
            shuffle=point.data.shuffle,
            verbose=0,
            callbacks=[timer],
        ).history
        steps = -(-len(split.y_train) // cfg.batch_size)
        for e in range(cfg.epochs):
            rows.append(
                _row(
                    spec,
                    e + 1,
                    steps * (e + 1),
                    {k: v[e] for k, v in history.items()},
                    timer.seconds[e],
                    len(split.y_train),
                    feed,
                    bool(model.jit_compile),
                )
            )
    else:
        for epoch in range(1, cfg.epochs + 1):
            order = data.epoch_order(split.y_train, point.data.shuffle, spec.seed, epoch)
            x, y = split.x_train[order], split.y_train[order]
            if feed == "numpy":
                inputs: dict[str, Any] = {"x": x, "y": y, "batch_size": cfg.batch_size}
            else:
                batches = tf.data.Dataset.from_tensor_slices((x, y)).batch(cfg.batch_size)
                inputs = {"x": batches.prefetch(tf.data.AUTOTUNE)}
            history = model.fit(
                **inputs,
                initial_epoch=epoch - 1,
                epochs=epoch,
                validation_data=validation,
                validation_batch_size=EVAL_BATCH,
                shuffle=False,
                verbose=0,
                callbacks=[timer],
            ).history
            logs = {k: v[-1] for k, v in history.items()}
            if train_eval:
                result = model.evaluate(
                    split.x_train_eval, split.y_train_eval, batch_size=EVAL_BATCH, verbose=0, return_dict=True
                )
                logs["train_eval_accuracy"], logs["train_eval_loss"] = result["accuracy"], result["loss"]
            rows.append(
                _row(
                    spec,
                    epoch,
                    int(model.optimizer.iterations.numpy()),
                    logs,
                    timer.seconds[-1],
                    len(split.y_train),
                    feed,
                    bool(model.jit_compile),
                )
            )
    if not reuse_model:
        keras.backend.clear_session()
    for row in rows:  # the whole run: seeding, data, model, every epoch and its validation
        row["run_seconds"] = time.perf_counter() - started
    return rows


def _row(
    spec: Any, epoch: int, step: int, logs: dict[str, Any], seconds: float, samples: int, feed: str, jit_compile: bool
) -> dict[str, Any]:
    return {
        "run_id": spec.run_id,
        "seed": spec.seed,
        "batch_size": spec.point.train.batch_size,
        "epoch": epoch,
        "step": step,
        "train_acc": float(logs["accuracy"]),
        "train_loss": float(logs["loss"]),
        "val_acc": float(logs["val_accuracy"]),
        "val_loss": float(logs["val_loss"]),
        "train_eval_acc": logs.get("train_eval_accuracy"),
        "train_eval_loss": logs.get("train_eval_loss"),
        "epoch_seconds": seconds,
        "samples_per_second": samples / seconds,
        "feed": feed,
        "jit_compile": jit_compile,
    }


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grid", type=Path, help="a grid file (plain points only), e.g. benchmarks/grid.yaml")
    parser.add_argument("--out", type=Path, default=Path("results/bench/baseline_epochs.csv"))
    parser.add_argument(
        "--feed",
        choices=("tfdata", "numpy", "keras"),
        default="tfdata",
        help="tfdata: one fit per epoch on tf.data batches in the harness's order (same numbers); "
        "numpy: the same with arrays; keras: one fit(shuffle=True) per run (Keras's own order)",
    )
    parser.add_argument("--jit-compile", choices=("false", "true"), default="false")
    parser.add_argument("--train-eval", action="store_true", help="also evaluate the harness's train subset each epoch")
    parser.add_argument(
        "--reuse-model",
        action="store_true",
        help="lever experiment: reuse one compiled model across runs (fresh weights, no new tracing)",
    )
    args = parser.parse_args(argv)
    if args.train_eval and args.feed == "keras":
        parser.error("--train-eval needs --feed tfdata or numpy")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    from sweep.config import load_grid
    from sweep.config.plan import plan

    runs = plan(load_grid(args.grid))
    for spec in runs:  # before TensorFlow starts: a grid the baseline cannot train fails at once
        check_plain(spec)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for i, spec in enumerate(runs, start=1):
        rows.extend(train_run(spec, args.feed, args.jit_compile == "true", args.train_eval, args.reuse_model))
        last = rows[-1]
        print(
            f"[{i}/{len(runs)}] {spec.run_id}: val_acc {last['val_acc']:.3f} ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    write_csv(rows, args.out)
    print(f"{len(runs)} runs in {time.perf_counter() - started:.1f} s; written: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
