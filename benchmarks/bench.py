"""The "Fast sweeps" benchmark: the harness against the plain Keras loop a user would write.

    .venv/bin/python benchmarks/bench.py            # the fixed grid benchmarks/grid.yaml, about 8 minutes on 2 cores
    .venv/bin/python benchmarks/bench.py --quick    # a smaller grid, about 4 minutes; writes to results/bench/quick/
    .venv/bin/python benchmarks/bench.py --levers   # the lever experiments of docs/levers.md, about 15 minutes

In one run, on one machine, each as a whole-process wall time from an empty
results folder and a warm dataset cache:

  (a) `benchmarks/keras_baseline.py GRID`: one process, a Python loop of `model.fit`
      over the grid's runs, same model, data, seeds and epochs (its per-epoch numbers
      are the harness's, see that file);
  (b) `python -m sweep run GRID --workers 1`;
  (c) `python -m sweep run GRID` with the CLI's default number of workers;
  (d) `python -m sweep run GRID --workers <cores>`, only when the default is fewer
      (one thread per core per worker: the share `--workers N` gives).

Then: the per-epoch numbers of (b), (c), (d) against (a) (max absolute difference
per metric, matched by run id and epoch); samples per second per batch size from
epochs 2+ (epoch 1 includes graph tracing); the training step's FLOP/s (analytic
count of the convolutions and the dense layer, x3 for forward + backward) as a
share of a float32 matrix-multiply peak measured in this run (numpy/OpenBLAS,
n=1024) at the thread count of the process that trained; `python -m sweep plan`,
`status` and `report` on a 100-run sweep (a real store, filled with synthetic
records through `sweep.store`, median of 3, with a check that TensorFlow was not
imported); and the default dataset's first build and cached second load, each in
a fresh process with an empty temporary cache.

Writes `bench.csv` (tidy: section, config, batch_size, metric, value, unit),
`bench_epochs.csv` (every per-epoch record of every configuration), `bench.md`
(the tables printed at the end) and `bench.png` into `--out` (default
`results/bench/`, or `results/bench/quick/` with --quick). Timings are
benchmarks, not tests: other work on the machine slows everything it touches;
`--repeats N` runs the training configurations N times in alternating order and
keeps each one's best. `--baseline-train-eval` gives (a) the harness's extra work
(the inference-mode train subset every epoch).

On a machine with GPUs (`nvidia-smi` lists them, or CUDA_VISIBLE_DEVICES is set;
planned, not yet run): the peak is a float32 `tf.matmul` on GPU 0, (d) is left
out, and (e) `python -m sweep run GRID --devices 0 --trials-per-gpu K` is added
for each K of `--trials-per-gpu` (default 2 and 4): K runs sharing one GPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

GRID = REPO / "benchmarks" / "grid.yaml"
BASELINE = REPO / "benchmarks" / "keras_baseline.py"
QUICK_GRID = """\
# benchmarks/bench.py --quick: the bench grid at half the data, 2 batch sizes x 2 seeds (4 runs:
# an even number, so two workers get equal shares).
name: bench_quick
seeds: [0, 1]
base:
  data: {dataset: glyphs120, samples_per_class: 15, image_size: 32}
  train: {epochs: 2, optimizer: adam, lr: 0.001}
grid:
  train.batch_size: [8, 64]
"""
SYNTHETIC_GRID = """\
# benchmarks/bench.py: a 100-run sweep for timing plan, status and report (records are synthetic).
name: bench100
seeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
base:
  data: {samples_per_class: 30}
  train: {epochs: 3}
grid:
  train.batch_size: [8, 16, 24, 32, 48, 64, 96, 128, 192, 256]
"""
CSV_COLUMNS = ("when", "machine", "mode", "section", "config", "batch_size", "metric", "value", "unit")
EPOCH_COLUMNS = ("config", "run_id", "seed", "batch_size", "epoch", "step", "train_acc", "train_loss", "val_acc",
                 "val_loss", "epoch_seconds", "samples_per_second")
COMPARED = ("train_acc", "train_loss", "val_acc", "val_loss")  # what both (a) and the harness record
LABELS = {"a": "(a) plain Keras loop", "b": "(b) harness, 1 worker", "c": "(c) harness, default workers",
          "d": "(d) harness, one worker per core"}


def label(config: str) -> str:
    """A configuration's name in tables; eK = K runs packed on one GPU (--trials-per-gpu K)."""
    return LABELS.get(config) or f"(e) harness, {config[1:]} runs share GPU 0 (--trials-per-gpu {config[1:]})"


def _configs(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(r["config"] for r in rows if r["section"] == "wall"))
TARGETS = {"overhead_b": 0.05, "speedup_c": 1.7, "command_seconds": 1.5, "cache_seconds": 1.0}
MATMUL_N = 1024


# --- measurements


@dataclass
class Training:
    """One training configuration, timed as a whole process."""

    config: str  # a, b, c, d
    command: list[str]
    workers: int
    threads: int  # TensorFlow intra-op threads per training process
    seconds: list[float] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)  # EPOCH_COLUMNS, from the best repeat
    phases: dict[str, float] = field(default_factory=dict)  # harness only: its workers' phase (whole seconds)
    run_seconds: list[float] = field(default_factory=list)  # per run, from the best repeat
    peak_key: int | str | None = None  # which measured peak applies: None = `threads` (CPU), "gpu"

    @property
    def best(self) -> float:
        return min(self.seconds)


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def clean_env(cache: Path) -> dict[str, str]:
    """The environment of every timed process: no thread or store overrides, a private dataset cache."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("BATCHSWEEP_THREADS", "BATCHSWEEP_STORAGE", "TF_NUM_INTRAOP_THREADS",
                        "TF_NUM_INTEROP_THREADS", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES")}
    env["BATCHSWEEP_CACHE"] = str(cache)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def timed(command: list[str], env: dict[str, str], check: bool = True) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}")
    return seconds, done


MATMUL_CODE = """\
import json, sys, time
import numpy as np
n, budget = int(sys.argv[1]), float(sys.argv[2])
rng = np.random.default_rng(0)
a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
a @ b
best, spent = float("inf"), 0.0
while spent < budget:
    t = time.perf_counter(); a @ b; dt = time.perf_counter() - t
    best, spent = min(best, dt), spent + dt
print(json.dumps({"gflops": 2 * n ** 3 / best / 1e9}))
"""


def matmul_peak(threads: int, env: dict[str, str], n: int = MATMUL_N, budget: float = 2.0) -> float:
    """float32 n x n matrix multiply, GFLOP/s, best of `budget` seconds, in a fresh process with `threads` threads."""
    env = {**env, **{k: str(threads) for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")}}
    _, done = timed([sys.executable, "-c", MATMUL_CODE, str(n), str(budget)], env)
    return float(json.loads(done.stdout)["gflops"])


def train_flops_per_sample(image_size: int, num_classes: int, width: float = 1.0) -> float:
    """FLOPs of one training step per image: 3 x the forward pass's convolutions and dense layer
    (2 per multiply-add; BatchNorm, ReLU and pooling are left out, they are not matrix work).
    The model of sweep/model.py: 3x3 'same' convolutions, each followed by 2x2 'same' pooling."""
    from sweep.model import channels

    flops, size, c_in = 0.0, image_size, 1
    for c_out in channels(width):
        flops += 2 * size * size * 9 * c_in * c_out
        size, c_in = math.ceil(size / 2), c_out
    flops += 2 * c_in * num_classes
    return 3 * flops


def effective_peaks(measured: dict[Any, float]) -> dict[Any, float]:
    """The peak available to a process with t threads: the best measured at t or fewer (on a busy
    machine more threads can measure slower than one; a process with t threads can do at least as well).
    A non-integer key (the GPU's) is kept as measured."""
    threads = {t: v for t, v in measured.items() if isinstance(t, int)}
    return {t: (max(v for k, v in threads.items() if k <= t) if t in threads else value) for t, value in measured.items()}


GPU_MATMUL_CODE = """\
import json, time
import tensorflow as tf
n = 4096
a, b = tf.random.normal((n, n)), tf.random.normal((n, n))
f = tf.function(lambda a, b: tf.matmul(a, b))
f(a, b).numpy()
best = float("inf")
for _ in range(20):
    t = time.perf_counter(); f(a, b).numpy(); best = min(best, time.perf_counter() - t)
print(json.dumps({"gflops": 2 * n ** 3 / best / 1e9}))
"""


def gpu_matmul_peak(env: dict[str, str], gpu: str) -> float:
    """float32 4096 x 4096 matrix multiply on one GPU (TensorFlow, TF32 where the GPU has it), GFLOP/s.
    Not run on the CPU-only machine this was written on: planned, see docs/levers.md."""
    _, done = timed([sys.executable, "-c", GPU_MATMUL_CODE], {**env, "CUDA_VISIBLE_DEVICES": gpu})
    return float(json.loads(done.stdout.strip().splitlines()[-1])["gflops"])


LOAD_CODE = """\
import json, time
t0 = time.perf_counter()
from sweep.config import DataConfig
from sweep.data import load_split
t1 = time.perf_counter()
split = load_split(DataConfig())
print(json.dumps({"import": t1 - t0, "load": time.perf_counter() - t1, "train": int(len(split.y_train))}))
"""


def cache_timings(env: dict[str, str], folder: Path) -> dict[str, float]:
    """The default dataset: first build into an empty cache, then a second load from it, each in a fresh process."""
    env = {**env, "BATCHSWEEP_CACHE": str(folder)}
    result = {}
    for name in ("first_build", "second_load"):
        wall, done = timed([sys.executable, "-c", LOAD_CODE], env)
        result[f"{name}_seconds"] = json.loads(done.stdout)["load"]
        result[f"{name}_process_seconds"] = wall
    return result


def warm_cache(grid: Path, cache: Path) -> None:
    """Render the grid's datasets once, so no timed configuration pays for it."""
    from sweep.config import load_grid
    from sweep.data import raw_arrays
    from sweep.plan import plan

    for data_cfg in {spec.point.data for spec in plan(load_grid(grid))}:
        raw_arrays(data_cfg, cache)


def baseline_config(grid: Path, folder: Path, train_eval: bool = False) -> Training:
    out = folder / "baseline_epochs.csv"
    return Training("a", [sys.executable, str(BASELINE), str(grid), "--out", str(out)] + (["--train-eval"] if train_eval else []),
                    workers=1, threads=cores())


def harness_config(config: str, grid: Path, folder: Path, workers: int | None) -> Training:
    command = [sys.executable, "-m", "sweep", "run", str(grid), "--results", str(folder / f"results_{config}")]
    if workers is not None:
        command += ["--workers", str(workers)]
    n = workers or 1  # the default is read from the command's output when it runs
    return Training(config, command, workers=n, threads=max(1, cores() // n))


def run_training(training: Training, env: dict[str, str], folder: Path) -> None:
    """Time one repeat from an empty results folder; keep the per-epoch records of the best repeat."""
    results = folder / f"results_{training.config}"
    if results.exists():
        import shutil

        shutil.rmtree(results)
    seconds, done = timed(training.command, env)
    if training.config != "a":
        started = re.search(r"starting (\d+) worker", done.stdout)
        if started:
            training.workers = int(started.group(1))
            training.threads = max(1, cores() // training.workers)
    if not training.seconds or seconds < training.best:
        training.epochs = read_epochs(training.config, folder)
        training.run_seconds = read_run_seconds(training.config, folder)
        # `run` prints "trained N run(s) in S s": the workers' phase; the rest is set-up, export and report
        trained = re.search(r"trained \d+ run\(s\) in (\d+) s", done.stdout)
        training.phases = {"workers_phase_seconds": float(trained.group(1))} if trained else {}
    training.seconds.append(seconds)


def read_epochs(config: str, folder: Path) -> list[dict[str, Any]]:
    """Per-epoch records of a configuration, in EPOCH_COLUMNS."""
    import pandas as pd

    if config == "a":
        table = pd.read_csv(folder / "baseline_epochs.csv")
    else:
        table = pd.read_csv(folder / f"results_{config}" / "epochs.csv").rename(columns={"train.batch_size": "batch_size"})
    table = table.assign(config=config)
    return table[list(EPOCH_COLUMNS)].to_dict("records")


def read_run_seconds(config: str, folder: Path) -> list[float]:
    """Seconds per run: the baseline's own (seeding to the last epoch's validation); the harness's
    trial duration in the store (claimed to finished: data, model, epochs, evaluations, records)."""
    import pandas as pd

    if config == "a":
        table = pd.read_csv(folder / "baseline_epochs.csv")
        return [float(v) for v in table.groupby("run_id")["run_seconds"].first()] if "run_seconds" in table else []
    table = pd.read_csv(folder / f"results_{config}" / "runs.csv")
    return [float(v) for v in table["duration_seconds"].dropna()] if "duration_seconds" in table else []


# --- the 100-run sweep for plan / status / report


def synthetic_sweep(folder: Path, grid_text: str = SYNTHETIC_GRID) -> tuple[Path, Path]:
    """A sweep (100 runs by default) whose store and CSVs are real (written by sweep.store) and whose
    records are synthetic (plausible numbers, no training). Returns (grid file, results folder)."""
    import numpy as np

    from sweep import store, vocab
    from sweep.config import load_grid
    from sweep.plan import plan

    grid = folder / "synthetic.yaml"
    grid.write_text(grid_text)
    parsed = load_grid(grid)
    runs = plan(parsed)
    results = folder / parsed.name
    study = store.open_study(store.open_storage(results / vocab.JOURNAL_FILE), parsed.name)
    store.enqueue(study, runs)
    rng = np.random.default_rng(0)
    train_samples, val_samples = 2880, 720
    while (claim := store.claim_next(study)) is not None:
        batch = claim.spec.point.train.batch_size
        steps = math.ceil(train_samples / batch)
        store.record_info(claim.trial, {
            "parameters": 71800, "train_samples": train_samples, "val_samples": val_samples, "num_classes": 120,
            "replicas": 1, "per_replica_batch": batch, "virtual_devices": False, "devices": "/device:CPU:0",
            "steps_per_epoch": steps})
        val = 0.0
        for epoch in range(1, claim.spec.point.train.epochs + 1):
            learned = 1 - math.exp(-epoch * steps / 400)
            train_acc = float(np.clip(0.9 * learned + rng.normal(0, 0.02), 0, 1))
            train_eval = float(np.clip(0.85 * learned + rng.normal(0, 0.02), 0, 1))
            val = float(np.clip(0.8 * learned - 0.02 * math.log2(batch / 8) + rng.normal(0, 0.02), 0, 1))
            seconds = train_samples / (400 + 4 * batch) * (1.3 if epoch == 1 else 1.0)
            store.record_epoch(claim.trial, {
                vocab.EPOCH: epoch, vocab.STEP: epoch * steps, vocab.TRAIN_ACC: train_acc,
                vocab.TRAIN_EVAL_ACC: train_eval, vocab.VAL_ACC: val, vocab.TRAIN_LOSS: 4.8 * (1 - train_acc) + 0.1,
                vocab.TRAIN_EVAL_LOSS: 4.8 * (1 - train_eval) + 0.1, vocab.VAL_LOSS: 4.8 * (1 - val) + 0.2,
                vocab.GAP: train_acc - val, vocab.EVAL_GAP: train_eval - val, vocab.EPOCH_SECONDS: seconds,
                vocab.SAMPLES_PER_SECOND: train_samples / seconds, vocab.LR: 0.001})
        store.finish(study, claim.trial, vocab.DONE, value=val)
    store.export_csv(study, results)
    return grid, results


REPORT_AGAIN = "report (figures unchanged)"

# Runs `python -m sweep ARGS` and reports on stderr whether TensorFlow or Keras was imported.
CLI_CODE = ("import atexit, runpy, sys; "
            "atexit.register(lambda: sys.stderr.write('@@tf %d\\n' % any(m.split('.')[0] in ('tensorflow', 'keras') "
            "for m in sys.modules))); sys.argv = ['sweep'] + sys.argv[1:]; "
            "runpy.run_module('sweep', run_name='__main__', alter_sys=True)")


def command_timings(grid: Path, results: Path, env: dict[str, str], repeats: int = 3) -> dict[str, tuple[float, bool]]:
    """plan / status / report on the 100-run sweep: (median wall seconds, TensorFlow imported).

    `report` is timed twice: into a new folder each time (every figure drawn), and again
    into the same folder (figures whose data did not change are kept: what `report` after
    `run` costs)."""
    fresh = [["report", str(results), "--out", str(results.parent / f"report-{i}")] for i in range(repeats)]
    commands = {"plan": [["plan", str(grid)]] * repeats,
                "status": [["status", str(grid), "--results", str(results)]] * repeats,
                "report": fresh, REPORT_AGAIN: [fresh[-1]] * repeats}
    out = {}
    for name, argvs in commands.items():
        walls, imported = [], False
        for args in argvs:
            wall, done = timed([sys.executable, "-c", CLI_CODE, *args], env)
            walls.append(wall)
            imported = imported or "@@tf 1" in done.stderr
        out[name] = (statistics.median(walls), imported)
    return out


# --- analysis


def throughput(epochs: list[dict[str, Any]]) -> dict[int, float]:
    """Median samples per second per batch size over epochs 2+ (epoch 1 includes tracing), else all epochs."""
    by_batch: dict[int, list[float]] = {}
    for later in (True, False):
        for row in epochs:
            if not later or float(row["epoch"]) > 1:
                by_batch.setdefault(int(row["batch_size"]), []).append(float(row["samples_per_second"]))
        if by_batch:
            break
    return {batch: statistics.median(values) for batch, values in sorted(by_batch.items())}


def agreement(reference: list[dict[str, Any]], other: list[dict[str, Any]]) -> dict[str, float]:
    """Max absolute difference per metric over the records both have (matched by run id and epoch),
    and how many records matched (`records`) out of the reference's (`expected`)."""
    index = {(r["run_id"], float(r["epoch"])): r for r in other}
    pairs = [(r, index[(r["run_id"], float(r["epoch"]))]) for r in reference if (r["run_id"], float(r["epoch"])) in index]
    result = {m: max((abs(float(a[m]) - float(b[m])) for a, b in pairs), default=math.nan) for m in COMPARED}
    return {**result, "records": float(len(pairs)), "expected": float(len(reference))}


def machine_text() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        tf = next(f"TensorFlow {version(p)}" for p in ("tensorflow-cpu", "tensorflow") if _installed(p))
    except StopIteration:
        tf = "TensorFlow ?"
    return f"{cores()} cores ({model}), {platform.system()} {platform.machine()}, Python {platform.python_version()}, {tf}"


def _installed(package: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(package)
        return True
    except PackageNotFoundError:
        return False


def summarize(trainings: list[Training], peaks: dict[int, float], flops_per_sample: float,
              commands: dict[str, tuple[float, bool]], cache: dict[str, float], runs: int,
              mode: str, machine: str, when: str, measured: dict[int, float] | None = None) -> list[dict[str, Any]]:
    """Every number of the benchmark as tidy rows (CSV_COLUMNS)."""
    rows: list[dict[str, Any]] = []

    def add(section: str, config: str, metric: str, value: float, unit: str, batch_size: int | str = "") -> None:
        rows.append({"when": when, "machine": machine, "mode": mode, "section": section, "config": config,
                     "batch_size": batch_size, "metric": metric, "value": value, "unit": unit})

    by_config = {t.config: t for t in trainings}
    base = by_config.get("a")
    for threads, gflops in sorted(peaks.items(), key=str):
        add("peak", f"matmul_{threads}_threads", "gflops", gflops, "GFLOP/s")
        if measured and threads in measured:
            add("peak", f"matmul_{threads}_threads", "gflops_measured", measured[threads], "GFLOP/s")
    add("model", "train_step", "flops_per_sample", flops_per_sample, "FLOP")
    for t in trainings:
        add("wall", t.config, "wall_seconds", t.best, "s")
        add("wall", t.config, "runs", runs, "runs")
        add("wall", t.config, "runs_per_hour", runs / t.best * 3600, "runs/h")
        add("wall", t.config, "workers", t.workers, "processes")
        add("wall", t.config, "threads_per_worker", t.threads, "threads")
        if t.config == "a":
            add("wall", t.config, "train_eval", float("--train-eval" in t.command), "bool")
        for metric, value in t.phases.items():
            add("wall", t.config, metric, value, "s")
        if t.run_seconds:
            add("wall", t.config, "mean_run_seconds", statistics.mean(t.run_seconds), "s")
        if base is not None and t.config != "a":
            add("wall", t.config, "overhead_vs_a", t.best / base.best - 1, "fraction")
            add("wall", t.config, "speedup_vs_a", base.best / t.best, "x")
        for batch, sps in throughput(t.epochs).items():
            gflops = sps * flops_per_sample / 1e9
            add("throughput", t.config, "samples_per_second", sps, "samples/s", batch)
            add("throughput", t.config, "train_gflops", gflops, "GFLOP/s", batch)
            key = t.threads if t.peak_key is None else t.peak_key
            if key in peaks:
                add("throughput", t.config, "peak_share", gflops / peaks[key], "fraction", batch)
        if base is not None and t.config != "a":
            for metric, value in agreement(base.epochs, t.epochs).items():
                add("agreement", t.config, f"max_abs_diff_{metric}" if metric in COMPARED else metric, value,
                    "records" if metric in ("records", "expected") else "abs")
    for name, (seconds, imported) in commands.items():
        add("commands", name, "wall_seconds", seconds, "s")
        add("commands", name, "tensorflow_imported", float(imported), "bool")
    for metric, value in cache.items():
        add("cache", "glyphs120_default", metric, value, "s")
    return rows


def write_csv(rows: list[dict[str, Any]], path: Path, columns: tuple[str, ...] = CSV_COLUMNS) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)


def _get(rows: list[dict[str, Any]], section: str, config: str, metric: str, batch: int | str = "") -> float | None:
    for r in rows:
        if (r["section"], r["config"], r["metric"], str(r["batch_size"])) == (section, config, metric, str(batch)):
            return float(r["value"])
    return None


def markdown(rows: list[dict[str, Any]]) -> str:
    """The tables: wall times, throughput per batch size, agreement and the issue's targets."""
    if not rows:
        return ""
    first = rows[0]
    configs = _configs(rows)
    lines = [f"Machine: {first['machine']}. Run {first['when']} ({first['mode']} mode).", ""]
    if _get(rows, "wall", "a", "train_eval") == 1.0:
        lines[-1:] = ["", "(a) also evaluates the harness's train subset every epoch (--baseline-train-eval).", ""]
    lines += ["| configuration | processes x threads | wall (s) | runs per hour | vs (a) |", "|---|---|---|---|---|"]
    for c in configs:
        wall, rph = _get(rows, "wall", c, "wall_seconds"), _get(rows, "wall", c, "runs_per_hour")
        workers, threads = _get(rows, "wall", c, "workers"), _get(rows, "wall", c, "threads_per_worker")
        if c == "a":
            versus = "1.00x"
        elif c == "b":
            versus = f"overhead {_get(rows, 'wall', c, 'overhead_vs_a'):+.1%}"
        else:
            versus = f"speed-up {_get(rows, 'wall', c, 'speedup_vs_a'):.2f}x"
        lines.append(f"| {label(c)} | {workers:.0f} x {threads:.0f} | {wall:.1f} | {rph:.0f} | {versus} |")
    phases = [(c, _get(rows, "wall", c, "workers_phase_seconds"), _get(rows, "wall", c, "wall_seconds")) for c in configs]
    phases = [(c, w, total) for c, w, total in phases if w is not None and total is not None]
    if phases:
        lines += ["", "Harness wall time split (from `run`'s own \"trained N run(s) in S s\", whole seconds): "
                  + "; ".join(f"{c}: workers {w:.0f} s, the rest (queueing, CSV export, report) {total - w:.0f} s"
                              for c, w, total in phases) + "."]
    per_run = [(c, _get(rows, "wall", c, "mean_run_seconds")) for c in configs]
    if any(v is not None for _, v in per_run):
        lines += ["", "Mean seconds per run ((a): seeding to its last validation; harness: claimed to finished "
                      "in the store): " + ", ".join(f"{c} {v:.1f} s" for c, v in per_run if v is not None) + "."]
    batches = sorted({int(r["batch_size"]) for r in rows if r["section"] == "throughput"})
    if batches:
        lines += ["", ("Samples per second per batch size (median over epochs 2+; per training process), and the "
                      "training step's achieved FLOP/s as a share of the matrix-multiply peak at that process's "
                      "thread count:"), ""]
        lines.append("| batch size | " + " | ".join(f"{c} samples/s | {c} GFLOP/s (share of peak)" for c in configs) + " |")
        lines.append("|---|" + "---|---|" * len(configs))
        for b in batches:
            cells = []
            for c in configs:
                sps, gf, share = (_get(rows, "throughput", c, m, b) for m in ("samples_per_second", "train_gflops", "peak_share"))
                cells += [f"{sps:.0f}" if sps is not None else "-",
                          f"{gf:.2f} ({share:.1%})" if gf is not None and share is not None else "-"]
            lines.append(f"| {b} | " + " | ".join(cells) + " |")
        peaks = [r for r in rows if r["section"] == "peak" and r["metric"] == "gflops"]
        flops = _get(rows, "model", "train_step", "flops_per_sample")
        lines += ["", "Matrix-multiply peak (numpy float32 1024x1024): "
                  + ", ".join(f"{float(r['value']):.1f} GFLOP/s at {r['config'].split('_')[1]} thread(s)" for r in peaks)
                  + (f"; training step {flops / 1e6:.1f} MFLOP per image (3 x forward convolutions and dense)." if flops else ".")]
    lines += ["", "| target (issue) | measured | met |", "|---|---|---|"]
    lines += _target_lines(rows, configs)
    return "\n".join(lines) + "\n"


def _target_lines(rows: list[dict[str, Any]], configs: list[str]) -> list[str]:
    out = []

    def line(text: str, measured: str, ok: bool | None) -> None:
        out.append(f"| {text} | {measured} | {'yes' if ok else ('no' if ok is not None else '-')} |")

    overhead = _get(rows, "wall", "b", "overhead_vs_a")
    if overhead is not None:
        line("(b) within 5% of (a)", f"{overhead:+.1%}", overhead <= TARGETS["overhead_b"])
    for c in configs[2:]:
        speedup = _get(rows, "wall", c, "speedup_vs_a")
        if speedup is not None:
            workers = _get(rows, "wall", c, "workers")
            line(f"{label(c)} at least 1.7x faster than (a)", f"{speedup:.2f}x ({workers:.0f} worker(s))",
                 speedup >= TARGETS["speedup_c"])
    for name in ("plan", "status", "report", REPORT_AGAIN):
        seconds = _get(rows, "commands", name, "wall_seconds")
        if seconds is not None:
            tf = _get(rows, "commands", name, "tensorflow_imported")
            line(f"`sweep {name}` on 100 runs under 1.5 s, no TensorFlow",
                 f"{seconds:.2f} s, TensorFlow {'imported' if tf else 'not imported'}",
                 seconds < TARGETS["command_seconds"] and not tf)
    second = _get(rows, "cache", "glyphs120_default", "second_load_seconds")
    if second is not None:
        first = _get(rows, "cache", "glyphs120_default", "first_build_seconds")
        process = _get(rows, "cache", "glyphs120_default", "second_load_process_seconds")
        detail = ", ".join(text for text in (f"first build {first:.1f} s" if first is not None else "",
                                             f"whole process {process:.2f} s" if process is not None else "") if text)
        line("default dataset: second build from the cache under 1 s",
             f"{second:.2f} s" + (f" ({detail})" if detail else ""), second < TARGETS["cache_seconds"])
    for c in configs[1:]:
        records, expected = _get(rows, "agreement", c, "records"), _get(rows, "agreement", c, "expected")
        if records is None:
            continue
        diffs = {m: _get(rows, "agreement", c, f"max_abs_diff_{m}") for m in COMPARED}
        worst = max(v for v in diffs.values() if v is not None and not math.isnan(v)) if records else math.nan
        text = (f"{records:.0f}/{expected:.0f} records; max abs diff " + ", ".join(f"{m} {v:.2g}" for m, v in diffs.items()))
        threads, base_threads = _get(rows, "wall", c, "threads_per_worker"), _get(rows, "wall", "a", "threads_per_worker")
        if threads != base_threads and worst != 0.0:
            text += (f" ({threads:.0f} TensorFlow thread(s) per process against (a)'s {base_threads:.0f}: "
                     f"CPU kernels split their sums by thread count)")
        line(f"per-epoch numbers of {c} equal (a)'s, same seed", text, records == expected and worst == 0.0)
    return out


def figure(rows: list[dict[str, Any]], path: Path) -> None:
    from matplotlib.figure import Figure

    configs = _configs(rows)
    fig = Figure(figsize=(11, 4.2), layout="constrained")
    left, right = fig.subplots(1, 2)
    walls = [_get(rows, "wall", c, "wall_seconds") for c in configs]
    colors = ["#777777", "#1f77b4", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]
    bars = left.bar([label(c).split(" (--")[0].replace(", ", ",\n") for c in configs], walls,
                    color=[colors[i % len(colors)] for i in range(len(configs))])
    for bar, c, wall in zip(bars, configs, walls):
        ratio = walls[0] / wall if configs[0] == "a" else 1.0
        left.annotate(f"{wall:.0f} s\n{ratio:.2f}x", (bar.get_x() + bar.get_width() / 2, wall), ha="center", va="bottom", fontsize=8)
    left.set_ylabel("wall time of the whole grid (s)")
    left.set_title("Wall time (lower is better)")
    left.tick_params(axis="x", labelsize=7)
    left.margins(y=0.2)
    for c in configs:
        points = sorted((int(r["batch_size"]), float(r["value"])) for r in rows
                        if (r["section"], r["config"], r["metric"]) == ("throughput", c, "samples_per_second"))
        if points:
            right.plot(*zip(*points), marker="o", label=label(c))
    right.set_xscale("log", base=2)
    batches = sorted({int(r["batch_size"]) for r in rows if r["section"] == "throughput"})
    if batches:
        right.set_xticks(batches, [str(b) for b in batches])
        right.minorticks_off()
    right.set_xlabel("batch size")
    right.set_ylabel("samples per second per process (epochs 2+)")
    right.set_title("Training throughput")
    right.legend(fontsize=7)
    fig.suptitle(f"{rows[0]['machine']} - {rows[0]['when']} ({rows[0]['mode']})", fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def write_outputs(rows: list[dict[str, Any]], epochs: list[dict[str, Any]], out: Path) -> dict[str, Path]:
    """bench.csv, bench_epochs.csv, bench.md and bench.png into `out`."""
    paths = {"csv": out / "bench.csv", "epochs": out / "bench_epochs.csv", "md": out / "bench.md", "png": out / "bench.png"}
    write_csv(rows, paths["csv"])
    write_csv(epochs, paths["epochs"], EPOCH_COLUMNS)
    paths["md"].write_text(markdown(rows), encoding="utf-8")
    figure(rows, paths["png"])
    return paths


# --- levers (`--levers`): small standalone experiments, each in a fresh process, harness code unedited

PROBE_DATA = {"samples_per_class": 15, "image_size": 32}  # the quick grid's data: 1,440 training images


def probe(settings: dict[str, Any]) -> dict[str, Any]:
    """Inside a fresh process: train the bench model as sweep/train.py does, with one lever changed.

    settings: batch, epochs, spe (steps_per_execution), jit (jit_compile), determinism (default true), feed ("tfdata": the
    harness's `sweep.data.batches`; "tfdata_plain": without prefetch; "numpy": arrays to fit),
    runs (runs of the same spec in this process), first_batch (fit one batch first, to time the first
    step), reuse (runs after the first reuse the first run's compiled model: fresh initial weights from
    a fresh build, optimizer slots zeroed, no new tracing). Returns timings from the process start and
    every per-epoch number.
    """
    import psutil

    born = psutil.Process().create_time()
    import keras
    import numpy as np
    import tensorflow as tf

    from sweep import data
    from sweep import model as model_module
    from sweep.config import DataConfig, ModelConfig
    from sweep.plan import derive_seed

    out: dict[str, Any] = {"import_tf": time.time() - born, "runs": []}
    batch, cfg = settings["batch"], DataConfig(**PROBE_DATA)
    cached = None
    for _ in range(settings.get("runs", 1)):
        run: dict[str, Any] = {"start": time.time() - born}
        keras.utils.set_random_seed(derive_seed(0, "init"))
        if settings.get("determinism", True):
            tf.config.experimental.enable_op_determinism()
        split = data.load_split(cfg)
        run["data_loaded"] = time.time() - born
        fresh = model_module.build_model(ModelConfig(), cfg.image_size, split.num_classes)
        if cached is None:
            model = fresh
            model.compile(optimizer=keras.optimizers.Adam(0.001), loss="sparse_categorical_crossentropy",
                          metrics=["accuracy"], jit_compile=settings.get("jit", False),
                          steps_per_execution=settings.get("spe", 1))
        else:  # reuse: the fresh model's initial weights into the compiled one, optimizer state zeroed
            model = cached
            model.set_weights(fresh.get_weights())
            for variable in model.optimizer.variables:
                if "learning_rate" not in variable.path:
                    variable.assign(np.zeros(variable.shape, variable.dtype))
        run["compiled"] = time.time() - born
        run["jit_compile"] = bool(model.jit_compile)  # what Keras uses, not what was asked
        epochs = []
        for epoch in range(1, settings.get("epochs", 2) + 1):
            order = data.epoch_order(split.y_train, True, 0, epoch)
            x, y = split.x_train[order], split.y_train[order]
            parts = [slice(0, batch), slice(batch, None)] if epoch == 1 and settings.get("first_batch") else [slice(None)]
            seconds, cpu_started = 0.0, time.process_time()
            for rows in parts:
                started = time.perf_counter()
                if settings.get("feed", "tfdata") == "numpy":
                    history = model.fit(x[rows], y[rows], batch_size=batch, initial_epoch=epoch - 1, epochs=epoch,
                                        shuffle=False, verbose=0)
                else:
                    ds = (data.batches(x[rows], y[rows], batch) if settings.get("feed", "tfdata") == "tfdata"
                          else tf.data.Dataset.from_tensor_slices((x[rows], y[rows])).batch(batch))
                    history = model.fit(ds, initial_epoch=epoch - 1, epochs=epoch, shuffle=False, verbose=0)
                seconds += time.perf_counter() - started
                if "first_step" not in run:
                    run["first_step"] = time.time() - born
            cpu_seconds = time.process_time() - cpu_started
            started = time.perf_counter()
            train_eval = model.evaluate(split.x_train_eval, split.y_train_eval, batch_size=512, verbose=0, return_dict=True)
            train_eval_seconds = time.perf_counter() - started
            started = time.perf_counter()
            val = model.evaluate(split.x_val, split.y_val, batch_size=512, verbose=0, return_dict=True)
            epochs.append({"epoch": epoch, "fit_seconds": seconds, "fit_cpu_seconds": cpu_seconds,
                           "train_eval_seconds": train_eval_seconds,
                           "val_seconds": time.perf_counter() - started,
                           "samples_per_second": len(y) / seconds, "train_acc": float(history.history["accuracy"][-1]),
                           "train_loss": float(history.history["loss"][-1]), "val_acc": float(val["accuracy"]),
                           "val_loss": float(val["loss"]), "train_eval_acc": float(train_eval["accuracy"])})
        run["epochs"] = epochs
        run["end"] = time.time() - born
        out["runs"].append(run)
        if settings.get("reuse"):
            cached = model
        else:
            keras.backend.clear_session()
    return out


def run_probe(settings: dict[str, Any], env: dict[str, str], threads: int) -> dict[str, Any]:
    env = {**env, "TF_NUM_INTRAOP_THREADS": str(threads), "OMP_NUM_THREADS": str(threads),
           "TF_NUM_INTEROP_THREADS": "1" if threads == 1 else "2",  # as sweep.devices.worker_environment
           **settings.get("env", {})}
    _, done = timed([sys.executable, str(Path(__file__).resolve()), "--probe", json.dumps(settings)], env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ref(batch: int, threads: str = "1 thread") -> str:
    return f"batch {batch}, {threads} (harness settings)"


LEVERS = [  # (lever, label, settings, threads (0 = all cores), reference label or None)
    *[("reference", _ref(b), {"batch": b}, 1, None) for b in (8, 32, 128)],
    *[("reference", _ref(b, "all cores"), {"batch": b}, 0, None) for b in (8, 128)],
    ("steps_per_execution", "batch 8, steps_per_execution 16", {"batch": 8, "spe": 16}, 1, _ref(8)),
    ("steps_per_execution", "batch 32, steps_per_execution 8", {"batch": 32, "spe": 8}, 1, _ref(32)),
    ("feed", "batch 8, numpy arrays to fit (--feed numpy)", {"batch": 8, "feed": "numpy"}, 1, _ref(8)),
    ("feed", "batch 8, tf.data without prefetch", {"batch": 8, "feed": "tfdata_plain"}, 1, _ref(8)),
    ("determinism", "batch 8, op determinism off", {"batch": 8, "determinism": False}, 1, _ref(8)),
    ("determinism", "batch 128, op determinism off", {"batch": 128, "determinism": False}, 1, _ref(128)),
    # Keras turns jit_compile=True into False while op determinism is on (trainer.model_supports_jit),
    # so XLA is measured with determinism off, against determinism off
    ("jit_compile", "batch 8, determinism off, jit_compile true", {"batch": 8, "determinism": False, "jit": True}, 1,
     "batch 8, op determinism off"),
    ("jit_compile", "batch 128, determinism off, jit_compile true", {"batch": 128, "determinism": False, "jit": True},
     1, "batch 128, op determinism off"),
    ("threads", "batch 8, 1 thread against all cores", {"batch": 8}, 1, _ref(8, "all cores")),
    ("threads", "batch 128, 1 thread against all cores", {"batch": 128}, 1, _ref(128, "all cores")),
    ("startup", "2 runs, a fresh model per run (harness)", {"batch": 32, "runs": 2, "first_batch": True}, 0, None),
    ("startup", "2 runs, the compiled model reused", {"batch": 32, "runs": 2, "first_batch": True, "reuse": True}, 0,
     "2 runs, a fresh model per run (harness)"),
]


def levers(env: dict[str, str], repeats: int, epochs: int = 2) -> list[dict[str, Any]]:
    """Run every LEVERS probe `repeats` times in alternating order; one row per probe, repeat and run."""
    rows = []
    for repeat in range(repeats):
        for lever, label, settings, threads, reference in LEVERS if repeat % 2 == 0 else LEVERS[::-1]:
            result = run_probe({"epochs": epochs, **settings}, env, threads or cores())
            for i, run in enumerate(result["runs"]):
                later = [e for e in run["epochs"] if e["epoch"] > 1] or run["epochs"]
                rows.append({"lever": lever, "label": label, "reference": reference or "", "repeat": repeat,
                             "run_in_process": i + 1, "batch": settings["batch"], "threads": threads or cores(),
                             "jit_compile": run["jit_compile"], "import_tf": result["import_tf"], "to_first_step": run["first_step"] - run["start"],
                             "run_seconds": run["end"] - run["start"],
                             "samples_per_second": statistics.median(e["samples_per_second"] for e in later),
                             "fit_seconds": statistics.median(e["fit_seconds"] for e in later),
                             "fit_cpu_seconds": statistics.median(e["fit_cpu_seconds"] for e in later),
                             # epochs 2+: epoch 1's first evaluation also traces the test function
                             "train_eval_seconds": statistics.median(e["train_eval_seconds"] for e in later),
                             "val_seconds": statistics.median(e["val_seconds"] for e in later),
                             "epoch1_train_eval_seconds": run["epochs"][0]["train_eval_seconds"],
                             "numbers": json.dumps([{k: e[k] for k in COMPARED} for e in run["epochs"]])})
            print(f"lever {lever}: {label}: {rows[-1]['samples_per_second']:.0f} samples/s, "
                  f"run {rows[-1]['run_seconds']:.1f} s", flush=True)
    return rows


def levers_markdown(rows: list[dict[str, Any]]) -> str:
    """Per probe: best over repeats, and its ratio to its reference probe; then evaluation cost and start-up."""
    best: dict[tuple[str, int], dict[str, Any]] = {}
    cpu: dict[tuple[str, int], float] = {}  # least CPU seconds per epoch over repeats
    for r in rows:
        key = (r["label"], r["run_in_process"])
        if key not in best or r["samples_per_second"] > best[key]["samples_per_second"]:
            best[key] = r
        cpu[key] = min(cpu.get(key, math.inf), float(r["fit_cpu_seconds"]))
    lines = [("Speed ratios: the setting's over its reference's (above 1 = faster), from wall time (samples/s, best "
             "of repeats) and from the process's CPU seconds per epoch (least over repeats; less sensitive to other "
             "load; meaningful for same-thread comparisons only)."), "",
             ("| lever | setting | samples/s (best of repeats) | wall speed ratio | CPU speed ratio | "
             "same numbers as reference |"), "|---|---|---|---|---|---|"]
    for lever, label, _, _, reference in LEVERS:
        if lever in ("reference", "startup"):
            continue
        r, ref = best[(label, 1)], best[(reference, 1)]
        lines.append(f"| {lever} | {label} | {r['samples_per_second']:.0f} (reference {ref['samples_per_second']:.0f}) | "
                     f"{r['samples_per_second'] / ref['samples_per_second']:.2f}x | "
                     f"{cpu[(reference, 1)] / cpu[(label, 1)]:.2f}x | "
                     f"{'yes' if r['numbers'] == ref['numbers'] else 'no'} |")
    lines += ["", ("| reference | fit s per epoch | train-subset evaluation s | validation s | "
                  "train-subset evaluation, share of the epoch |"), "|---|---|---|---|---|"]
    for label in [label for lever, label, *_ in LEVERS if lever == "reference"]:
        r = best[(label, 1)]
        total = r["fit_seconds"] + r["train_eval_seconds"] + r["val_seconds"]
        lines.append(f"| {label} | {r['fit_seconds']:.2f} | {r['train_eval_seconds']:.2f} | {r['val_seconds']:.2f} | "
                     f"{r['train_eval_seconds'] / total:.1%} |")
    lines += ["", ("| start-up probe | repeat | process start -> TensorFlow imported (s) | run | run start -> first step "
                  "done (s) | whole run (s) | same numbers as run 1 |"), "|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["lever"] == "startup":
            first = next(x for x in rows if (x["label"], x["repeat"], x["run_in_process"]) == (r["label"], r["repeat"], 1))
            lines.append(f"| {r['label']} | {r['repeat'] + 1} | {r['import_tf']:.1f} | {r['run_in_process']} | "
                         f"{r['to_first_step']:.2f} | {r['run_seconds']:.1f} | "
                         f"{'yes' if r['numbers'] == first['numbers'] else 'no'} |")
    return "\n".join(lines)


# --- the command


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smaller grid (4 runs), about 4 minutes on 2 cores")
    parser.add_argument("--grid", type=Path, default=None, help=f"the grid to train (default {GRID.relative_to(REPO)})")
    parser.add_argument("--out", type=Path, default=None, help="where to write (default results/bench, or results/bench/quick)")
    parser.add_argument("--repeats", type=int, default=1, help="repeats of each training configuration (alternating order; best kept)")
    parser.add_argument("--skip-commands", action="store_true", help="skip the plan/status/report and cache timings")
    parser.add_argument("--baseline-train-eval", action="store_true",
                        help="(a) also evaluates the harness's train subset every epoch (the same work as the harness)")
    parser.add_argument("--trials-per-gpu", type=int, nargs="*", default=[2, 4], metavar="K",
                        help="on a GPU machine: also time K runs sharing GPU 0, for each K (default 2 4)")
    parser.add_argument("--levers", action="store_true", help="instead: the lever experiments (docs/levers.md), "
                                                              "written to OUT/levers.csv")
    parser.add_argument("--probe", default=None, help=argparse.SUPPRESS)  # internal: one lever experiment, JSON settings
    args = parser.parse_args(argv)
    if args.probe:
        print(json.dumps(probe(json.loads(args.probe))))
        return 0
    if args.levers:
        return main_levers(args)
    out = args.out or REPO / "results" / "bench" / ("quick" if args.quick else "")
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    mode = "quick" if args.quick else "full"
    machine = machine_text()
    print(f"{machine}; load average {os.getloadavg()[0]:.2f} at start", flush=True)

    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        folder = Path(tmp)
        grid = args.grid or GRID
        if args.quick and args.grid is None:
            grid = folder / "bench_quick.yaml"
            grid.write_text(QUICK_GRID)
        env = clean_env(folder / "cache")
        warm_cache(grid, folder / "cache")

        from sweep.config import load_grid
        from sweep.plan import plan

        runs = plan(load_grid(grid))
        point = runs[0].point
        num_classes = point.data.classes or 120
        flops = train_flops_per_sample(point.data.image_size, num_classes, point.model.width)

        from sweep.devices import device_pool

        gpus = device_pool(None)  # CUDA_VISIBLE_DEVICES, else nvidia-smi; no TensorFlow
        measured: dict[int | str, float] = {}
        if gpus:  # every configuration trains on a GPU: the GPU's matmul is the peak
            measured["gpu"] = gpu_matmul_peak(env, gpus[0])
            print(f"matmul on GPU {gpus[0]}: {measured['gpu']:.1f} GFLOP/s", flush=True)
        else:
            for threads in sorted({1, cores()}):
                measured[threads] = matmul_peak(threads, env)
                print(f"matmul at {threads} thread(s): {measured[threads]:.1f} GFLOP/s", flush=True)
        peaks = effective_peaks(measured)

        trainings = [baseline_config(grid, folder, args.baseline_train_eval), harness_config("b", grid, folder, 1),
                     harness_config("c", grid, folder, None)]
        for k in (args.trials_per_gpu if gpus else []):  # several small runs packed on one GPU
            packed = harness_config(f"e{k}", grid, folder, None)
            packed.command += ["--devices", gpus[0], "--trials-per-gpu", str(k)]
            trainings.append(packed)
        for t in trainings:
            t.peak_key = "gpu" if gpus else None
        for repeat in range(args.repeats):
            for training in trainings if repeat % 2 == 0 else trainings[::-1]:
                run_training(training, env, folder)
                print(f"{label(training.config)}: {training.seconds[-1]:.1f} s "
                      f"({training.workers} x {training.threads})", flush=True)
            if repeat == 0 and not gpus and trainings[2].workers < cores():
                extra = harness_config("d", grid, folder, cores())
                trainings.append(extra)
                run_training(extra, env, folder)
                print(f"{label('d')}: {extra.seconds[-1]:.1f} s ({extra.workers} x {extra.threads})", flush=True)

        commands: dict[str, tuple[float, bool]] = {}
        cache: dict[str, float] = {}
        if not args.skip_commands:
            synthetic_grid, synthetic_results = synthetic_sweep(folder)
            commands = command_timings(synthetic_grid, synthetic_results, env)
            cache = cache_timings(env, folder / "cache_default")
        rows = summarize(trainings, peaks, flops, commands, cache, len(runs), mode, machine, when, measured)
        epochs = [row for t in trainings for row in t.epochs]
    paths = write_outputs(rows, epochs, out)
    print()
    print(paths["md"].read_text(), end="")
    print(f"\nwritten: {', '.join(str(p.relative_to(REPO) if p.is_relative_to(REPO) else p) for p in paths.values())}")
    return 0


def main_levers(args: argparse.Namespace) -> int:
    out = args.out or REPO / "results" / "bench"
    print(f"{machine_text()}; load average {os.getloadavg()[0]:.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="levers-") as tmp:
        env = clean_env(Path(tmp) / "cache")
        from sweep.config import DataConfig
        from sweep.data import raw_arrays

        raw_arrays(DataConfig(**PROBE_DATA), Path(tmp) / "cache")
        rows = levers(env, args.repeats)
    write_csv(rows, out / "levers.csv", tuple(rows[0]))
    text = f"Machine: {machine_text()}. Run {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}.\n\n" + levers_markdown(rows)
    (out / "levers.md").write_text(text + "\n", encoding="utf-8")
    print(text)
    print(f"written: {out / 'levers.csv'}, {out / 'levers.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
