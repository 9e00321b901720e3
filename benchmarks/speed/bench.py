"""The "Fast sweeps" benchmark: the harness against the plain Keras loop a user would write.

    python -m benchmarks.speed.bench          # the fixed grid benchmarks/grid.yaml, about 8 minutes on 2 cores
    python -m benchmarks.speed.bench --quick  # benchmarks/quick.yaml, about 4 minutes; writes to results/bench/quick/

In one run, on one machine, from an empty results folder and a warm dataset cache,
each training configuration timed as a whole process (benchmarks/common/training.py):
(a) the plain Keras loop (benchmarks/speed/keras_baseline.py: same model, data, seeds
and epochs; its per-epoch numbers are the harness's); (b) `sweep run --workers 1`;
(c) `sweep run` with the default number of workers; (d) one worker per core, when
the default is fewer.

Then: the per-epoch numbers of (b), (c), (d) against (a) (max absolute difference
per metric, matched by run id and epoch); samples per second per batch size from
epochs 2+ (epoch 1 includes graph tracing); the training step's FLOP/s as a share
of a float32 matrix-multiply peak measured in this run at the thread count of the
process that trained (benchmarks/common/peaks.py); `plan`, `status` and `report` on a
100-run sweep with synthetic records, median of 3, with a check that TensorFlow was
not imported, and the default dataset's first build and cached load
(benchmarks/speed/commands.py).

Writes bench.csv (tidy: section, config, batch_size, metric, value, unit),
bench_epochs.csv (every per-epoch record of every configuration), bench.md and
bench.png into --out (benchmarks/speed/bench_outputs.py). Timings are benchmarks, not tests:
other work on the machine slows everything it touches; `--repeats N` runs the
training configurations N times in alternating order and keeps each one's best.

On a machine with GPUs (`nvidia-smi` lists them, or CUDA_VISIBLE_DEVICES is set;
planned, not yet run): the peak is a float32 `tf.matmul` on GPU 0, (d) is left
out, and (e) `sweep run GRID --devices 0 --trials-per-gpu K` is added for each K
of `--trials-per-gpu`: K runs sharing one GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import tempfile
from dataclasses import replace
from datetime import datetime, timezone

from benchmarks.common import machine, training
from benchmarks.common.peaks import effective_peaks, measure_peaks, train_flops_per_sample
from benchmarks.speed.bench_outputs import write_outputs
from benchmarks.speed.bench_tables import Row, Stamp, summarize
from benchmarks.speed.commands import time_commands, time_dataset_cache

HERE = Path(__file__).resolve().parents[1]  # benchmarks/, beside the grids the groups share
GRID, QUICK_GRID = HERE / "grid.yaml", HERE / "quick.yaml"
RESULTS = machine.REPO / "results" / "bench"


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smaller grid (4 runs), about 4 minutes on 2 cores")
    parser.add_argument("--grid", type=Path, default=None, help="the grid to train (default benchmarks/grid.yaml)")
    parser.add_argument(
        "--out", type=Path, default=None, help="where to write (default results/bench, or results/bench/quick)"
    )
    parser.add_argument(
        "--repeats", type=int, default=1, help="repeats of each training configuration (alternating order; best kept)"
    )
    parser.add_argument("--skip-commands", action="store_true", help="skip the plan/status/report and cache timings")
    parser.add_argument(
        "--baseline-train-eval",
        action="store_true",
        help="(a) also evaluates the harness's train subset every epoch (the same work as the harness)",
    )
    parser.add_argument(
        "--trials-per-gpu",
        type=int,
        nargs="*",
        default=[2, 4],
        metavar="K",
        help="on a GPU machine: also time K runs sharing GPU 0, for each K (default 2 4)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    grid = args.grid or (QUICK_GRID if args.quick else GRID)
    out = args.out or (RESULTS / "quick" if args.quick else RESULTS)
    stamp = Stamp(
        datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), machine.describe(), "quick" if args.quick else "full"
    )
    print(f"{stamp.machine}; load average {machine.load_average():.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        rows, epochs = measure(args, grid, stamp, Path(tmp))
    paths = write_outputs(rows, epochs, out)
    print()
    print(paths["md"].read_text(), end="")
    shown = [p.relative_to(machine.REPO) if p.is_relative_to(machine.REPO) else p for p in paths.values()]
    print(f"\nwritten: {', '.join(map(str, shown))}")
    return 0


def measure(args: argparse.Namespace, grid: Path, stamp: Stamp, folder: Path) -> tuple[list[Row], list[Row]]:
    """Everything, in a scratch folder with its own dataset cache: (bench.csv rows, per-epoch rows)."""
    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.train.devices import device_pool

    env = machine.clean_env(folder / "cache")
    training.warm_cache(grid, folder / "cache")
    runs = plan(load_grid(grid))
    point = runs[0].point
    flops = train_flops_per_sample(point.data.image_size, point.data.classes or 120, point.model.width)
    gpus = device_pool(None)  # CUDA_VISIBLE_DEVICES, else nvidia-smi; no TensorFlow
    measured = measure_peaks(gpus, env)
    configurations = [
        training.baseline(grid, folder, args.baseline_train_eval),
        training.harness("b", grid, folder, workers=1),
        training.harness("c", grid, folder),
    ]
    if gpus:  # every configuration trains on GPU 0; several small runs packed on it
        configurations = [replace(c, on_gpu=True) for c in configurations]
        configurations += [
            training.harness(f"e{k}", grid, folder, gpu=gpus[0], trials_per_gpu=k) for k in args.trials_per_gpu
        ]
    one_per_core = None if gpus else training.harness("d", grid, folder, workers=machine.cores())
    trained = training.time_all(configurations, args.repeats, env, folder, one_per_core)
    commands, cache = {}, {}
    if not args.skip_commands:
        commands = time_commands(folder / "synthetic", env)
        cache = time_dataset_cache(env, folder / "cache_default")
    rows = summarize(stamp, trained, effective_peaks(measured), flops, commands, cache, len(runs), measured)
    return rows, [row for t in trained for row in t.best.epochs]


if __name__ == "__main__":
    raise SystemExit(main())
