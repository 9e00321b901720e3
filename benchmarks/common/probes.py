"""Measurements that must start in a fresh process, each printing one JSON line.

    python -m benchmarks.common.probes gpu-matmul           # GFLOP/s of a float32 matmul on the visible GPU
    python -m benchmarks.common.probes dataset-load         # import and load times of the default dataset
    python -m benchmarks.common.probes sweep ARGS...        # `python -m sweep ARGS`, then whether it imported TF
    python -m benchmarks.common.probes lever SETTINGS_JSON  # one lever experiment (docs/levers.md)

Fresh, because what they measure is a process's start: TensorFlow's import and
first traces, its thread pools (read once, from the environment the caller sets),
the dataset cache seen by a new process, the modules a command imports.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import atexit
import json
import runpy
import time
from typing import Any

# The lever experiments' data: the quick grid's (1,440 training images of 120 classes, 32x32).
LEVER_DATA: dict[str, Any] = {"samples_per_class": 15, "image_size": 32}


def gpu_matmul(n: int = 4096, repeats: int = 20) -> dict[str, Any]:
    """float32 n x n matmul on the first visible GPU (TF32 where the GPU has it), best of `repeats`.
    Not run on the CPU-only machine this was written on: planned, see docs/levers.md.
    """
    import tensorflow as tf

    a, b = tf.random.normal((n, n)), tf.random.normal((n, n))
    multiply = tf.function(lambda a, b: tf.matmul(a, b))
    multiply(a, b).numpy()
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        multiply(a, b).numpy()
        best = min(best, time.perf_counter() - started)
    return {"gflops": 2 * n**3 / best / 1e9}


def dataset_load() -> dict[str, Any]:
    """The default dataset from $BATCHSWEEP_CACHE: seconds to import the loader, seconds to load."""
    started = time.perf_counter()
    from sweep.config import DataConfig
    from sweep.train.data import load_split

    imported = time.perf_counter()
    split = load_split(DataConfig())
    return {"import": imported - started, "load": time.perf_counter() - imported, "train": int(len(split.y_train))}


def sweep_command(argv: list[str]) -> None:
    """Run the CLI as `python -m sweep ARGV` would; at exit, after the command's own output, print
    whether it imported TensorFlow or Keras (`plan`, `status` and `report` must not).
    """
    atexit.register(lambda: print(json.dumps({"tensorflow_imported": _tensorflow_imported()}), flush=True))
    sys.argv = ["sweep", *argv]
    runpy.run_module("sweep", run_name="__main__", alter_sys=True)


def _tensorflow_imported() -> bool:
    return any(name.split(".")[0] in ("tensorflow", "keras") for name in sys.modules)


def lever(settings: dict[str, Any]) -> dict[str, Any]:
    """Train the bench model as sweep/train/trainer.py does, with one lever changed; timings from the process's
    start and every per-epoch number.

    settings: batch, epochs, spe (steps_per_execution), jit (jit_compile), determinism (default true),
    feed ("tfdata": the harness's `sweep.train.data.batches`; "tfdata_plain": without prefetch; "numpy": arrays
    to fit), runs (runs of the same spec in this process), first_batch (fit one batch first, to time the
    first step), reuse (runs after the first reuse the first run's compiled model, reset by the harness's
    own `sweep.train.compiled.reset_compiled`), data (DataConfig fields, default LEVER_DATA).
    """
    import psutil

    born = psutil.Process().create_time()
    import keras
    import tensorflow as tf

    from sweep.base.seeds import derive_seed
    from sweep.config import DataConfig, ModelConfig
    from sweep.train import data
    from sweep.train import model as model_module
    from sweep.train.compiled import reset_compiled
    from sweep.train.optim import make_optimizer

    out: dict[str, Any] = {"import_tf": time.time() - born, "runs": []}
    cfg = DataConfig(**settings.get("data", LEVER_DATA))
    compiled = None
    for _ in range(settings.get("runs", 1)):
        run: dict[str, Any] = {"start": time.time() - born}
        keras.utils.set_random_seed(derive_seed(0, "init"))
        if settings.get("determinism", True):
            tf.config.experimental.enable_op_determinism()
        split = data.load_split(cfg)
        fresh = model_module.build_model(ModelConfig(), cfg.image_size, split.num_classes)
        if compiled is None:
            model = fresh
            model.compile(
                optimizer=make_optimizer("adam", 0.001),
                loss="sparse_categorical_crossentropy",
                metrics=["accuracy"],
                jit_compile=settings.get("jit", False),
                steps_per_execution=settings.get("spe", 1),
            )
        else:
            model = compiled
            reset_compiled(model, fresh, 0.001)
        run["jit_compile"] = bool(model.jit_compile)  # what Keras uses, not what was asked
        run["epochs"] = [
            _lever_epoch(model, split, epoch, settings, run, born) for epoch in range(1, settings.get("epochs", 2) + 1)
        ]
        run["end"] = time.time() - born
        out["runs"].append(run)
        if settings.get("reuse"):
            compiled = model
        else:
            keras.backend.clear_session()
    return out


def _lever_epoch(
    model: Any, split: Any, epoch: int, settings: dict[str, Any], run: dict[str, Any], born: float
) -> dict[str, Any]:
    """One epoch in the harness's order, fed as the lever says, then the two evaluations; sets
    run["first_step"] (seconds from the process's start) when the run's first fit returns.
    """
    from sweep.train import data

    batch = settings["batch"]
    order = data.epoch_order(split.y_train, True, 0, epoch)
    x, y = split.x_train[order], split.y_train[order]
    parts = [slice(0, batch), slice(batch, None)] if epoch == 1 and settings.get("first_batch") else [slice(None)]
    seconds, cpu_started = 0.0, time.process_time()
    for rows in parts:
        started = time.perf_counter()
        history = model.fit(
            **_lever_inputs(x[rows], y[rows], batch, settings.get("feed", "tfdata")),
            initial_epoch=epoch - 1,
            epochs=epoch,
            shuffle=False,
            verbose=0,
        )
        seconds += time.perf_counter() - started
        run.setdefault("first_step", time.time() - born)
    cpu_seconds = time.process_time() - cpu_started
    train_eval, train_eval_seconds = _timed_evaluation(model, split.x_train_eval, split.y_train_eval)
    val, val_seconds = _timed_evaluation(model, split.x_val, split.y_val)
    return {
        "epoch": epoch,
        "fit_seconds": seconds,
        "fit_cpu_seconds": cpu_seconds,
        "train_eval_seconds": train_eval_seconds,
        "val_seconds": val_seconds,
        "samples_per_second": len(y) / seconds,
        "train_acc": float(history.history["accuracy"][-1]),
        "train_loss": float(history.history["loss"][-1]),
        "val_acc": float(val["accuracy"]),
        "val_loss": float(val["loss"]),
        "train_eval_acc": float(train_eval["accuracy"]),
    }


def _lever_inputs(x: Any, y: Any, batch: int, feed: str) -> dict[str, Any]:
    """`fit`'s inputs: the harness's tf.data batches, the same without prefetch, or the arrays."""
    import tensorflow as tf

    from sweep.train import data

    if feed == "numpy":
        return {"x": x, "y": y, "batch_size": batch}
    if feed == "tfdata_plain":
        return {"x": tf.data.Dataset.from_tensor_slices((x, y)).batch(batch)}
    return {"x": data.batches(x, y, batch)}


def _timed_evaluation(model: Any, x: Any, y: Any) -> tuple[dict[str, float], float]:
    from sweep.train.compiled import EVAL_BATCH

    started = time.perf_counter()
    result = model.evaluate(x, y, batch_size=EVAL_BATCH, verbose=0, return_dict=True)
    return result, time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.common.probes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", choices=["gpu-matmul", "dataset-load", "sweep", "lever"], help="the measurement")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="sweep: its command line; lever: SETTINGS_JSON")
    parsed = parser.parse_args(argv)
    name, args = parsed.name, parsed.args
    if name == "sweep":
        sweep_command(args)  # prints the command's own output; exits with its status
        return 0
    measure = {"gpu-matmul": gpu_matmul, "dataset-load": dataset_load, "lever": lambda: lever(json.loads(args[0]))}[
        name
    ]
    print(json.dumps(measure()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
