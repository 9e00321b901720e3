"""Whole sweeps of this checkout against another's (`python -m benchmarks.costs.record_cost GRID --against DIR`).

Each repeat runs `sweep run GRID [KEY=VALUE ...] [FLAGS]` once with each checkout's code, alternating
which goes first, each a fresh process from its own checkout's root (its `sweep` and its workers'),
with a clean environment and one warm dataset cache, into an empty results folder; the wall time is
the whole process's. Then the two checkouts' records are compared run by run and step by step: the
raw numbers (training-mode and inference-mode accuracies and losses, gaps, the learning rate) must be
the same bits; a recalibrated accuracy may move by its sampling error (`recal_shift`).

Runs are compared only where both trained at one thread count (runs.csv's `threads`): TensorFlow
splits its sums by thread count, so a checkout whose default starts a worker per core and one whose
default gives one worker every core compute other last digits. `--flags "--workers 1"` compares them
at one setting.
"""

from __future__ import annotations

import datetime
import math
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from benchmarks.common import machine
from sweep import vocab

RAW = (
    vocab.TRAIN_ACC,
    vocab.TRAIN_EVAL_ACC,
    vocab.VAL_ACC,
    vocab.TRAIN_LOSS,
    vocab.TRAIN_EVAL_LOSS,
    vocab.VAL_LOSS,
    vocab.GAP,
    vocab.EVAL_GAP,
    vocab.LR,
)
RECAL_ACCURACIES = (vocab.TRAIN_EVAL_ACC_RECAL, vocab.VAL_ACC_RECAL)  # each on as many images as val
KEYS = (vocab.RUN_ID, vocab.STEP)


@dataclass(frozen=True)
class Comparison:
    """How one checkout's records compare with the other's, over the runs both trained at one thread count."""

    runs: int  # runs compared
    skipped: int  # runs left out: trained at another thread count, or by one checkout only
    records: int
    raw_equal: int  # records whose every raw number is the same bits
    recal_shift: float  # the largest |change| of a recalibrated accuracy, in its binomial standard errors
    recal_changed: int  # recalibrated accuracies that changed at all


def compare(grid: Path, overrides: list[str], flags: list[str], checkouts: dict[str, Path], repeats: int) -> str:
    """Time the checkouts' sweeps alternately, compare their first repeat's records; one markdown row."""
    seconds: dict[str, list[float]] = {name: [] for name in checkouts}
    with tempfile.TemporaryDirectory(prefix="records-against-") as tmp:
        env = machine.clean_env(Path(tmp) / "cache")
        fraction = _fraction(grid, overrides, Path(tmp))
        _warm_cache(fraction, Path(tmp) / "cache")
        for repeat in range(repeats):
            for name, root in list(checkouts.items())[:: 1 if repeat % 2 == 0 else -1]:
                out = Path(tmp) / f"{name.replace(' ', '-')}-{repeat}"
                took = _sweep(root, fraction, flags, out, env)
                seconds[name].append(took)
                print(f"repeat {repeat}: {name}: {took:.1f} s", flush=True)
        this, other = (Path(tmp) / f"{name.replace(' ', '-')}-0" for name in checkouts)
        found = records_compared(this, other)
    best = {name: min(times) for name, times in seconds.items()}
    (this_name, this_root), (other_name, other_root) = checkouts.items()
    return (
        f"| {datetime.date.today()} | `{' '.join([grid.name, *overrides, *flags])}` | {repeats} "
        f"| {machine.commit(this_root)}: {best[this_name]:.1f} s "
        f"| {machine.commit(other_root)}: {best[other_name]:.1f} s "
        f"| {best[other_name] / best[this_name]:.2f}x | {found.runs} ({found.skipped} left out) "
        f"| {found.raw_equal}/{found.records} | {found.recal_changed}, at most {found.recal_shift:.2f} SE |\n"
    )


def _fraction(grid: Path, overrides: list[str], folder: Path) -> Path:
    """The grid file with the overrides written into it (a checkout from before `sweep run GRID KEY=VALUE`
    existed reads it too), under the grid's own file name.
    """
    import yaml

    from sweep.config.overrides import apply

    written = folder / grid.name
    written.write_text(yaml.safe_dump(apply(yaml.safe_load(grid.read_text(encoding="utf-8")), overrides)))
    return written


def _warm_cache(grid: Path, cache: Path) -> None:
    """Build the grid's datasets into the sweeps' cache once, so neither checkout's first sweep pays for it."""
    from sweep.config import load_grid
    from sweep.config.plan import plan
    from sweep.train import data

    for settings in {spec.point.data for spec in plan(load_grid(grid))}:
        data.load_split(settings, cache)


def _sweep(root: Path, grid: Path, flags: list[str], out: Path, env: dict[str, str]) -> float:
    """One whole `sweep run` with `root`'s code; its wall time."""
    command = [sys.executable, "-m", "sweep", "run", str(grid), "--results", str(out), *flags]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=root, env={**env, "PYTHONPATH": str(root)}, capture_output=True, text=True)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} in {root} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return took


def records_compared(this: Path, other: Path) -> Comparison:
    """Compare two results folders' records (epochs.csv), run by run and step by step."""
    runs = {
        name: pd.read_csv(folder / "runs.csv").set_index(vocab.RUN_ID) for name, folder in (("a", this), ("b", other))
    }
    both = runs["a"].index.intersection(runs["b"].index)
    same = [r for r in both if runs["a"].at[r, "threads"] == runs["b"].at[r, "threads"]]
    skipped = len(runs["a"].index.union(runs["b"].index)) - len(same)
    a, b = (pd.read_csv(folder / "epochs.csv") for folder in (this, other))
    paired = a[a[vocab.RUN_ID].isin(same)].merge(b, on=list(KEYS), suffixes=("", "_against"), validate="one_to_one")
    raw = [c for c in RAW if c in paired]
    equal = (paired[raw].to_numpy() == paired[[f"{c}_against" for c in raw]].to_numpy()).all(axis=1)
    shifts = [0.0]
    changed = 0
    for column in RECAL_ACCURACIES:
        if column not in paired:
            continue
        images = paired[vocab.RUN_ID].map(runs["a"]["val_samples"]).to_numpy(float)
        moved = (paired[column] - paired[f"{column}_against"]).abs().to_numpy(float)
        changed += int((moved > 0).sum())
        shifts += [m / standard_error(p, n) for m, p, n in zip(moved, paired[column], images, strict=True) if m > 0]
    return Comparison(len(same), skipped, len(paired), int(equal.sum()), max(shifts), changed)


def standard_error(accuracy: float, images: float) -> float:
    """The binomial standard error of an accuracy read on `images` images (at least one image's worth)."""
    return max(math.sqrt(accuracy * (1.0 - accuracy) / images), 1.0 / images)


HEADER = (
    "# Whole sweeps against another checkout\n\n"
    "`python -m benchmarks.costs.record_cost GRID [KEY=VALUE ...] --against CHECKOUT [--flags FLAGS] [--repeats N]`: "
    "`sweep run` of the grid with each checkout's code, alternating, each a whole process into an empty "
    "folder (best of the repeats), then their records compared run by run and step by step, over the runs "
    "both trained at one thread count: raw numbers bit for bit; each recalibrated accuracy that changed, "
    "in binomial standard errors sqrt(p(1-p)/n) of its n images (benchmarks/costs/sweep_against.py).\n\n"
    "| date | grid | repeats | this checkout | against | speed-up | runs compared | raw records equal "
    "| recalibrated accuracies changed |\n|---|---|---|---|---|---|---|---|---|\n"
)


def write(row: str, out: Path) -> None:
    """Append the row to `out`, its header first if new."""
    machine.append_table(out, HEADER, row)
    print(HEADER.splitlines()[-2] + "\n" + row, end="")
