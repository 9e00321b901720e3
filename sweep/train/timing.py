"""Quiet training times: seconds per epoch and per optimizer step of every configuration a grid trains.

`python -m sweep time GRID` measures them the way benchmarks are measured (one
process, graphs traced before timing, repeats alternating between the
configurations, the best of the repeats kept), so the report's seconds can come
from a measurement rather than from runs that shared the machine with other
work. It writes `<results>/timing.csv` (its schema and what a configuration is:
sweep/config/timing_schema.py); the report reads it beside runs.csv (sweep/analysis/timing.py).

Only training is timed: one whole epoch through `Run.timed_epoch`, the same
`fit` on the same batches the runs use. Evaluations and records are the
harness's measuring cost and are left out. TensorFlow keeps one replica count
per process (sweep/run/worker.py), so each replica count is timed in a child
process of its own (`--gpus`).
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweep import vocab
from sweep.base import atomic
from sweep.config import timing_schema as schema
from sweep.config.plan import RunSpec
from sweep.train import devices

if TYPE_CHECKING:
    import pandas as pd

# Ten alternating repeats: a t-interval over repeats (C6's reading) at 3 has a multiplier of 4.3, at 10 of 2.26.
DEFAULT_REPEATS = 10
# Quiet means idle before timing: a 1-minute load average per core above this (0.5 on 2 cores: another process
# busy half the time) is refused; the load before and after is recorded in timing.csv either way.
MAX_LOAD_PER_CORE = 0.25


def too_busy(load: float, cores: int, max_per_core: float = MAX_LOAD_PER_CORE) -> str:
    """Why the machine is too busy for quiet timing, or "": its 1-minute load average per core above the limit."""
    per_core = load / max(1, cores)
    if per_core <= max_per_core:
        return ""
    return (
        f"the machine is busy: 1-minute load average {load:.2f} on {cores} core(s), {per_core:.2f} per core, above "
        f"{max_per_core:g} per core; quiet timing needs an otherwise idle machine: wait for other work to end, or "
        "pass --max-load L to time at up to L per core anyway (timing.csv records the load)"
    )


def measure(specs: Iterable[RunSpec], repeats: int, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Time one epoch of training per configuration, `repeats` times alternating; one row each."""
    from sweep.train.trainer import Trainer

    chosen = schema.configurations(specs)
    devices.configure_replicas(max((s.point.train.gpus for s in chosen.values()), default=1))
    load_before = os.getloadavg()[0]
    prepared = {}
    for i, (key, spec) in enumerate(chosen.items(), start=1):
        say(f"tracing #{i} of {len(chosen)}: batch {spec.point.train.batch_size}, gpus {spec.point.train.gpus} ({key})")
        prepared[key] = run = Trainer.alone(spec)
        run.timed_epoch(1)  # traces the training function: never timed
    times: dict[str, list[float]] = {key: [] for key in chosen}
    for r in range(1, repeats + 1):
        for key, run in prepared.items():
            times[key].append(run.timed_epoch(r + 1))
        say(
            f"repeat {r}/{repeats}, one epoch each: "
            + ", ".join(f"#{i} {t[-1]:.2f} s" for i, t in enumerate(times.values(), 1))
        )
    load_after = os.getloadavg()[0]
    return [_row(key, chosen[key], prepared[key], seconds, (load_before, load_after)) for key, seconds in times.items()]


def _row(key: str, spec: RunSpec, run: Any, seconds: list[float], load: tuple[float, float]) -> dict[str, Any]:
    flat = spec.flat()
    steps = run.info.steps_per_epoch
    return {
        schema.CONFIG: key,
        **{k: flat[k] for k in schema.timing_keys(flat)},
        schema.SWEEP: spec.sweep,
        schema.TIMED_RUN_ID: spec.run_id,
        schema.TRAIN_SAMPLES: run.info.train_samples,
        schema.STEPS_PER_EPOCH: steps,
        schema.REPEATS: len(seconds),
        schema.EPOCH_SECONDS_BEST: min(seconds),
        schema.EPOCH_SECONDS_MEDIAN: statistics.median(seconds),
        schema.REPEATS_SECONDS: " ".join(f"{s:.4f}" for s in seconds),
        schema.STEP_SECONDS: min(seconds) / steps,
        schema.THREADS: run.info.threads,
        schema.CPU: run.info.cpu,
        schema.LOAD_BEFORE: load[0],
        schema.LOAD_AFTER: load[1],
        schema.MEASURED: dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def merge(path: Path, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """timing.csv with these rows replacing any earlier rows of the same configurations; written atomically."""
    import pandas as pd

    new = pd.DataFrame(rows)
    old = pd.read_csv(path) if path.is_file() else None
    if old is not None:  # matched on the settings, not the config text: a key added since changes the text alone
        names = schema.timing_keys([*old.columns, *new.columns])
        measured = set(new.apply(lambda row: schema.config_key(row, names), axis=1))
        earlier = old.apply(lambda row: schema.config_key(row, names), axis=1).isin(measured)
        kept = pd.concat([old[~earlier], new], ignore_index=True)
        new = kept[[*new.columns, *(c for c in kept.columns if c not in new.columns)]]  # today's column order
    atomic.write_csv(new, path)
    return new


def time_each_replica_count(
    grid_path: Path,
    overrides: Sequence[str],
    specs: list[RunSpec],
    results: Path,
    repeats: int,
    say: Callable[[str], None],
) -> int:
    """One child process per replica count (`sweep time GRID OVERRIDES --gpus G`), the grid as the caller
    planned it; the first failure's exit code, else 0.
    """
    started = time.perf_counter()
    for gpus in sorted({s.point.train.gpus for s in specs}):
        say(f"timing the configurations with gpus {gpus} in a fresh process")
        command = [sys.executable, "-m", "sweep", "time", str(grid_path), *overrides, "--results", str(results)]
        env = devices.worker_environment(dict(os.environ))  # as a worker: every core, TensorFlow's info lines off
        # the parent checked the load before the first; a child's own training raises the next one's
        options = ["--repeats", str(repeats), "--gpus", str(gpus), "--max-load", "inf"]
        code = subprocess.call([*command, *options], env=env)
        if code:
            return code
    say(f"wrote {results / vocab.TIMING_CSV} in {time.perf_counter() - started:.0f} s")
    return 0
