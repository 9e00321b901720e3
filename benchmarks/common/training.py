"""The harness against the plain Keras loop: each training configuration timed as a whole process
from an empty results folder, with its per-epoch records.

  (a) `python -m benchmarks.speed.keras_baseline GRID`: the plain Keras loop;
  (b) `python -m sweep run GRID --workers 1`;
  (c) `python -m sweep run GRID` with the CLI's default number of workers;
  (d) `python -m sweep run GRID --workers <cores>`, when the default is fewer;
  (eK) `python -m sweep run GRID --devices G --trials-per-gpu K`: K runs sharing one GPU.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.common import machine

EPOCH_COLUMNS = (
    "config",
    "run_id",
    "seed",
    "batch_size",
    "epoch",
    "step",
    "train_acc",
    "train_loss",
    "val_acc",
    "val_loss",
    "epoch_seconds",
    "samples_per_second",
)
BASELINE_EPOCHS = "baseline_epochs.csv"  # what (a) writes
LABELS = {
    "a": "(a) plain Keras loop",
    "b": "(b) harness, 1 worker",
    "c": "(c) harness, default workers",
    "d": "(d) harness, one worker per core",
}


def label(config: str) -> str:
    """A configuration's name in tables; eK = K runs packed on one GPU (--trials-per-gpu K)."""
    return LABELS.get(config) or f"(e) harness, {config[1:]} runs share GPU 0 (--trials-per-gpu {config[1:]})"


@dataclass(frozen=True)
class Configuration:
    """One way of training the grid, as the command that does it."""

    config: str  # a, b, c, d, eK
    command: tuple[str, ...]
    workers: int | None = None  # as asked for; None: the CLI's default, read from what `run` prints
    on_gpu: bool = False  # trains on GPU 0: its FLOP/s share is read against the GPU's peak


@dataclass(frozen=True)
class Attempt:
    """One timed repeat of a configuration."""

    seconds: float
    workers: int  # training processes
    threads: int  # TensorFlow intra-op threads per training process
    epochs: tuple[dict[str, Any], ...]  # EPOCH_COLUMNS
    run_seconds: tuple[float, ...]  # per run
    workers_phase_seconds: float | None = None  # harness only: its workers' phase, whole seconds


@dataclass(frozen=True)
class Trained:
    """A configuration and its repeats; its numbers are those of its fastest repeat."""

    configuration: Configuration
    attempts: tuple[Attempt, ...] = ()

    @property
    def config(self) -> str:
        return self.configuration.config

    @property
    def best(self) -> Attempt:
        return min(self.attempts, key=lambda attempt: attempt.seconds)

    def adding(self, attempt: Attempt) -> Trained:
        return Trained(self.configuration, (*self.attempts, attempt))


def results_folder(folder: Path, config: str) -> Path:
    """Where a harness configuration writes its results."""
    return folder / f"results_{config}"


def baseline(grid: Path, folder: Path, train_eval: bool = False) -> Configuration:
    """(a): the plain Keras loop; with `train_eval`, it also evaluates the harness's train subset."""
    command = machine.python_module(
        "benchmarks.speed.keras_baseline", str(grid), "--out", str(folder / BASELINE_EPOCHS)
    )
    return Configuration("a", (*command, *(["--train-eval"] if train_eval else [])))


def harness(
    config: str, grid: Path, folder: Path, workers: int | None = None, gpu: str | None = None, trials_per_gpu: int = 1
) -> Configuration:
    """(b)-(e): `python -m sweep run` with `workers` (None: the CLI's default), or packed on one GPU."""
    command = machine.python_module("sweep", "run", str(grid), "--results", str(results_folder(folder, config)))
    if workers is not None:
        command += ["--workers", str(workers)]
    if gpu is not None:
        command += ["--devices", gpu, "--trials-per-gpu", str(trials_per_gpu)]
    return Configuration(config, tuple(command), workers, on_gpu=gpu is not None)


def time_once(configuration: Configuration, env: dict[str, str], folder: Path) -> Attempt:
    """Train from an empty results folder; read what the configuration recorded."""
    shutil.rmtree(results_folder(folder, configuration.config), ignore_errors=True)
    finished = machine.timed(list(configuration.command), env)
    workers = _workers(configuration, finished.stdout)
    # `run` prints "trained N run(s) in S s": its workers' phase; the rest is set-up, export and report
    trained = re.search(r"trained \d+ run\(s\) in (\d+) s", finished.stdout)
    config = configuration.config
    return Attempt(
        finished.seconds,
        workers,
        max(1, machine.cores() // workers),
        tuple(read_epochs(config, folder)),
        tuple(read_run_seconds(config, folder)),
        float(trained.group(1)) if trained else None,
    )


def _workers(configuration: Configuration, stdout: str) -> int:
    """Training processes: 1 for the loop; for the harness, what `run` says it started."""
    started = re.search(r"starting (\d+) worker", stdout)
    if configuration.config == "a":
        return 1
    return int(started.group(1)) if started else configuration.workers or 1


def read_epochs(config: str, folder: Path) -> list[dict[str, Any]]:
    """Per-epoch records of a configuration, in EPOCH_COLUMNS."""
    import pandas as pd

    if config == "a":
        table = pd.read_csv(folder / BASELINE_EPOCHS)
    else:
        table = pd.read_csv(results_folder(folder, config) / "epochs.csv")
        table = table.rename(columns={"train.batch_size": "batch_size"})
    table = table.assign(config=config)
    return table[list(EPOCH_COLUMNS)].to_dict("records")


def read_run_seconds(config: str, folder: Path) -> list[float]:
    """Seconds per run: the baseline's own (seeding to the last epoch's validation); the harness's
    trial duration in the store (claimed to finished: data, model, epochs, evaluations, records).
    """
    import pandas as pd

    if config == "a":
        table = pd.read_csv(folder / BASELINE_EPOCHS)
        return [float(v) for v in table.groupby("run_id")["run_seconds"].first()] if "run_seconds" in table else []
    table = pd.read_csv(results_folder(folder, config) / "runs.csv")
    return [float(v) for v in table["duration_seconds"].dropna()] if "duration_seconds" in table else []


def warm_cache(grid: Path, cache: Path) -> None:
    """Render the grid's datasets once, so no timed configuration pays for it."""
    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.train.data import raw_arrays

    for data_cfg in {spec.point.data for spec in plan(load_grid(grid))}:
        raw_arrays(data_cfg, cache)


def time_all(
    configurations: list[Configuration],
    repeats: int,
    env: dict[str, str],
    folder: Path,
    one_per_core: Configuration | None = None,
) -> list[Trained]:
    """Every configuration `repeats` times in alternating order (so a change in the machine's load
    touches all alike). `one_per_core` joins after the first round if the default used fewer workers.
    """
    trained = [Trained(c) for c in configurations]
    for repeat in range(repeats):
        order = range(len(trained)) if repeat % 2 == 0 else reversed(range(len(trained)))
        for i in order:
            trained[i] = _time_and_print(trained[i], env, folder)
        default = next((t for t in trained if t.config == "c"), None)
        if repeat == 0 and one_per_core and default and default.best.workers < machine.cores():
            trained.append(_time_and_print(Trained(one_per_core), env, folder))
    return trained


def _time_and_print(trained: Trained, env: dict[str, str], folder: Path) -> Trained:
    attempt = time_once(trained.configuration, env, folder)
    print(f"{label(trained.config)}: {attempt.seconds:.1f} s ({attempt.workers} x {attempt.threads})", flush=True)
    return trained.adding(attempt)
