"""Quiet training times: seconds per epoch and per optimizer step of every configuration a grid trains.

`python -m sweep time GRID` measures them the way benchmarks are measured (one
process, graphs traced before timing, repeats alternating between the
configurations, the best of the repeats kept), so the report's seconds can come
from a measurement rather than from runs that shared the machine with other
work. It writes `<results>/timing.csv`; the report reads it beside runs.csv.

A *configuration* is what sets the cost of one training step (`TIMING_KEYS`):
the dataset and input shape, the model, the optimizer, the batch size and the
replicas. Seed, learning rate, data order, imbalance, budgets and measuring
settings leave that cost alone, so every run that differs only in those shares
one row, and runs are matched to rows by these keys (`attach`).

Only training is timed: one whole epoch through `Run.timed_epoch`, the same
`fit` on the same batches the runs use. Evaluations and records are the
harness's measuring cost and are left out. TensorFlow keeps one replica count
per process (sweep/worker.py), so each replica count is timed in a child
process of its own (`--gpus`).
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sweep import atomic, devices, keys, vocab
from sweep.plan import RunSpec

if TYPE_CHECKING:
    import pandas as pd

TIMING_CSV = vocab.TIMING_CSV
MODEL_PREFIX = "model."
SHAPE_KEYS = ("data.dataset", "data.classes", "data.image_size", "train.optimizer", "train.batch_size", "train.gpus")
CONFIG = "config"  # the normalised TIMING_KEYS values, one string per configuration
STEP_SECONDS = "step_seconds_best"
QUIET_STEP_SECONDS = "quiet_step_seconds"  # the column `attach` adds to epochs
REPEATS_SECONDS = "epoch_seconds_all"  # timing.csv: every repeat's epoch seconds, in the order measured
QUIET_REPEATS = "quiet_epoch_seconds_repeats"  # the column `attach` adds: that text, per run
DEFAULT_REPEATS = 3


def timing_keys(flat: Iterable[str]) -> list[str]:
    """The dotted keys of a spec (or runs.csv columns) that set a training step's cost."""
    names = list(flat)
    return [k for k in names if k.startswith(MODEL_PREFIX)] + [k for k in SHAPE_KEYS if k in names]


def _normal(value: Any) -> str:
    """One spelling per value, whether it came from a spec or through a CSV (1 == 1.0, True == 'True')."""
    if value is None or (isinstance(value, float) and value != value):
        return "none"
    if isinstance(value, bool) or str(value) in ("True", "False"):
        return str(value).lower()
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def config_key(values: Mapping[str, Any], names: Iterable[str]) -> str:
    """A setting missing from `values` (a column written before the key existed) is at its default."""
    return " ".join(f"{k}={_normal(values.get(k, keys.default(k)))}" for k in names)


def configurations(specs: Iterable[RunSpec]) -> dict[str, RunSpec]:
    """The first spec of each configuration, in plan order."""
    found: dict[str, RunSpec] = {}
    for spec in specs:
        flat = spec.flat()
        found.setdefault(config_key(flat, timing_keys(flat)), spec)
    return found


# --- measuring (TensorFlow; the child process of one replica count)


def measure(specs: Iterable[RunSpec], repeats: int, say: Callable[[str], None]) -> list[dict[str, Any]]:
    """Time one epoch of training per configuration, `repeats` times alternating; one row each."""
    from sweep.train import Run

    chosen = configurations(specs)
    devices.configure_replicas(max((s.point.train.gpus for s in chosen.values()), default=1))
    load_before = os.getloadavg()[0]
    prepared = {}
    for i, (key, spec) in enumerate(chosen.items(), start=1):
        say(f"tracing #{i} of {len(chosen)}: batch {spec.point.train.batch_size}, gpus {spec.point.train.gpus} ({key})")
        prepared[key] = run = Run(spec)
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
        CONFIG: key,
        **{k: flat[k] for k in timing_keys(flat)},
        "sweep": spec.sweep,
        "timed_run_id": spec.run_id,
        "train_samples": run.info.train_samples,
        "steps_per_epoch": steps,
        "repeats": len(seconds),
        "epoch_seconds_best": min(seconds),
        "epoch_seconds_median": statistics.median(seconds),
        REPEATS_SECONDS: " ".join(f"{s:.4f}" for s in seconds),
        STEP_SECONDS: min(seconds) / steps,
        "threads": run.info.threads,
        "cpu": run.info.cpu,
        "load_average_before": load[0],
        "load_average_after": load[1],
        "measured": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
    }


def merge(path: Path, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """timing.csv with these rows replacing any earlier rows of the same configurations; written atomically."""
    import pandas as pd

    new = pd.DataFrame(rows)
    old = read(path)
    if old is not None:
        new = pd.concat([old[~old[CONFIG].isin(new[CONFIG])], new], ignore_index=True)
    atomic.write_csv(new, path)
    return new


def time_each_replica_count(
    grid_path: Path, specs: list[RunSpec], results: Path, repeats: int, say: Callable[[str], None]
) -> int:
    """One child process per replica count (`sweep time --gpus G`); the first failure's exit code, else 0."""
    started = time.perf_counter()
    for gpus in sorted({s.point.train.gpus for s in specs}):
        say(f"timing the configurations with gpus {gpus} in a fresh process")
        command = [sys.executable, "-m", "sweep", "time", str(grid_path), "--results", str(results)]
        env = devices.worker_environment(dict(os.environ))  # as a worker: every core, TensorFlow's info lines off
        code = subprocess.call([*command, "--repeats", str(repeats), "--gpus", str(gpus)], env=env)
        if code:
            return code
    say(f"wrote {results / TIMING_CSV} in {time.perf_counter() - started:.0f} s")
    return 0


# --- reading (pandas only: the report)


def read(path: Path) -> pd.DataFrame | None:
    import pandas as pd

    return pd.read_csv(path) if path.is_file() else None


def attach(folder: Path, epochs: pd.DataFrame) -> pd.DataFrame:
    """`epochs` with each run's quiet seconds per optimizer step from `folder/timing.csv`, and its configuration's
    repeats' epoch seconds as text in the order measured (empty where none matched)."""
    timing = read(folder / TIMING_CSV)
    if timing is None or epochs.empty:
        return epochs
    names = timing_keys(timing.columns)
    names += [k for k in timing_keys(epochs.columns) if k not in names]  # either file may predate a key
    keys_of = timing.apply(lambda row: config_key(row, names), axis=1)
    per_config = dict(zip(keys_of, timing[STEP_SECONDS], strict=True))
    repeats = dict(zip(keys_of, timing[REPEATS_SECONDS].astype(str), strict=True)) if REPEATS_SECONDS in timing else {}
    runs = epochs.drop_duplicates(vocab.RUN_ID)  # settings are per run: one key each, not one per record
    per_run = dict(zip(runs[vocab.RUN_ID], runs.apply(lambda row: config_key(row, names), axis=1), strict=True))
    configs = epochs[vocab.RUN_ID].map(per_run)
    return epochs.assign(
        **{QUIET_STEP_SECONDS: configs.map(per_config).astype(float), QUIET_REPEATS: configs.map(repeats)}
    )


def describe(folder: Path) -> str:
    """One sentence on where a folder's quiet times come from, for the report; empty without timing.csv."""
    import pandas as pd

    timing = read(folder / TIMING_CSV)
    if timing is None or timing.empty:
        return ""
    load = pd.concat([timing["load_average_before"], timing["load_average_after"]])
    return (
        f"Quiet seconds for {folder} are optimizer steps x the best of {int(timing['repeats'].min())} "
        f"alternating one-epoch timings per configuration (`python -m sweep time`, {folder / TIMING_CSV}; "
        f"{int(timing['threads'].iloc[0])} thread(s), {timing['cpu'].iloc[0]}, measured "
        f"{str(timing['measured'].min())[:10]}, 1-minute load average {load.min():.1f}-{load.max():.1f}); "
        "training only, without the evaluations at records."
    )
