"""One row per run: its settings, its metrics at epoch 2 and at its last record, its speed (and its quiet speed
where timing.csv has it), its steps and seconds to C6's target (`reach.to_target`), and the timings of its copies
in other results folders. pandas only.
"""

from __future__ import annotations

import pandas as pd

from sweep import vocab
from sweep.analysis import reach
from sweep.analysis.results import SOURCE, SOURCE_RANK, Results, spec_hash
from sweep.analysis.settings import setting_columns
from sweep.config import timing_schema

EPOCH_TWO = 2  # the post's "epoch 2"

# Metrics summarised per run at epoch 2 and at the last epoch (sweep/vocab.py's METRICS): those every run
# records, and those only runs that measured them have.
SNAPSHOT_METRICS: tuple[str, ...] = vocab.snapshot(optional=False)
SNAPSHOT_WHERE_MEASURED: tuple[str, ...] = vocab.snapshot(optional=True)


def at_epoch(epochs: pd.DataFrame, epoch: int | None) -> pd.DataFrame:
    """One row per run: the given epoch, or each run's last epoch when epoch is None."""
    if epochs.empty:
        return epochs
    if epoch is not None:
        return epochs[epochs[vocab.EPOCH] == epoch].reset_index(drop=True)
    last = epochs.groupby(vocab.RUN_ID)[vocab.EPOCH].idxmax()
    return epochs.loc[last.values].reset_index(drop=True)


def column(metric: str, when: str) -> str:
    """Name of a per-run snapshot column: column("gap", "epoch2") -> "gap_epoch2"."""
    return f"{metric}_{when}"


def run_summary(epochs: pd.DataFrame) -> pd.DataFrame:
    """One row per done run: settings, seed, metrics at epoch 2 and at the last epoch, speed.

    Epoch time and samples/s average epochs 2.. because epoch 1 includes graph tracing
    (epoch 1 is used only when it is the only one).
    """
    if epochs.empty:
        return pd.DataFrame()
    rank = [SOURCE_RANK] if SOURCE_RANK in epochs else []
    head = [vocab.RUN_ID, SOURCE, *rank, vocab.SEED, *setting_columns(epochs)]
    last = at_epoch(epochs, None)
    table = last[head].assign(epochs=last[vocab.EPOCH].astype(int))
    for when, snap in (("epoch2", at_epoch(epochs, EPOCH_TWO)), ("last", last)):
        present = [m for m in (*SNAPSHOT_METRICS, *SNAPSHOT_WHERE_MEASURED) if m in snap]
        values = snap.set_index(vocab.RUN_ID)[present].add_suffix(f"_{when}")
        table = table.join(values, on=vocab.RUN_ID)
    best = epochs.groupby(vocab.RUN_ID)[vocab.VAL_ACC].max().rename("best_val_acc")
    # copy(): one block per dtype instead of one per joined column; the claims filter this table's rows
    # thousands of times, and each filter takes every block
    table = table.join(best, on=vocab.RUN_ID).join(_speed(epochs), on=vocab.RUN_ID)
    return table.join(reach.to_target(epochs), on=vocab.RUN_ID).copy()


def _timed_epochs(epochs: pd.DataFrame) -> pd.DataFrame:
    """The records that time a whole epoch, epoch 1 left out (it includes graph tracing) unless it is the only one."""
    later = epochs[(epochs[vocab.EPOCH] > 1) | (epochs.groupby(vocab.RUN_ID)[vocab.EPOCH].transform("max") == 1)]
    return later[later[vocab.EPOCH] % 1 == 0]  # records inside an epoch (eval_every_steps) time part of one


def _speed(epochs: pd.DataFrame) -> pd.DataFrame:
    """Mean epoch time and images/s per run, and the spread of its epoch times (min, median, max)."""
    later = _timed_epochs(epochs)
    means = later.groupby(vocab.RUN_ID)[[vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND]].mean()
    spread = later.groupby(vocab.RUN_ID)[vocab.EPOCH_SECONDS].agg(["min", "median", "max"])
    speed = means.join(spread.add_prefix(f"{vocab.EPOCH_SECONDS}_"))
    quiet_step = timing_schema.QUIET_STEP_SECONDS
    if quiet_step in epochs:  # a quiet epoch: steps per epoch (step / epoch at any record) x s per step
        ordered = epochs.assign(fraction=epochs[vocab.EPOCH] % 1).sort_values("fraction", kind="stable")
        rate = ordered[quiet_step] * ordered[vocab.STEP] / ordered[vocab.EPOCH]  # whole epochs first:
        speed = speed.join(rate.groupby(ordered[vocab.RUN_ID]).first().rename(QUIET_EPOCH_SECONDS))  # exact there
    if timing_schema.QUIET_REPEATS in epochs:  # C6's quiet reading: every repeat of the run's configuration
        speed = speed.join(epochs.groupby(vocab.RUN_ID)[timing_schema.QUIET_REPEATS].first())
    return speed


QUIET_EPOCH_SECONDS = "quiet_epoch_seconds"  # from timing.csv where the results folder has one
PACK_SIZE = "pack_size"  # runs.csv: how many runs trained as towers of one model (1: alone)
TIMED_COPIES = "epoch_seconds_copies"  # timing_copies' column: every folder's timing of a run stored more than once


def timing_copies(results: Results) -> pd.DataFrame:
    """Runs stored in more than one results folder, with each copy's median epoch time (epochs 2 onwards).

    `load` keeps the first folder's copy; training is deterministic but timing is not, so the
    copies left out would give another speed: the report names them rather than hide them.
    """
    epochs = results.folder_epochs
    if epochs.empty or SOURCE not in epochs:
        return pd.DataFrame(columns=[vocab.RUN_ID, TIMED_COPIES])
    later = _timed_epochs(epochs.assign(**{vocab.RUN_ID: spec_hash(epochs[vocab.RUN_ID])}))
    per_copy = later.groupby([vocab.RUN_ID, SOURCE], sort=False)[vocab.EPOCH_SECONDS].median().reset_index()
    shared = per_copy[per_copy.groupby(vocab.RUN_ID)[SOURCE].transform("nunique") > 1]
    kept = dict(zip(spec_hash(results.epochs[vocab.RUN_ID]), results.epochs[SOURCE], strict=True))
    rows = []
    for spec, copies in shared.groupby(vocab.RUN_ID, sort=True):
        words = [
            f"{c[vocab.EPOCH_SECONDS]:.2f} s ({c[SOURCE]}{', used' if kept.get(spec) == c[SOURCE] else ''})"
            for _, c in copies.iterrows()
        ]
        rows.append((spec, "; ".join(words)))
    return pd.DataFrame(rows, columns=["spec", TIMED_COPIES])


def with_timing_copies(summary: pd.DataFrame, copies: pd.DataFrame) -> pd.DataFrame:
    """`summary` with the other folders' timings of its runs (empty where a run was timed once)."""
    if summary.empty:
        return summary
    spec = spec_hash(summary[vocab.RUN_ID])
    return summary.assign(**{TIMED_COPIES: spec.map(dict(zip(copies["spec"], copies[TIMED_COPIES], strict=True)))})
