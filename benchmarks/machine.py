"""The machine a benchmark runs on, and how it runs a timed process there.

Every timed process starts fresh, in the repository's root, with a clean environment:
no thread or store overrides from the caller's shell, and a private dataset cache.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from sweep import devices

REPO = Path(__file__).resolve().parents[1]
# Settings of the caller's shell that would change what a timed process measures.
OVERRIDES = (
    "BATCHSWEEP_THREADS",
    "BATCHSWEEP_STORAGE",
    "TF_NUM_INTRAOP_THREADS",
    "TF_NUM_INTEROP_THREADS",
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
)


@dataclass(frozen=True)
class Finished:
    """A timed process that exited 0."""

    seconds: float
    stdout: str
    stderr: str


def cores() -> int:
    return devices.cpu_count()


def load_average() -> float:
    """The last minute's load average: how busy the machine was when a benchmark started."""
    return os.getloadavg()[0]


def describe() -> str:
    """One line: cores, CPU model, system, Python and TensorFlow versions."""
    return (
        f"{cores()} cores ({devices.cpu_model()}), {platform.system()} {platform.machine()}, "
        f"Python {platform.python_version()}, TensorFlow {_tensorflow_version()}"
    )


def _tensorflow_version() -> str:
    for package in ("tensorflow-cpu", "tensorflow"):
        try:
            return version(package)
        except PackageNotFoundError:
            continue
    return "not installed"


def clean_env(cache: Path) -> dict[str, str]:
    """The environment of every timed process: no thread or store overrides, a private dataset cache."""
    env = {k: v for k, v in os.environ.items() if k not in OVERRIDES}
    env["BATCHSWEEP_CACHE"] = str(cache)
    env["TF_CPP_MIN_LOG_LEVEL"] = "2"
    # this checkout's `sweep`, also in the processes a timed process starts (workers), wherever they start
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def timed(command: list[str], env: dict[str, str]) -> Finished:
    """Run `command` from the repository's root; its wall time from start to exit."""
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        )
    return Finished(seconds, done.stdout, done.stderr)


def commit(root: Path) -> str:
    """A checkout's commit, short; "unknown" outside git."""
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def python_module(module: str, *args: str) -> list[str]:
    """The command that runs `python -m module args` with this interpreter."""
    return [sys.executable, "-m", module, *args]


def probe(name: str, args: list[str], env: dict[str, str]) -> tuple[Finished, dict[str, Any]]:
    """Run one measurement of benchmarks/probes.py in a fresh process; its JSON result (last line)."""
    finished = timed(python_module("benchmarks.probes", name, *args), env)
    return finished, json.loads(finished.stdout.strip().splitlines()[-1])
