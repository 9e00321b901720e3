"""Shared fixtures: tiny real configs, a real journal store in tmp_path, a sweep run in this process,
the CLI as a subprocess (for tests of the process boundary)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True, scope="session")
def _isolated_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Datasets render into a per-session cache, never the user's ~/.cache."""
    os.environ["BATCHSWEEP_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


@pytest.fixture(autouse=True, scope="session")
def tf_replicas() -> None:
    """Split the CPU into 2 logical devices before the first TensorFlow use in this process.

    Logical devices are fixed once TensorFlow initialises, so this runs first for every session.
    """
    from sweep import devices

    devices.configure_replicas(2)


def write_grid(folder: Path, text: str, name: str = "grid.yaml") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def run_cli(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`python -m sweep ARGS` in a fresh process, as a user would run it."""
    return subprocess.run(
        [sys.executable, "-m", "sweep", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True, timeout=timeout
    )


def cli_env(drop: Iterable[str] = (), **extra: str) -> dict[str, str]:
    """This process's environment without the names in `drop`, the repository importable, plus `extra`."""
    dropped = set(drop)
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, "PYTHONPATH": str(REPO), **extra}


def start_cli(started: list[subprocess.Popen], *args: str, cwd: Path, drop: Iterable[str] = (), **env: str):
    """`python -m sweep ARGS` started in the background (output merged, as text), recorded in `started`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "sweep", *args],
        cwd=cwd,
        env=cli_env(drop, **env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    started.append(proc)
    return proc


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """Processes a test starts; afterwards each one and every process it started are killed by pid."""
    procs: list[subprocess.Popen] = []
    yield procs
    for proc in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            for child in psutil.Process(proc.pid).children(recursive=True):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(child.pid, signal.SIGKILL)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        proc.wait()


@dataclass
class Lines:
    """What a sweep said: progress and results (`out`), problems (`err`)."""

    out: list[str] = field(default_factory=list)
    err: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.out + self.err)


def sweep_here(grid: Path, report: bool = False, **options):
    """`sweep run GRID` in this process (no worker processes, no second TensorFlow): (Outcome, Lines).
    Results go to <grid's folder>/results/<name> unless `results=` says otherwise."""
    from sweep import orchestrate
    from sweep.config import load_grid

    parsed = load_grid(grid)
    options.setdefault("results", grid.parent / "results" / parsed.name)
    lines = Lines()
    console = orchestrate.Console(say=lines.out.append, warn=lines.err.append)
    outcome = orchestrate.run_sweep(parsed, orchestrate.Options(in_process=True, report=report, **options), console)
    return outcome, lines


TINY_GRID = """\
    name: tiny
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 2, batch_size: 8}
    grid:
      train.batch_size: [4, 8]
"""
