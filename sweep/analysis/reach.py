"""Where one run first reaches a target level of a metric: the step, epoch and seconds, read by linear
interpolation between records (the first record is preceded by step 0 at chance accuracy); NaN where the run
never reached it within its records. Read per curve by `sweep.analysis.scaling` (steps to target) and per run
by `to_target` (C6: seconds to a target fixed in advance). numpy and pandas only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from sweep import vocab
from sweep.analysis.settings import BATCH_SIZE
from sweep.config import timing_schema


@dataclass(frozen=True)
class Reach:
    """Where one run first reached one target; NaN step when it did not within its records."""

    run_id: str
    seed: int
    batch_size: int
    target: float
    step: float
    epoch: float
    seconds: float  # wall time from the run's own epoch_seconds (includes graph tracing in epoch 1)
    quiet_seconds: float  # step x the configuration's quiet seconds per step (timing.csv); NaN without one
    budget_step: int  # the run's last record
    best_val: float  # the run's highest value of the metric (what a run that missed got to)
    at_first_record: bool  # reached by the first record: read from step 0 at chance accuracy

    @property
    def reached(self) -> bool:
        return not math.isnan(self.step)


def elapsed_seconds(run: pd.DataFrame) -> pd.Series:
    """Training seconds since the start of the run at each record.

    `epoch_seconds` is the time since the start of the epoch, so the elapsed time at a record is its
    own value plus the full times of the epochs completed before it (the records at integer epochs).
    """
    order = step_order(run[vocab.STEP].to_numpy())
    epoch = run[vocab.EPOCH].to_numpy(dtype=float)[order]
    seconds = run[vocab.EPOCH_SECONDS].to_numpy(dtype=float)[order]
    return pd.Series(elapsed(epoch, seconds), index=run.index[order])


def elapsed(epoch: np.ndarray, seconds: np.ndarray) -> np.ndarray:
    """`elapsed_seconds` on one run's records already in step order, as arrays."""
    whole = np.isclose(epoch, np.round(epoch))
    before = [seconds[whole & (epoch < e - 1e-9)].sum() for e in epoch]
    return np.asarray(before, dtype=float) + seconds


def step_order(steps: np.ndarray) -> np.ndarray:
    """Positions of a run's records in step order, as `DataFrame.sort_values(step)` puts them (the same
    quicksort, so equal steps come out alike); without pandas' cost per call, paid for every run.
    """
    return np.argsort(steps, kind="quicksort")


@dataclass(frozen=True)
class Records:
    """One run's records ordered by step, as arrays: read once per run, then at every target."""

    missed: Reach  # the run's reading at a target it does not reach (target set per reading)
    steps: np.ndarray  # step 0 first: the run before its first record
    epochs: np.ndarray
    secs: np.ndarray
    val: np.ndarray  # without the step-0 value: that is chance, which depends on the target
    quiet_per_step: float  # NaN without a timing.csv


def records(run: pd.DataFrame, metric: str) -> Records:
    return records_each(run, (metric,))[metric]


def records_each(run: pd.DataFrame, metrics: tuple[str, ...]) -> dict[str, Records]:
    """`records` on each metric, the run sorted and its seconds summed once for all of them."""
    run = run.sort_values(vocab.STEP)
    head = run.iloc[0]
    has_seconds = vocab.EPOCH_SECONDS in run and run[vocab.EPOCH_SECONDS].notna().all()
    seconds = elapsed_seconds(run).to_numpy() if has_seconds else np.full(len(run), math.nan)
    secs = np.concatenate([[0.0], seconds])
    # the run before its first record: step 0, epoch 0, 0 s (and chance accuracy, added per target)
    steps, epochs = (np.concatenate([[0.0], run[c].to_numpy(dtype=float)]) for c in (vocab.STEP, vocab.EPOCH))
    quiet_step = timing_schema.QUIET_STEP_SECONDS
    quiet = float(run[quiet_step].iloc[0]) if quiet_step in run else math.nan
    missed = Reach(
        run_id=str(head[vocab.RUN_ID]),
        seed=int(head[vocab.SEED]),
        batch_size=int(head[BATCH_SIZE]) if BATCH_SIZE in head else 0,  # 0: a table without batch sizes
        target=math.nan,
        step=math.nan,
        epoch=math.nan,
        seconds=math.nan,
        quiet_seconds=math.nan,
        budget_step=int(steps[-1]),
        best_val=math.nan,
        at_first_record=False,
    )
    found = {}
    for metric in metrics:
        val = run[metric].to_numpy(dtype=float)
        found[metric] = Records(replace(missed, best_val=float(np.nanmax(val))), steps, epochs, secs, val, quiet)
    return found


def reach(found: Records, target: float, chance: float) -> Reach:
    vals = np.concatenate([[min(chance, target)], found.val])
    hits = np.flatnonzero(vals[1:] >= target)
    missed = replace(found.missed, target=target)
    if not hits.size:
        return missed
    i = int(hits[0]) + 1
    lo, hi = vals[i - 1], vals[i]
    frac = 1.0 if hi == lo else (target - lo) / (hi - lo)

    def at(xs: np.ndarray) -> float:
        return float(xs[i - 1] + frac * (xs[i] - xs[i - 1]))

    step = at(found.steps)
    epoch = at(found.epochs)
    seconds = at(found.secs)
    quiet = found.quiet_per_step * step
    return replace(missed, step=step, epoch=epoch, seconds=seconds, quiet_seconds=quiet, at_first_record=i == 1)


# --- one run at C6's target

# C6's target, fixed before any run's time to it was read: half the validation images right. It lies between the
# accuracies the post quotes at epoch 2 (6% at batch 64, 60% at batch 8), far above chance at 120 classes, and a
# run that learns gets there within the post's few epochs. The steps-to-target table reads every level of the
# ladder beside it, so a reader sees whether a verdict hangs on this one.
TIME_TARGET = 0.5
TARGET_METRICS = (vocab.VAL_ACC, vocab.VAL_ACC_RECAL)  # read on each a run recorded
STEPS_TO_TARGET, SECONDS_TO_TARGET = "steps_to_target", "seconds_to_target"  # NaN: not reached within its records
TRAINED_STEPS, TRAINED_SECONDS = "trained_steps", "trained_seconds"  # its last record: what a miss is bounded by


def column_for(kind: str, metric: str) -> str:
    """The run-summary column of `kind` (steps or seconds to target) on `metric`: steps_to_target_recal."""
    return kind + ("_recal" if metric == vocab.VAL_ACC_RECAL else "")


def to_target(epochs: pd.DataFrame) -> pd.DataFrame:
    """Per run (indexed by run_id): steps and in-run seconds to TIME_TARGET on each metric it recorded,
    the steps and seconds it trained in all, and its quiet seconds per step (NaN without timing.csv).
    """
    rows = {}
    for run_id, run in epochs.groupby(vocab.RUN_ID, sort=False):
        row: dict[str, float] = {}
        present = tuple(m for m in TARGET_METRICS if m in run and run[m].notna().any())  # a record without it is
        for metric, found in records_each(run, present).items():  # passed over
            # chance 0: the step-0 value only matters for a run above the target at its first record
            hit = reach(found, TIME_TARGET, 0.0)
            row[column_for(STEPS_TO_TARGET, metric)] = hit.step
            row[column_for(SECONDS_TO_TARGET, metric)] = hit.seconds
            row[TRAINED_STEPS], row[TRAINED_SECONDS] = float(found.steps[-1]), float(found.secs[-1])
            row[timing_schema.QUIET_STEP_SECONDS] = found.quiet_per_step
        rows[run_id] = row
    return pd.DataFrame.from_dict(rows, orient="index")
