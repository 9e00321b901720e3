"""Where a run's time goes: training steps, or the records between them.

    python -m benchmarks.costs.record_cost [experiments/article.yaml] [KEY=VALUE ...] [--out results/bench/records.md]
    python -m benchmarks.costs.record_cost experiments/article.yaml train.epochs=2 --against /tmp/old-checkout

With `--against CHECKOUT`, first the whole sweep (`sweep run`, each checkout's defaults unless `--flags`)
with this checkout's code and the other's, alternating, and their records compared
(benchmarks/costs/sweep_against.py, appended to results/bench/records_against.md); then the parts below.

Trains every run of the grid (with the overrides, e.g. `train.epochs=2 seeds=[0]` for a fraction of it)
alone, one after another in this process, as one worker with every core would (a fresh process with a
worker's environment; `--threads 1`: as each worker of the default sweep on a CPU has), and times each
part of each run at the trainer's calls on its compiled model: set-up (data and model), training
(`fit`), raw evaluation, BatchNorm recalibration (its statistics pass and its evaluations), the balanced
accuracy's predictions and the noise scale. A record is everything but set-up and training. Prints one
line per run and appends the grid's totals to `--out`.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import datetime
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from benchmarks.common import machine
from benchmarks.common.machine import REPO, commit, restart_as_worker
from benchmarks.costs import sweep_against
from sweep.cli.arguments import positive
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.train import devices

PARTS = ("set-up", "fit", "evaluate", "recalibrate", "predict", "noise scale")
RECORD_PARTS = PARTS[2:]
TIMED = {  # the engine's calls, and the part each one is
    "fit": "fit",
    "evaluate": "evaluate",
    "recalibrated": "recalibrate",
    "predicted": "predict",
    "noise_scale": "noise scale",
}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    checkouts = machine.checkouts(args, "sweep/__main__.py")
    if checkouts is None:
        return 2
    restart_as_worker("benchmarks.costs.record_cost", args.threads or devices.cpu_count())
    if args.against is not None:
        grid = Path(args.grid).resolve()
        row = sweep_against.compare(grid, args.overrides, args.flags.split(), checkouts, args.repeats)
        sweep_against.write(row, args.out.with_name("records_against.md"))
    from sweep.train.session import Session
    from sweep.train.trainer import Trainer

    specs = plan(load_grid(args.grid, args.overrides))
    session = Session()  # one worker's: each run reuses the last one's compiled model where it can
    totals: dict[str, float] = defaultdict(float)
    for spec in specs:
        seconds: dict[str, float] = defaultdict(float)
        started = time.perf_counter()
        trainer = Trainer.alone(spec, session)
        seconds["set-up"] = time.perf_counter() - started
        for name, part in TIMED.items():
            setattr(trainer.engine, name, _timed(getattr(trainer.engine, name), part, seconds))
        records = sum(1 for _ in trainer.epochs())
        whole = time.perf_counter() - started
        share = sum(seconds[p] for p in RECORD_PARTS) / whole
        print(f"{spec.run_id}: {whole:.1f} s, {records} records, records {share:.0%} ({_parts(seconds)})", flush=True)
        for part in PARTS:
            totals[part] += seconds[part]
        totals["whole"] += whole
    _write(args, len(specs), totals)
    return 0


def _timed(call: Callable[..., Any], part: str, seconds: dict[str, float]) -> Callable[..., Any]:
    def timed(*args: Any) -> Any:
        started = time.perf_counter()
        try:
            return call(*args)
        finally:
            seconds[part] += time.perf_counter() - started

    return timed


def _parts(seconds: dict[str, float]) -> str:
    return ", ".join(f"{part} {seconds[part]:.1f} s" for part in PARTS if seconds[part])


def _write(args: argparse.Namespace, runs: int, totals: dict[str, float]) -> None:
    header = (
        "# Where a run's time goes\n\n`python -m benchmarks.costs.record_cost GRID [KEY=VALUE ...]`: every run of the "
        "grid trained alone in one process with a worker's threads, each part timed at the trainer's calls "
        "on its compiled model (seconds summed over the runs). Records: evaluation, recalibration, "
        "predictions and the noise scale, everything but set-up and training.\n\n"
        f"| date | commit | cpu | grid | runs | whole s | {' s | '.join(PARTS)} s | records' share |\n"
        f"|{'---|' * (len(PARTS) + 7)}\n"
    )
    grid = " ".join([Path(args.grid).as_posix(), *args.overrides])
    share = sum(totals[p] for p in RECORD_PARTS) / totals["whole"]
    cells = " | ".join(f"{totals[p]:.1f}" for p in PARTS)
    row = (
        f"| {datetime.date.today()} | {commit(REPO)} | {devices.cpu_model()}, {devices.cpu_count()} cores"
        f"{_threads(args)} "
        f"| `{grid}` | {runs} | {totals['whole']:.1f} | {cells} | {share:.0%} |\n"
    )
    machine.append_table(args.out, header, row)
    print(f"records took {share:.0%} of {totals['whole']:.0f} s; {args.out}")


def _threads(args: argparse.Namespace) -> str:
    """The cpu cell's note where runs had fewer threads than cores (`--threads`)."""
    threads = args.threads or devices.cpu_count()
    return "" if threads == devices.cpu_count() else f", {threads} thread{'s' * (threads > 1)} per run"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.costs.record_cost", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("grid", nargs="?", default=str(REPO / "experiments" / "article.yaml"))
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE settings, as `sweep run` takes them")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "bench" / "records.md")
    parser.add_argument("--against", type=Path, default=None, help="another checkout's root: whole sweeps compared")
    parser.add_argument("--repeats", type=int, default=2, help="whole sweeps per checkout, alternating (default 2)")
    parser.add_argument("--flags", default="", help='`sweep run` flags for both checkouts, e.g. "--workers 1"')
    parser.add_argument(
        "--threads",
        type=positive,
        default=None,
        help="threads per run for the parts (default: every core, a worker alone; 1: as each of the default "
        "sweep's workers has on a CPU)",
    )
    return parser


if __name__ == "__main__":
    sys.exit(main())
