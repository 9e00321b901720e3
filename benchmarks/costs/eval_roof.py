"""What one evaluation at a record costs, against what its arithmetic needs (TensorFlow).

    python -m benchmarks.costs.eval_roof [--threads 1] [--out results/bench/eval_roof.md]    # about 30 s

A record of `article.yaml` is five forward passes over 2,400 images (docs/levers.md). In a fresh process
with a worker's threads (default one, as each worker of the default sweep has on a CPU) and TensorFlow's
op determinism on, as in a run, this times, as the median of CALLS calls:

- Keras's `evaluate` of the built-in model at `article.yaml`'s size on its 2,400 validation images,
  in the harness's evaluation batches (`compiled.EVAL_BATCH`, `Session.eval_batches`), as a record calls it;
- the model's bare traced inference call over the same batches: what one fused compiled call per
  set could cost at best;
- the same model without BatchNormalization (biased convolutions): what BatchNorm adds at inference.

It counts the multiply-adds of one forward pass (convolutions and the dense layer: all but a small
part of its arithmetic) and gives `evaluate`'s rate in GFLOP/s, beside the rate of a large float32
matrix product (MATRIX x MATRIX) at the same threads: about what these cores reach. Appends a row to `--out`.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import datetime
import statistics
import time
from typing import Any

from benchmarks.common.machine import REPO, append_table, commit, restart_as_worker
from sweep.cli.arguments import positive
from sweep.train import devices

CALLS = 7
MATRIX = 2048  # a float32 matrix product this size runs near the cores' peak
ARTICLE = REPO / "experiments" / "article.yaml"  # its data and model: 2,400 validation images, 120 classes

HEADER = (
    "# One evaluation: its cost against its arithmetic\n\n"
    "`python -m benchmarks.costs.eval_roof`: the built-in model at `article.yaml`'s size (72k parameters, 32x32, "
    "120 classes) on its 2,400 validation images, median of "
    f"{CALLS} calls each, op determinism on as in a run. Bare call: the traced inference call over the same "
    "batches, without Keras's `evaluate` loop and metrics.\n\n"
    "| date | commit | cpu | threads | GFLOP per evaluation | evaluate s | GFLOP/s | matrix product GFLOP/s "
    "| bare call s | bare / evaluate | without BatchNorm s | BatchNorm's share |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
)


def flops(model: Any) -> int:
    """Floating-point operations of one image's forward pass in the convolutions and dense layers
    (two per multiply-add); normalisation, activations and pooling add a small part more.
    """
    total = 0
    for layer in model.layers:
        kind = type(layer).__name__
        if kind == "Conv2D":
            _, height, width, out = layer.output.shape
            k_h, k_w, channels_in, _ = layer.kernel.shape
            total += 2 * height * width * k_h * k_w * channels_in * out
        elif kind == "Dense":
            total += 2 * layer.kernel.shape[0] * layer.kernel.shape[1]
    return total


def _median_seconds(call: Any) -> float:
    call()  # traces
    times = []
    for _ in range(CALLS):
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def measure() -> dict[str, float]:
    """Seconds of `evaluate`, of the bare call and without BatchNorm, the evaluation's GFLOP, and the
    matrix product's GFLOP/s.
    """
    import dataclasses

    import tensorflow as tf

    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.train import data
    from sweep.train.compiled import EVAL_BATCH, seed_everything
    from sweep.train.model import build_model
    from sweep.train.session import Session

    seed_everything(0)
    point = plan(load_grid(ARTICLE))[0].point
    split = data.load_split(point.data)
    batches = Session().eval_batches(split.x_val, split.y_val, EVAL_BATCH)
    found: dict[str, float] = {}
    for batchnorm in (True, False):
        model_cfg = dataclasses.replace(point.model, batchnorm=batchnorm)
        model = build_model(model_cfg, split.x_val.shape[1], split.num_classes, split.x_val.shape[-1])
        model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
        evaluated = _median_seconds(lambda m=model: m.evaluate(batches, verbose=0))
        if batchnorm:
            forward = tf.function(lambda images, m=model: m(images, training=False))
            found["evaluate"] = evaluated
            found["bare"] = _median_seconds(lambda f=forward: [f(images).numpy() for images, _ in batches])
            found["gflop"] = flops(model) * len(split.y_val) / 1e9
        else:
            found["without_batchnorm"] = evaluated
    square = tf.random.stateless_uniform((MATRIX, MATRIX), seed=(0, 0))
    product = tf.function(lambda: tf.linalg.matmul(square, square))
    found["matrix_gflops"] = 2 * MATRIX**3 / 1e9 / _median_seconds(lambda: product().numpy())
    return found


def row(found: dict[str, float], threads: int, code: str) -> str:
    """The table's row for these measurements, at `threads`, of the checkout at commit `code`."""
    evaluate = found["evaluate"]
    cells = (
        f"{found['gflop']:.1f}",
        f"{evaluate:.3f}",
        f"{found['gflop'] / evaluate:.0f}",
        f"{found['matrix_gflops']:.0f}",
        f"{found['bare']:.3f}",
        f"{found['bare'] / evaluate:.2f}",
        f"{found['without_batchnorm']:.3f}",
        f"{1 - found['without_batchnorm'] / evaluate:.0%}",
    )
    machine = f"{devices.cpu_model()}, {devices.cpu_count()} cores"
    return f"| {datetime.date.today()} | {code} | {machine} | {threads} | {' | '.join(cells)} |"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    restart_as_worker("benchmarks.costs.eval_roof", args.threads)
    line = row(measure(), args.threads, commit(REPO))
    append_table(args.out, HEADER, line + "\n")
    print(line)
    print(f"appended to {args.out}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.costs.eval_roof", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--threads", type=positive, default=1, help="TensorFlow's threads (default 1: a default-sweep worker's)"
    )
    parser.add_argument("--out", type=Path, default=REPO / "results" / "bench" / "eval_roof.md")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
