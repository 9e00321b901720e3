"""Where a comparison is read: equal epochs, equal optimizer steps, equal training fit or equal wall time.

The post reads batch sizes at equal epochs, but epoch 2 is 300 optimizer steps at
batch 64 and 2,400 at batch 8: the two models are at different points of
training. A claim about batch size is therefore also read at points where the
runs are comparable. `reread` returns the run summary (`sweep.analysis.run_summary`)
with its snapshot columns (`*_epoch2`, `*_last`) read at another point, so every
claim's check runs unchanged at every reading. The point is set per group of
runs that differ only in the compared settings and the seed (the runs a check
compares), for each snapshot:

- equal epochs: the snapshot itself (the post's reading; the summary unchanged);
- equal steps: the fewest optimizer steps any run of the group had taken at the
  snapshot; every run is read there, interpolated linearly between its records;
- equal fit: the training fit every run of the group had reached at the
  snapshot, i.e. the highest fit loss among them (the worst-fitted run's); every
  run is read where its fit loss first falls to it, interpolated between the two
  records around the crossing. The fit loss is `train_eval_loss_recal` where
  measured (the weights' fit, without BatchNorm's lag), else `train_eval_loss`;
- equal time: the shortest training wall time of the group at the snapshot
  (epoch times summed, evaluation excluded; epoch 1 includes graph tracing, and
  times depend on what else ran on the machine).

A run whose records do not reach the point (its first record comes later, for
equal steps or time) has no value there: the check sees fewer runs, and the
report says so. With records at epoch ends only, small batches have no record
early enough for equal steps; `train.eval_every_steps` adds them.
`recalibrated` swaps the inference-mode numbers for their BatchNorm-recalibrated
versions (`*_recal`), so the same checks also run without BatchNorm's lag.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from sweep import vocab
from sweep.analysis import column, setting_columns
from sweep.analysis.reach import elapsed, step_order
from sweep.analysis.selection import matches, settings_key

WHENS = ("epoch2", "last")  # the run summary's snapshots
ELAPSED = "elapsed_seconds"  # training wall time up to a record (computed here)


@dataclass(frozen=True)
class Reading:
    name: str  # "equal steps"
    axis: str  # the column the point is found on (a record's step, fit loss or elapsed time)
    words: str  # how the report states the point


EPOCHS = Reading("equal epochs", vocab.EPOCH, "the same epoch for every batch size (the post's reading)")
STEPS = Reading("equal steps", vocab.STEP, "the fewest optimizer steps any compared run had taken by then")
FIT = Reading("equal fit", vocab.TRAIN_EVAL_LOSS, "the training fit every compared run had reached by then")
TIME = Reading("equal time", ELAPSED, "the shortest training wall time of the compared runs by then")
READINGS: tuple[Reading, ...] = (EPOCHS, STEPS, FIT, TIME)
CROSSINGS = (FIT, TIME)  # read where a run's curve crosses a level: between two records, wherever they fall
FIT_WORDS = "inference-mode training loss on the train_eval subset, recalibrated where measured"

# Inference-mode numbers and their recalibrated versions; the post's gap is rebuilt from val_acc.
RECALIBRATED = {
    vocab.TRAIN_EVAL_ACC: vocab.TRAIN_EVAL_ACC_RECAL,
    vocab.VAL_ACC: vocab.VAL_ACC_RECAL,
    vocab.TRAIN_EVAL_LOSS: vocab.TRAIN_EVAL_LOSS_RECAL,
    vocab.VAL_LOSS: vocab.VAL_LOSS_RECAL,
    vocab.EVAL_GAP: vocab.EVAL_GAP_RECAL,
}


def fit_metric(epochs: pd.DataFrame) -> str:
    """The loss equal fit is read on: recalibrated where every record has it, else the raw one."""
    recal = vocab.TRAIN_EVAL_LOSS_RECAL
    return recal if recal in epochs and epochs[recal].notna().all() else vocab.TRAIN_EVAL_LOSS


def has_recalibrated(table: pd.DataFrame) -> bool:
    """Whether any run of a summary table has the recalibrated numbers (at its last record)."""
    name = column(vocab.VAL_ACC_RECAL, "last")
    return name in table and bool(table[name].notna().any())


def recalibrated(summary: pd.DataFrame) -> pd.DataFrame:
    """The summary with inference-mode numbers replaced by their recalibrated versions; the gap becomes
    eval_gap_recal (train_eval_acc_recal - val_acc_recal: one model, one mode, on both sets), never the
    running training-mode train_acc minus a recalibrated val_acc, which mixes two measurements.

    A run without them (measured without train.recalibrate_bn) gets empty cells, never its raw numbers,
    so a check on such runs has no value rather than a raw one under the recalibrated name.
    """
    swapped = {}
    for when in WHENS:
        for raw, recal in RECALIBRATED.items():
            if column(recal, when) in summary:
                swapped[column(raw, when)] = summary[column(recal, when)]
        if column(vocab.EVAL_GAP_RECAL, when) in summary:  # never the running train_acc minus a recalibrated val
            swapped[column(vocab.GAP, when)] = summary[column(vocab.EVAL_GAP_RECAL, when)]
    return summary.assign(**swapped)


def every_other(epochs: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """The records with every other record inside an epoch left out, one way and the other (each run's
    first, third, ... record inside epochs; its second, fourth, ...), epoch ends in both; None where no
    run has records inside epochs. A reading at a crossing that decides otherwise on either depends on
    where the records fall, which its interval over seeds does not count.
    """
    inside = epochs[vocab.EPOCH] % 1 != 0
    if not inside.any():
        return None
    position = epochs[inside].groupby(vocab.RUN_ID)[vocab.STEP].rank(method="first")
    odd = position.index[position % 2 == 1]
    even = position.index[position % 2 == 0]
    return epochs.drop(index=even), epochs.drop(index=odd)


def reread(
    summary: pd.DataFrame, epochs: pd.DataFrame, axes: Sequence[str], reading: Reading, values: Sequence[Any] = ()
) -> pd.DataFrame:
    """The summary read at `reading` for comparisons along `axes` (only rows at `values` of the first axis, if given).

    Adds, per snapshot, `point_<when>` (the step, loss or seconds read at) and keeps `epoch_<when>` (the
    epoch each run was read at, fractional inside an epoch).
    """
    rows = summary
    if values:
        rows = rows[np.logical_or.reduce([matches(rows[axes[0]], v) for v in values])]
    if reading == EPOCHS or rows.empty:
        return rows
    curves = _with_elapsed(epochs[epochs[vocab.RUN_ID].isin(rows[vocab.RUN_ID])])
    others = [c for c in setting_columns(rows) if c not in axes]
    parts = [_read_group(group, curves, reading) for _, group in rows.groupby(settings_key(rows, others))]
    return pd.concat(parts).loc[rows.index]


@dataclass(frozen=True)
class _Curve:
    """One run's records, ordered by step, as arrays: the axis a point is found on, the epoch, and the
    numeric columns read there (as floats, as a row of the numeric columns reads).
    """

    axis: np.ndarray
    epoch: np.ndarray
    names: list[str]
    values: np.ndarray  # records x names


def _read_group(group: pd.DataFrame, all_curves: pd.DataFrame, reading: Reading) -> pd.DataFrame:
    curves = all_curves[all_curves[vocab.RUN_ID].isin(group[vocab.RUN_ID])]
    axis = fit_metric(curves) if reading == FIT else reading.axis  # per group: recalibrated where it has them
    snapshot_metrics = [m for m in curves.columns if column(m, "last") in group] + [vocab.EPOCH]
    by_run = _curves(curves, axis, snapshot_metrics)
    updates: dict[str, list[float]] = {}
    for when in WHENS:
        at_snapshot = [_value_at_snapshot(by_run.get(r), when) for r in group[vocab.RUN_ID]]
        point = _common_point(at_snapshot, reading)
        read = [_read(by_run.get(r), point, first_below=reading == FIT) for r in group[vocab.RUN_ID]]
        for metric in snapshot_metrics:
            updates[column(metric, when)] = [values.get(metric, np.nan) for values in read]
        updates[f"point_{when}"] = [point] * len(group)
    return group.assign(**updates)


def _common_point(at_snapshot: list[float], reading: Reading) -> float:
    """Where every run of a group is read: the worst fit any reached, else the fewest steps or seconds any
    had taken; NaN where no run has a value at the snapshot (a one-epoch run has no epoch 2).
    """
    values = np.asarray(at_snapshot, dtype=float)
    if np.isnan(values).all():
        return float("nan")
    return float(np.nanmax(values) if reading == FIT else np.nanmin(values))


def _curves(curves: pd.DataFrame, axis: str, metrics: list[str]) -> dict[Any, _Curve]:
    """Each run's records as arrays; pandas row selection per record is what made re-reading slow."""
    numeric = set(curves.select_dtypes("number").columns)
    names = [m for m in dict.fromkeys(metrics) if m in numeric]
    step, epoch = curves[vocab.STEP].to_numpy(), curves[vocab.EPOCH].to_numpy()
    position = curves[axis].to_numpy(float)
    values = curves[names].to_numpy(float) if names else np.empty((len(curves), 0))
    by_run = {}
    for run_id, at in curves.groupby(vocab.RUN_ID).indices.items():
        at = at[step_order(step[at])]
        by_run[run_id] = _Curve(position[at], epoch[at], names, values[at])
    return by_run


def _value_at_snapshot(curve: _Curve | None, when: str) -> float:
    """The run's value of the axis at the snapshot: its epoch-2 record, or its last."""
    if curve is None or not len(curve.axis):
        return np.nan
    if when != "epoch2":
        return float(curve.axis[-1])
    at = np.flatnonzero(curve.epoch == 2)
    return float(curve.axis[at[0]]) if len(at) else np.nan


def _read(curve: _Curve | None, point: float, first_below: bool) -> dict[str, float]:
    """Every numeric column of the run's curve where the axis reaches `point`, interpolated between two records."""
    if curve is None or not len(curve.axis) or not np.isfinite(point):
        return {}
    position = curve.axis
    if first_below:
        reached = np.flatnonzero(position <= point)
        if not len(reached):
            return {}
        k = int(reached[0])
        if k == 0:  # reached by its first record: read there (it has no record before)
            return _row(curve, curve.values[0])
        fraction = (position[k - 1] - point) / (position[k - 1] - position[k])
    else:
        if point < position[0] or point > position[-1]:
            return {}
        if len(position) == 1:  # the point is its only record
            return _row(curve, curve.values[0])
        k = max(1, int(np.searchsorted(position, point)))
        if position[k] == position[k - 1]:
            return _row(curve, curve.values[k])
        fraction = (point - position[k - 1]) / (position[k] - position[k - 1])
    before, after = curve.values[k - 1], curve.values[k]
    return _row(curve, before + fraction * (after - before))


def _row(curve: _Curve, values: np.ndarray) -> dict[str, float]:
    return dict(zip(curve.names, values.tolist(), strict=True))


def _with_elapsed(curves: pd.DataFrame) -> pd.DataFrame:
    """Add each record's training wall time since its run started (`reach.elapsed_seconds`)."""
    if curves.empty:
        return curves.assign(**{ELAPSED: pd.Series(dtype=float)})
    step = curves[vocab.STEP].to_numpy()
    epoch, seconds = (curves[c].to_numpy(dtype=float) for c in (vocab.EPOCH, vocab.EPOCH_SECONDS))
    times = np.empty(len(curves))
    for at in curves.groupby(vocab.RUN_ID).indices.values():  # per run, on arrays: no frame per run
        at = at[step_order(step[at])]
        times[at] = elapsed(epoch[at], seconds[at])
    return curves.assign(**{ELAPSED: times})
