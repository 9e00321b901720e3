"""Do committed results reproduce with this checkout? Re-train a sample of a results folder's runs and
compare every record, bit for bit.

    python -m benchmarks.tools.reproduce results/map_c1 [--grid experiments/map_c1.yaml] [--runs 6]
        [--out results/bench/reproduce.md]

The folder's grid file (its `grid.yaml`, else `experiments/<folder name>.yaml`, else `--grid`) is planned
again at the folder's seeds (`--until-decided` adds seeds): every committed run id must still be planned
(an id that changed would orphan the committed runs). Then `--runs` of its done grid runs, spread over
its settings, are trained again in this process, each alone (a packed run records what it records alone),
and every field of every record is compared with `epochs.csv` as written (timings aside). Float results
are the same bits only on the CPU model and at the thread count that wrote them (docs/levers.md), so only
runs written by this machine's CPU model are re-trained, at their thread count; the others are counted as
not comparable here. Prints one line per run and appends a row to `--out`.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import datetime
from typing import Any

import pandas as pd

from benchmarks.common.machine import REPO, append_table, commit, restart_as_worker
from sweep import vocab
from sweep.config import load_grid
from sweep.config.plan import RunSpec, plan
from sweep.train import devices
from sweep.vocab import RunStatus

TIMINGS = {vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    folder = Path(args.folder)
    runs = pd.read_csv(folder / vocab.RUNS_CSV)
    epochs = pd.read_csv(folder / vocab.EPOCHS_CSV, dtype=str, keep_default_na=False)  # parsed exactly below
    grid = _grid_file(folder, args.grid)
    seeds = sorted(int(seed) for seed in runs[vocab.SEED].dropna().unique())  # `--until-decided` adds seeds
    planned = {spec.run_id: spec for spec in plan(load_grid(grid, [f"seeds={seeds}"]))}
    done = runs[
        (runs[vocab.STATUS] == RunStatus.DONE) & (runs.get("role", pd.Series("grid", index=runs.index)) == "grid")
    ]
    missing = sorted(set(done[vocab.RUN_ID]) - set(planned))
    here = done[done["cpu"] == devices.cpu_model()]
    chosen = _spread(here, args.runs)
    if len(chosen):
        threads = int(chosen["threads"].iloc[0])
        chosen = chosen[chosen["threads"] == threads]
        restart_as_worker("benchmarks.tools.reproduce", threads)  # as the worker that wrote the runs
    print(f"{folder}: {len(done)} done grid runs, {len(missing)} no longer planned, {len(here)} from this CPU model")
    from sweep.train.session import Session

    session = Session()  # one worker's, as the runs were trained
    outcomes = [
        _compare(planned[run_id], epochs[epochs[vocab.RUN_ID] == run_id], session) for run_id in chosen[vocab.RUN_ID]
    ]
    for run_id, (records, unequal) in zip(chosen[vocab.RUN_ID], outcomes, strict=True):
        print(f"  {run_id}: {records} records, {'every field equal' if not unequal else 'DIFFERS: ' + unequal}")
    _write(args.out, folder, grid, done, missing, here, outcomes)
    return 0 if not missing and all(not unequal for _, unequal in outcomes) else 1


def _grid_file(folder: Path, given: str | None) -> Path:
    for candidate in (
        Path(given) if given else None,
        folder / "grid.yaml",
        REPO / "experiments" / f"{folder.name}.yaml",
    ):
        if candidate is not None and candidate.is_file():
            return candidate
    raise SystemExit(f"error: no grid file for {folder}; give it with --grid")


def _spread(rows: pd.DataFrame, count: int) -> pd.DataFrame:
    """`count` runs drawn at random (seed 0, so a rerun draws the same), in the folder's order."""
    return rows if len(rows) <= count else rows.sample(count, random_state=0).sort_index()


def _compare(spec: RunSpec, committed: pd.DataFrame, session: Any) -> tuple[int, str]:
    """Train the run again alone in `session`; (records compared, the first difference in words or '')."""
    from sweep.train.trainer import Trainer

    again = [record.to_dict() for record in Trainer.alone(spec, session).epochs()]
    rows = sorted(committed.to_dict("records"), key=lambda row: float(row[vocab.EPOCH]))
    if len(rows) != len(again):
        return len(again), f"{len(again)} records against {len(rows)} committed"
    for row, record in zip(rows, again, strict=True):
        for name, value in record.items():
            if name in TIMINGS:
                continue
            if not _same(row.get(name), value):
                return len(again), f"{name} at epoch {record[vocab.EPOCH]}: {value!r} against {row.get(name)!r}"
    return len(again), ""


def _same(committed: str | None, value: Any) -> bool:
    """A committed CSV cell (Python's shortest repr of a float, or empty) against a recorded value."""
    if value is None:
        return not committed
    if isinstance(value, float) and value != value:
        return committed is not None and committed.lower() == "nan"
    return committed is not None and committed != "" and float(committed) == float(value)


def _write(
    out: Path,
    folder: Path,
    grid: Path,
    done: pd.DataFrame,
    missing: list[str],
    here: pd.DataFrame,
    outcomes: list[tuple[int, str]],
) -> None:
    header = (
        "| date | commit | folder | grid | done grid runs | ids no longer planned | from this CPU model "
        "| re-trained | records compared | runs with every field equal |\n|---|---|---|---|---|---|---|---|---|---|\n"
    )
    title = (
        "# Committed results re-trained with the code\n\n"
        "`python -m benchmarks.tools.reproduce FOLDER --runs N`: every committed run id still planned, and a "
        "sample of the runs written by this machine's CPU model re-trained alone and compared record by "
        "record, every field but the timings, bit for bit.\n\n"
    )
    equal = sum(not unequal for _, unequal in outcomes)
    row = (
        f"| {datetime.date.today()} | {commit(REPO)} | {folder.as_posix()} | {grid.relative_to(REPO).as_posix()} "
        f"| {len(done)} | {len(missing)} | {len(here)} ({devices.cpu_model()}) | {len(outcomes)} "
        f"| {sum(n for n, _ in outcomes)} | {equal} of {len(outcomes)} |\n"
    )
    append_table(out, title + header, row)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.tools.reproduce", description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", help="a committed results folder, e.g. results/map_c1")
    parser.add_argument("--grid", help="its grid file, where the folder has no grid.yaml and none is named after it")
    parser.add_argument("--runs", type=int, default=6, help="runs to re-train (default 6)")
    parser.add_argument("--out", type=Path, default=REPO / "results" / "bench" / "reproduce.md")
    return parser


if __name__ == "__main__":
    sys.exit(main())
