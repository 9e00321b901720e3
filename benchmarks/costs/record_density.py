"""How dense records must be: a finished sweep's readings rebuilt from fewer of its records.

    python -m benchmarks.costs.record_density results/article --every 300 600    # seconds; no training

Records inside epochs (`train.eval_every_steps`) are what a sweep's equal-fit and equal-time
readings and its steps to target interpolate between; at `article.yaml`'s batch 8 they cost about
twice the training between them (docs/levers.md). This drops, in a copy of the results folder, every
record inside an epoch whose step is not a multiple of `--every` (epoch ends always stay), rebuilds
the report from the copy and from the folder as it is with this checkout's code (`sweep report`,
no TensorFlow), and says how far each reading moved: its estimate's shift as a share of its
interval's half-width, and the checks whose decision (holds, fails, undecided, ...) changed. Steps
to target are compared the same way. Records at fewer steps are honest only where nothing moves
by more than a small part of its interval. Appends a table to `--out`.
"""

from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by its path: the checkout's root first on sys.path, not this file's folder
    sys.path[0] = str(Path(__file__).resolve().parents[2])

import argparse
import datetime
import shutil
import tempfile
from dataclasses import dataclass

import pandas as pd

from benchmarks.common.machine import REPO, append_table, commit
from sweep import vocab
from sweep.cli.arguments import positive
from sweep.report import build

EVERY_KEY = "train.eval_every_steps"


@dataclass(frozen=True)
class Moved:
    """How one sparser record schedule changed a sweep's readings."""

    every: int
    records: int  # records kept
    of: int  # records in the sweep
    readings: int  # readings with an interval
    shifted: int  # readings whose estimate changed
    lost: int  # readings the fewer records cannot make (no record at or around their point)
    largest: float  # largest shift, as a share of the reading's interval half-width
    largest_at: str  # where it was: "C1 equal time raw: gap at batch 8, epoch 2"
    decisions: int  # checks whose decision changed
    target_largest: float  # steps to target: largest shift of the mean steps, share of the half-width


def thinned(epochs: pd.DataFrame, every: int) -> pd.DataFrame:
    """The records at epoch ends, and those inside epochs at a multiple of `every` steps."""
    at_end = epochs[vocab.EPOCH] % 1 == 0
    return epochs[at_end | (epochs[vocab.STEP] % every == 0)]


def problem(epochs: pd.DataFrame, every: int) -> str | None:
    """Why `every` cannot thin these records (one line), or None."""
    steps = epochs[EVERY_KEY].dropna().astype(int).unique()
    if len(steps) == 0:
        return f"--every {every}: these runs have no records inside epochs ({EVERY_KEY} is null)"
    coarse = [int(s) for s in steps if every % s]
    if coarse:
        return f"--every {every}: must be a multiple of {EVERY_KEY} ({', '.join(map(str, sorted(coarse)))})"
    return None


def decision(outcome: str) -> str:
    """An outcome's decision without its seeds-needed note: 'undecided (~10 ... seeds)' -> 'undecided'."""
    return str(outcome).split(" (")[0]


def shifts(full: Path, thin: Path) -> pd.DataFrame:
    """Each reading of `full`'s report with an interval, and `shift`: how far `thin`'s estimate moved, as a
    share of the interval's half-width (NaN: `thin` cannot make the reading); `decided`: its decision changed.
    """
    keys = ["claim", "lr", "reading", "batchnorm", "check"]
    before = pd.read_csv(full / "tables" / "readings.csv").dropna(subset=["ci_low", "ci_high"])
    after = pd.read_csv(thin / "tables" / "readings.csv")
    both = before.merge(after, on=keys, how="left", suffixes=("", "_thin"))
    both["shift"] = (both["mean_thin"] - both["mean"]).abs() / ((both["ci_high"] - both["ci_low"]) / 2)
    both["decided"] = both["outcome"].map(decision) != both["outcome_thin"].map(decision)
    return both


def compare(full: Path, thin: Path, every: int, records: int, of: int) -> Moved:
    """The readings and steps to target of `thin`'s report against `full`'s."""
    both = shifts(full, thin)
    shift = both["shift"]
    worst = both.loc[shift.idxmax()] if shift.notna().any() else None
    return Moved(
        every=every,
        records=records,
        of=of,
        readings=len(both),
        shifted=int((shift > 1e-9).sum()),
        lost=int(shift.isna().sum()),
        largest=float(shift.max()) if worst is not None else 0.0,
        largest_at="" if worst is None else _where(worst),
        decisions=int(both["decided"].sum()),
        target_largest=_target_shift(full, thin),
    )


def _where(reading: pd.Series) -> str:
    return f"{reading['claim']} {reading['reading']} {reading['batchnorm']}: {reading['check']}"


def _target_shift(full: Path, thin: Path) -> float:
    keys = ["lr", "settings", "metric", "batch_size", "target"]  # not `results`: the two folders' names differ
    before = pd.read_csv(full / "tables" / "steps_to_target.csv").dropna(subset=["steps_ci_low", "steps_ci_high"])
    after = pd.read_csv(thin / "tables" / "steps_to_target.csv")
    both = before.merge(after, on=keys, how="left", suffixes=("", "_thin"))
    half = (both["steps_ci_high"] - both["steps_ci_low"]) / 2
    shift = (both["steps_mean_thin"] - both["steps_mean"]).abs() / half
    return float(shift.max()) if shift.notna().any() else 0.0


def measure(folder: Path, epochs: pd.DataFrame, every: list[int], scratch: Path) -> list[Moved]:
    """Each schedule of `every` against the folder's own records (`epochs`), both reports built by this
    checkout from copies of the folder's tables.
    """
    full = _copy(folder, scratch / "full", None)
    build([full])
    found = []
    for k in every:
        kept = thinned(epochs, k)
        build([_copy(folder, scratch / f"every-{k}", kept)])
        found.append(compare(full, scratch / f"every-{k}", k, len(kept), len(epochs)))
    return found


def _copy(folder: Path, to: Path, epochs: pd.DataFrame | None) -> Path:
    """The folder's tables (every CSV `sweep report` may read) in `to`, its epochs.csv replaced by `epochs`."""
    to.mkdir(parents=True)
    for table in folder.glob("*.csv"):
        shutil.copy(table, to / table.name)
    if epochs is not None:
        epochs.to_csv(to / "epochs.csv", index=False)
    return to


def lines(folder: str, found: list[Moved]) -> list[str]:
    """One table row per schedule."""
    stamp = f"{datetime.date.today()} | {commit(REPO)} | `{folder}`"
    return [
        f"| {stamp} | every {m.every} steps | {m.records} of {m.of} | {m.shifted} of {m.readings} | {m.lost} | "
        f"{m.largest:.2f} ({m.largest_at}) | {m.decisions} | {m.target_largest:.2f} |"
        for m in found
    ]


HEADER = (
    "# Records at fewer steps: how far the readings move\n\n"
    "`python -m benchmarks.costs.record_density RESULTS --every K ...`: the sweep's report rebuilt from its "
    "records at epoch ends and at multiples of K steps only, against the report from all of them (same code). "
    "A shift is the change of a reading's estimate as a share of its interval's half-width; a decision is "
    "holds, fails or undecided.\n\n"
    "| date | commit | results | records inside epochs | records kept | readings shifted | readings lost "
    "| largest shift | decisions changed | steps to target: largest shift |\n"
    "|---|---|---|---|---|---|---|---|---|---|\n"
)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    epochs_csv = args.results / "epochs.csv"
    if not epochs_csv.is_file():
        print(f"error: {args.results}: no epochs.csv (a finished sweep's results folder)", file=sys.stderr)
        return 2
    epochs = pd.read_csv(epochs_csv)
    for k in args.every:
        why = problem(epochs, k) if EVERY_KEY in epochs else f"{epochs_csv}: no {EVERY_KEY} column"
        if why:
            print(f"error: {why}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory(prefix="record-density-") as scratch:
        found = measure(args.results, epochs, args.every, Path(scratch))
    rows = lines(args.results.as_posix(), found)
    append_table(args.out, HEADER, "\n".join(rows) + "\n")
    print("\n".join(rows))
    print(f"appended to {args.out}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.costs.record_density",
        description=__doc__.split("\n\n")[0],
        epilog="example: python -m benchmarks.costs.record_density results/article --every 300 600",
    )
    parser.add_argument("results", type=Path, help="a finished sweep's results folder (runs.csv, epochs.csv)")
    parser.add_argument(
        "--every",
        type=positive,
        nargs="+",
        required=True,
        help="keep records inside epochs only at multiples of this many steps (a multiple of the sweep's "
        f"{EVERY_KEY}); several values: one row each",
    )
    parser.add_argument("--out", type=Path, default=REPO / "results" / "bench" / "record_density.md")
    return parser


if __name__ == "__main__":
    raise SystemExit(main())
