"""Wall time of one small fixed grid with 1 and 2 worker processes and different thread shares.

    .venv/bin/python benchmarks/speed/workers.py [--out results/bench/workers.csv]

Each configuration runs the same grid (4 runs: 2 batch sizes x 2 seeds, 120 classes,
2 epochs) from an empty results folder, as a user would (`python -m sweep run`),
timed as a whole process with time.perf_counter, in one session on one machine, in
alternating order over `--repeats`. Prints a table with ratios to the first row.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import os
import subprocess
import tempfile
import time

GRID = """\
name: bench_workers
seeds: [0, 1]
base:
  data: {samples_per_class: 30, image_size: 32}
  train: {epochs: 2}
grid:
  train.batch_size: [16, 64]
"""
CONFIGS = [  # (label, workers, threads per worker)
    ("1 worker x 2 threads", 1, 2),
    ("2 workers x 1 thread", 2, 1),
    ("2 workers x 2 threads", 2, 2),
]


def time_config(workers: int, threads: int) -> float:
    with tempfile.TemporaryDirectory() as folder:
        grid = Path(folder) / "grid.yaml"
        grid.write_text(GRID)
        env = {**os.environ, "BATCHSWEEP_THREADS": str(threads)}
        started = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "sweep",
                "run",
                str(grid),
                "--workers",
                str(workers),
                "--results",
                str(Path(folder) / "out"),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("results/bench/workers.csv"))
    args = parser.parse_args()
    times: dict[str, list[float]] = {label: [] for label, _, _ in CONFIGS}
    for repeat in range(args.repeats):
        order = CONFIGS if repeat % 2 == 0 else CONFIGS[::-1]
        for label, workers, threads in order:
            times[label].append(time_config(workers, threads))
            print(f"repeat {repeat + 1}: {label}: {times[label][-1]:.1f} s", flush=True)
    base = min(times[CONFIGS[0][0]])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    lines = ["config,best_seconds,all_seconds,speedup_vs_first"]
    print(f"\n{'config':<24} {'best s':>8} {'speed-up':>9}")
    for label, _, _ in CONFIGS:
        best = min(times[label])
        print(f"{label:<24} {best:8.1f} {base / best:8.2f}x")
        lines.append(f"{label},{best:.2f},{' '.join(f'{t:.2f}' for t in times[label])},{base / best:.3f}")
    args.out.write_text("\n".join(lines) + "\n")
    print(f"\nwritten: {args.out}")


if __name__ == "__main__":
    main()
