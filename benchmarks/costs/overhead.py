"""What a measuring setting costs: the same run with and without it, in one process.

    python -m benchmarks.costs.overhead [--setting noise_scale | recalibrate_bn] [--epochs 2] [--batch-sizes 8 128]

Both settings add columns to every record and leave training unchanged; this
prices them.
The controls data (40 images per class, 3,840 training images), one thread per
core, best of 2 alternating repeats of each; prints seconds and the ratio.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import time
from typing import Any

from sweep.config import DataConfig, PointConfig, TrainConfig
from sweep.config.plan import RunSpec

MEASURING = ("noise_scale", "recalibrate_bn")  # train.* settings that only add records


def seconds(batch_size: int, epochs: int, setting: str, on: bool, session: Any) -> float:
    """One run's seconds, trained in `session` (one for the process, as a worker has)."""
    from sweep.train.trainer import Trainer

    point = PointConfig(
        data=DataConfig(samples_per_class=40),
        train=TrainConfig(epochs=epochs, batch_size=batch_size, **{setting: on}),
    )
    started = time.perf_counter()
    for _ in Trainer.alone(RunSpec(sweep="bench", seed=0, point=point, varying=(("seed", 0),)), session).epochs():
        pass
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--setting", choices=MEASURING, default="noise_scale")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[8, 128])
    args = parser.parse_args()
    from sweep.train.session import Session

    session = Session()
    seconds(32, 1, args.setting, True, session)  # warm up: dataset cache, TensorFlow start, first traces
    print(f"| batch size | without (s) | with {args.setting} (s) | ratio |\n|---|---|---|---|")
    for batch in args.batch_sizes:
        runs = [
            (flag, seconds(batch, args.epochs, args.setting, flag, session)) for _ in range(2) for flag in (False, True)
        ]
        times = {flag: min(t for f, t in runs if f == flag) for flag in (False, True)}
        print(f"| {batch} | {times[False]:.1f} | {times[True]:.1f} | {times[True] / times[False]:.2f}x |")


if __name__ == "__main__":
    main()
