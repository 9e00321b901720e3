"""What `sweep run GRID --no-train` costs on a 100-run grid and a journal store: the queue a Slurm
array or hand-started workers train from (`sweep slurm` queues the same way).

    python -m benchmarks.speed.queueing [--repeats 3]

Two cases, alternating in each repeat: into a fresh store (100 runs newly queued) and again into
the same store (nothing new: what a second `sweep slurm` costs). Each is timed twice with
time.perf_counter: the whole command in a fresh process (interpreter, imports, queueing), and
`orchestrate.queue_sweep` alone in this process. Prints the best and the median; asserts nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import statistics
import tempfile
import time

from benchmarks.common import machine
from benchmarks.common.synthetic import SYNTHETIC_GRID

CASES = ("fresh store", "again")


def command_seconds(grid: Path, results: Path, env: dict[str, str]) -> float:
    argv = machine.python_module("sweep", "run", str(grid), "--no-train", "--results", str(results))
    return machine.timed(argv, env).seconds


def in_process_seconds(grid: Path, results: Path) -> float:
    from sweep.config import load_grid
    from sweep.run import orchestrate

    started = time.perf_counter()
    queued = orchestrate.queue_sweep(load_grid(grid), orchestrate.Options(results=results), orchestrate.Console())
    seconds = time.perf_counter() - started
    assert queued.planned == 100  # the grid this benchmark is about, not a measurement check
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    times: dict[tuple[str, str], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        env = machine.clean_env(folder / "cache")
        for i in range(args.repeats):
            for how, timer in (("command", lambda r: command_seconds(SYNTHETIC_GRID, r, env)), ("queue_sweep", None)):
                for case in CASES:
                    results = folder / f"{how}-{i if case == CASES[0] else 0}"
                    seconds = timer(results) if timer else in_process_seconds(SYNTHETIC_GRID, results)
                    times.setdefault((how, case), []).append(seconds)
    print(f"{machine.describe()}; load average {machine.load_average():.2f}")
    print("| what | store | best (s) | median (s) |\n|---|---|---|---|")
    for (how, case), values in times.items():
        print(f"| {how} | {case} | {min(values):.2f} | {statistics.median(values):.2f} |")


if __name__ == "__main__":
    main()
