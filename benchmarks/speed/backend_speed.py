"""The same sweep on Keras's TensorFlow and JAX backends: wall time of each, in one run on one machine.

    python -m benchmarks.speed.backend_speed                     # experiments/article.yaml, 1 repeat
    python -m benchmarks.speed.backend_speed --grid experiments/smoke.yaml --repeats 3 --out /tmp/backends

Each repeat runs `KERAS_BACKEND=<backend> python -m sweep run GRID --workers 1` as a fresh process
into an empty results folder, the backends in alternating order across repeats (tensorflow first in
even repeats), with the load average before each. The table gives each backend's median whole-process
seconds, the median of its runs' own seconds (runs.csv `duration_seconds`, summed over the grid: the
training without the process's start-up) and the ratio JAX / TensorFlow. Outputs backends.md and
backends.csv in --out (default results/bench). Timings are a benchmark, not a test.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import csv
import statistics
import tempfile
import time
from dataclasses import asdict, dataclass

from benchmarks.common import machine

BACKENDS = ("tensorflow", "jax")
ARTICLE = machine.REPO / "experiments" / "article.yaml"


@dataclass(frozen=True)
class Timing:
    backend: str
    repeat: int
    load_average: float
    process_seconds: float
    run_seconds: float  # the runs' duration_seconds summed
    runs_done: int


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.speed.backend_speed",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--grid", type=Path, default=ARTICLE, help="the grid file (default experiments/article.yaml)")
    parser.add_argument("--repeats", type=int, default=1, help="alternating repeats of each backend (default 1)")
    parser.add_argument("--out", type=Path, default=machine.REPO / "results" / "bench", help="where to write")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.repeats < 1:
        print(f"error: --repeats must be at least 1, not {args.repeats}", file=sys.stderr)
        return 2
    if not args.grid.is_file():
        print(f"error: --grid {args.grid}: no such file", file=sys.stderr)
        return 2
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"{machine.describe()}; load average {machine.load_average():.2f} at start", flush=True)
    with tempfile.TemporaryDirectory(prefix="backends-") as tmp:
        timings = [timing for repeat in range(args.repeats) for timing in _repeat(args.grid, Path(tmp), repeat)]
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "backends.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(asdict(timings[0])))
        writer.writeheader()
        writer.writerows(asdict(t) for t in timings)
    text = markdown(timings, args.grid, started)
    (args.out / "backends.md").write_text(text, encoding="utf-8")
    print(text, end="")
    return 0


def _repeat(grid: Path, tmp: Path, repeat: int) -> list[Timing]:
    order = BACKENDS if repeat % 2 == 0 else BACKENDS[::-1]
    return [_timed(grid, tmp, backend, repeat) for backend in order]


def _timed(grid: Path, tmp: Path, backend: str, repeat: int) -> Timing:
    results = tmp / f"{backend}-{repeat}"
    env = machine.clean_env(tmp / f"cache-{backend}-{repeat}") | {"KERAS_BACKEND": backend}
    load = machine.load_average()
    print(f"repeat {repeat + 1}: {backend} ...", flush=True)
    finished = machine.timed(
        machine.python_module("sweep", "run", str(grid.resolve()), "--workers", "1", "--results", str(results)), env
    )
    with (results / "runs.csv").open(encoding="utf-8") as f:
        runs = [row for row in csv.DictReader(f) if row["status"] == "done"]
    trained_on = {row["backend"] for row in runs}
    if trained_on != {backend}:  # a timing is only worth its label: KERAS_BACKEND must have reached the workers
        raise RuntimeError(f"{results}: asked for {backend}, the runs trained on {sorted(trained_on)}")
    timing = Timing(backend, repeat, load, finished.seconds, sum(float(r["duration_seconds"]) for r in runs), len(runs))
    print(f"  {timing.process_seconds:.1f} s, {timing.runs_done} runs done", flush=True)
    return timing


def markdown(timings: list[Timing], grid: Path, started: str) -> str:
    def median(backend: str, field: str) -> float:
        return statistics.median(getattr(t, field) for t in timings if t.backend == backend)

    rows = [
        f"| {field.replace('_', ' ')} | {median('tensorflow', field):.1f} | {median('jax', field):.1f} | "
        f"{median('jax', field) / median('tensorflow', field):.2f} |"
        for field in ("process_seconds", "run_seconds")
    ]
    repeats = max(t.repeat for t in timings) + 1
    loads = ", ".join(f"{t.load_average:.1f}" for t in timings)
    return "\n".join(
        [
            "# TensorFlow and JAX on the same grid",
            "",
            f"`python -m benchmarks.speed.backend_speed --grid {_shown(grid)} --repeats {repeats}`, {started}; "
            f"{machine.describe()}. Medians of {repeats} repeat(s), backends alternating; "
            f"{timings[0].runs_done} runs per backend; load average before each: {loads}.",
            "",
            "| seconds | tensorflow | jax | jax / tensorflow |",
            "|---|---|---|---|",
            *rows,
            "",
        ]
    )


def _shown(grid: Path) -> str:
    path = grid.resolve()
    return str(path.relative_to(machine.REPO)) if path.is_relative_to(machine.REPO) else str(path)


if __name__ == "__main__":
    raise SystemExit(main())
