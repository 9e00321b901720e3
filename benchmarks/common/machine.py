"""The machine a benchmark runs on, and how it runs a timed process there.

Every timed process starts fresh, in the repository's root, with a clean environment:
no thread or store overrides from the caller's shell, and a private dataset cache.
"""

from __future__ import annotations

import argparse
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

from sweep.train import devices

REPO = Path(__file__).resolve().parents[2]
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


THIS = "this checkout"  # the code a checkout benchmark times first; "against": the other checkout's


def checkout_arguments(parser: argparse.ArgumentParser, repeats: str) -> argparse.ArgumentParser:
    """--repeats, --against and --out of a benchmark that times this checkout against another."""
    parser.add_argument("--repeats", type=int, default=5, help=f"{repeats} per checkout (default 5)")
    parser.add_argument("--against", type=Path, default=None, help="another checkout's root, timed alternately")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "bench", help="where to write")
    return parser


def checkouts(args: argparse.Namespace, needs: str) -> dict[str, Path] | None:
    """{THIS: this checkout, "against": --against's}; None, with the reason on stderr (exit 2), for
    --repeats below 1 or an --against without the file `needs` (a checkout's root has it).
    """
    if args.repeats < 1:
        print(f"error: --repeats must be at least 1, not {args.repeats}", file=sys.stderr)
        return None
    if args.against is not None and not (args.against / needs).is_file():
        print(f"error: --against {args.against}: no {needs} there (give a checkout's root)", file=sys.stderr)
        return None
    return {THIS: REPO, **({"against": args.against.resolve()} if args.against else {})}


def commit(root: Path) -> str:
    """A checkout's commit, short; "unknown" outside git."""
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip() or "unknown"


def append_table(out: Path, header: str, rows: str) -> None:
    """Append `rows` (Markdown table lines, each ending in a newline) to `out`, written with `header`
    (its title, words and the table's head) first where it is new: a benchmark's record of every run.
    """
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(header, encoding="utf-8")
    with out.open("a", encoding="utf-8") as table:
        table.write(rows)


def restart_as_worker(module: str, threads: int) -> None:
    """Go on in a fresh process of `python -m module` with this process's arguments and a worker's
    environment at this thread count, unless this process has it already. TensorFlow's threads and the
    BLAS's (numpy's, which sums the noise scale) are fixed when they start, so they cannot be set later.
    """
    env = devices.worker_environment(dict(os.environ), threads=threads)
    if all(os.environ.get(name) == env[name] for name in ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS")):
        return
    # `-m module` finds this checkout's code wherever the first process started (by its path, in any folder)
    env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    sys.stdout.flush()
    os.execve(sys.executable, [sys.executable, "-m", module, *sys.argv[1:]], env)


def python_module(module: str, *args: str) -> list[str]:
    """The command that runs `python -m module args` with this interpreter."""
    return [sys.executable, "-m", module, *args]


def probe(name: str, args: list[str], env: dict[str, str]) -> tuple[Finished, dict[str, Any]]:
    """Run one measurement of benchmarks/common/probes.py in a fresh process; its JSON result (last line)."""
    finished = timed(python_module("benchmarks.common.probes", name, *args), env)
    return finished, json.loads(finished.stdout.strip().splitlines()[-1])
