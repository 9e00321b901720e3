"""What tf.data's autotuning costs the harness: each call of `fit`, `evaluate` or `predict` on an
autotuned dataset returns only when the autotuning thread next wakes (after 10 ms, then 20, 40, ...
up to 5.12 s between wake-ups), so a call that ends between two wake-ups waits for the second.

    python -m benchmarks.costs.autotune           # about 2 minutes; writes results/bench/autotune.md, .csv
    python -m benchmarks.costs.autotune --repeats 2 --out /tmp/x

In one process, the default model (120 classes, 32x32, the batch_sizes grid's data), the calls a run
makes at every record, each timed with autotuning on (`prefetch(AUTOTUNE)`, as Keras feeds arrays)
and off (`sweep.train.data.batches`, the harness since 2026-12-05), in alternating order across repeats:

- `evaluate` of the validation set (1,200 images, batch 512),
- `fit` of 50 steps at batch 8 (a record stretch of experiments/batch_sizes.yaml),
- `fit` of one epoch at batch 128 (4,800 images).

The numbers each call returns are compared too: on and off must give the same ones.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import csv
import os
import statistics
import time
from typing import Any

from benchmarks.common import machine

CALLS = ("evaluate 1,200 images", "fit 50 steps at batch 8", "fit 1 epoch at batch 128")


def dataset(x: Any, y: Any, batch: int, autotune: bool) -> Any:
    import tensorflow as tf

    from sweep.train import data

    if not autotune:
        return data.batches(x, y, batch)
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch).prefetch(tf.data.AUTOTUNE)


def one_repeat(model: Any, split: Any, autotune: bool, epoch: int) -> list[tuple[str, float, Any]]:
    """(call, seconds, what it returned) for each call, in CALLS order."""
    found = []
    started = time.perf_counter()
    result = model.evaluate(dataset(split.x_val, split.y_val, 512, autotune), verbose=0, return_dict=True)
    found.append((CALLS[0], time.perf_counter() - started, result))
    for call, batch, images in ((CALLS[1], 8, 400), (CALLS[2], 128, len(split.y_train))):
        feed = dataset(split.x_train[:images], split.y_train[:images], batch, autotune)
        started = time.perf_counter()
        history = model.fit(feed, initial_epoch=epoch, epochs=epoch + 1, verbose=0, shuffle=False)
        found.append((call, time.perf_counter() - started, history.history))
    return found


def measure(repeats: int) -> list[dict[str, Any]]:
    """Alternating on/off repeats; weights and optimizer restored before each, so both compute the same."""
    from sweep.config import DataConfig, ModelConfig
    from sweep.train import data
    from sweep.train.compiled import zero_optimizer
    from sweep.train.model import build_model

    split = data.load_split(DataConfig(samples_per_class=50))
    model = build_model(ModelConfig(), split.x_train.shape[1], split.num_classes, split.x_train.shape[-1])
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"], jit_compile=False)
    one_repeat(model, split, False, 0)  # traces every function
    start = model.get_weights()
    rows, returned = [], {}
    for repeat in range(repeats):
        for autotune in (True, False) if repeat % 2 == 0 else (False, True):
            model.set_weights(start)
            zero_optimizer(model.optimizer)
            for call, seconds, result in one_repeat(model, split, autotune, 1):
                rows.append({"call": call, "autotune": autotune, "repeat": repeat + 1, "seconds": round(seconds, 4)})
                returned.setdefault((call, repeat), []).append(repr(result))
    same = all(len(set(results)) == 1 for results in returned.values())
    return [dict(row, same_numbers=same, load_average=round(machine.load_average(), 2)) for row in rows]


def markdown(rows: list[dict[str, Any]], started: str) -> str:
    lines = [
        "# tf.data autotuning: the wait at the end of each call",
        "",
        f"`python -m benchmarks.costs.autotune`, started {started}; {machine.describe()}; load average "
        f"{rows[0]['load_average']} to {rows[-1]['load_average']}. Median of {max(r['repeat'] for r in rows)} "
        "alternating repeats, seconds per call (autotune.csv has each).",
        "",
        "| call | autotuning on | off (the harness) | on / off |",
        "|---|---|---|---|",
    ]
    for call in CALLS:
        on = statistics.median(r["seconds"] for r in rows if r["call"] == call and r["autotune"])
        off = statistics.median(r["seconds"] for r in rows if r["call"] == call and not r["autotune"])
        lines.append(f"| {call} | {on:.3f} | {off:.3f} | {on / off:.2f}x |")
    same = "the same" if all(r["same_numbers"] for r in rows) else "**not** the same"
    lines += ["", f"The numbers the calls returned with autotuning on and off: {same}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=6, help="alternating repeats (default 6)")
    parser.add_argument("--out", type=Path, default=machine.REPO / "results" / "bench")
    args = parser.parse_args(argv)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = measure(args.repeats)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "autotune.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    (args.out / "autotune.md").write_text(markdown(rows, started))
    print((args.out / "autotune.md").read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
