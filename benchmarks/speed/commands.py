"""The commands a user waits for without training: `plan`, `status` and `report` on a 100-run sweep,
and the default dataset's first build and cached load. Each is timed as a fresh process.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from benchmarks.common import machine
from benchmarks.common.synthetic import SYNTHETIC_GRID, synthetic_sweep

REPORT_AGAIN = "report (figures unchanged)"


@dataclass(frozen=True)
class CommandTiming:
    """Median wall seconds of a command's repeats, and whether any repeat imported TensorFlow or Keras."""

    seconds: float
    tensorflow_imported: bool


def time_commands(
    folder: Path, env: dict[str, str], grid: Path = SYNTHETIC_GRID, repeats: int = 3
) -> dict[str, CommandTiming]:
    """plan / status / report on a synthetic sweep of `grid` written into `folder`.

    `report` is timed twice: into a new folder each time (every figure drawn), and again
    into the same folder (figures whose data did not change are kept: what `report` after
    `run` costs).
    """
    results = synthetic_sweep(folder, grid)
    fresh = [["report", str(results), "--out", str(folder / f"report-{i}")] for i in range(repeats)]
    commands = {
        "plan": [["plan", str(grid)]] * repeats,
        "status": [["status", str(grid), "--results", str(results)]] * repeats,
        "report": fresh,
        REPORT_AGAIN: [fresh[-1]] * repeats,
    }
    return {name: _median_of(argvs, env) for name, argvs in commands.items()}


def _median_of(argvs: list[list[str]], env: dict[str, str]) -> CommandTiming:
    walls, imported = [], False
    for argv in argvs:
        finished, result = machine.probe("sweep", argv, env)
        walls.append(finished.seconds)
        imported = imported or bool(result["tensorflow_imported"])
    return CommandTiming(statistics.median(walls), imported)


def time_dataset_cache(env: dict[str, str], cache: Path) -> dict[str, float]:
    """The default dataset: first build into the empty cache `cache`, then a second load from it, each
    in a fresh process; the load alone and the whole process.
    """
    env = {**env, "BATCHSWEEP_CACHE": str(cache)}
    timings = {}
    for name in ("first_build", "second_load"):
        finished, result = machine.probe("dataset-load", [], env)
        timings[f"{name}_seconds"] = float(result["load"])
        timings[f"{name}_process_seconds"] = finished.seconds
    return timings
