"""Steps to a target accuracy per batch size, and the fit S = S_min (1 + B_crit / B) (Shallue et al. 2019).

Reads what `sweep.analysis.load` returns; pandas, numpy and scipy only, no TensorFlow.
docs/report.md ("Steps to target") explains every reading to the report's users.

- A *curve* is a group of runs that differ only in batch size (and, for runs re-run at a
  search's best lr, in that lr): one results folder, one role, every other setting equal.
- A curve reads `val_acc_recal` (BatchNorm statistics recomputed for the weights) when every record of
  every one of its runs has it, else raw `val_acc`; `Curve.metric` names which. Raw val_acc of a large
  batch lags behind its weights (BatchNorm's moving statistics move once per step, and a large batch
  takes few), so it would count steps the model did not need.
- A run reaches a target at the first record whose metric is at or above it; the step is
  read by linear interpolation in steps between that record and the one before (the first
  record is preceded by step 0 at chance accuracy, 1 / classes: validation is balanced).
  Records may sit inside epochs (`train.eval_every_steps`); `step` is always exact.
- A run that never reaches a target within its records is *not reached within budget*:
  counted, never dropped, never imputed.
- Targets are read from the data by a fixed rule (`choose_targets`).
- The fit (`sweep.analysis.scaling_fit`) uses the batch sizes where every run reached the target (a mean
  over only the seeds that got there would be biased low): fitted to their mean log steps, its interval a
  bootstrap over seeds, its form checked by a lack-of-fit test.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from sweep import analysis as an
from sweep import vocab
from sweep.analysis import reach
from sweep.analysis.estimates import Estimate, estimate
from sweep.analysis.scaling_fit import MIN_REACHED, Fit, fit_scaling
from sweep.analysis.selection import CONTROL_DEFAULTS, POST_DEFAULTS, at_post, is_default, settings_key

TARGET_LADDER = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)  # candidate levels of a curve's metric
LR_COLUMN = "train.lr"
# Settings that add records or measurements but never change training: they do not split a curve.
MEASUREMENT_ONLY = ("train.eval_every_steps", "train.noise_scale")
FIXED, TUNED = "fixed", "tuned per batch size"


@dataclass(frozen=True)
class Curve:
    """Runs that differ only in batch size: the unit a steps-to-target table and fit describe."""

    source: str  # the results folder
    lr: str  # "fixed 0.001" or "tuned per batch size"
    context: str  # the other settings, as key=value
    seeds: tuple[int, ...]
    epochs: pd.DataFrame  # its runs' records
    chance: dict[str, float]  # run_id -> 1 / classes
    metric: str = vocab.VAL_ACC  # what the targets are levels of: val_acc_recal where every run recorded it

    def label(self) -> str:
        return f"{self.source}, lr {self.lr}, seeds {', '.join(map(str, self.seeds))}"


def curves(results: an.Results, min_batches: int = 2) -> list[Curve]:
    """Every group of done grid runs (controls at default, toggles at the post's setting) and of tuned runs
    that covers at least `min_batches` batch sizes, in results-folder order.
    """
    found: list[Curve] = []
    for role_epochs, tuned in ((results.epochs, False), (results.tuned, True)):
        for rows in _groups(_comparable(role_epochs), tuned):
            if rows[an.BATCH_SIZE].nunique() >= min_batches:
                found.append(_curve(rows, tuned, results.runs))
    return sorted(found, key=lambda c: (_rank(c), c.lr != TUNED, c.context))


def _rank(curve: Curve) -> int:
    return int(curve.epochs[an.SOURCE_RANK].min()) if an.SOURCE_RANK in curve.epochs else 0


def _comparable(epochs: pd.DataFrame) -> pd.DataFrame:
    """Runs at the post's protocol: controls at their defaults, toggles at the post's setting."""
    rows = epochs
    for key in POST_DEFAULTS:
        if key in rows:
            rows = rows[at_post(rows[key], key)]
    for key, value in CONTROL_DEFAULTS.items():
        if key in rows:
            rows = rows[is_default(rows[key], value)]
    return rows


def _groups(epochs: pd.DataFrame, tuned: bool) -> list[pd.DataFrame]:
    if epochs.empty or an.BATCH_SIZE not in epochs:
        return []
    free = {an.BATCH_SIZE, *MEASUREMENT_ONLY, *((LR_COLUMN,) if tuned else ())}
    others = [c for c in an.setting_columns(epochs) if c not in free]
    source = epochs[an.SOURCE] if an.SOURCE in epochs else pd.Series("", index=epochs.index)
    key = source.astype(str) + "|" + settings_key(epochs, others)
    return [rows for _, rows in epochs.groupby(key, sort=True)]


def _curve(rows: pd.DataFrame, tuned: bool, runs: pd.DataFrame) -> Curve:
    lrs = sorted(rows[LR_COLUMN].dropna().unique()) if LR_COLUMN in rows else []
    lr = TUNED if tuned else f"{FIXED} {', '.join(f'{v:g}' for v in lrs)}"
    context = ", ".join(
        f"{c}={rows[c].iloc[0]:g}" if isinstance(rows[c].iloc[0], float) else f"{c}={rows[c].iloc[0]}"
        for c in ("data.samples_per_class", "train.epochs")
        if c in rows
    )
    source = str(rows[an.SOURCE].iloc[0]) if an.SOURCE in rows else ""
    seeds = tuple(int(s) for s in sorted(rows[vocab.SEED].unique()))
    return Curve(source, lr, context, seeds, rows.reset_index(drop=True), _chance(rows, runs), metric_of(rows))


def metric_of(epochs: pd.DataFrame) -> str:
    """val_acc_recal when every record has it (runs with `train.recalibrate_bn: true`), else val_acc:
    one metric for the whole curve, so its batch sizes are compared on the same reading.
    """
    recal = vocab.VAL_ACC_RECAL
    return recal if recal in epochs and epochs[recal].notna().all() else vocab.VAL_ACC


def _chance(rows: pd.DataFrame, runs: pd.DataFrame) -> dict[str, float]:
    """1 / classes per run, from runs.csv's num_classes (0 when unknown: the reading is then a later step)."""
    classes = runs.set_index(vocab.RUN_ID)["num_classes"] if "num_classes" in runs else pd.Series(dtype=float)
    classes = classes[~classes.index.duplicated()]
    ids = rows[vocab.RUN_ID].unique()
    return {str(r): (1.0 / float(classes[r]) if r in classes and classes[r] > 0 else 0.0) for r in ids}


# --- reaching a target


def reaches(curve: Curve, targets: tuple[float, ...]) -> pd.DataFrame:
    """One row per (run, target): the `Reach` fields and `reached`."""
    rows = []
    for run_id, run in curve.epochs.groupby(vocab.RUN_ID, sort=True):
        records = reach.records(run, curve.metric)
        for target in targets:
            r = reach.reach(records, target, curve.chance.get(str(run_id), 0.0))
            rows.append({**r.__dict__, "reached": r.reached})
    return pd.DataFrame(rows)


def choose_targets(curve: Curve, table: pd.DataFrame | None = None) -> tuple[float, ...]:
    """The levels of the ladder above chance that at least half the curve's batch sizes reach with >= 2 seeds.

    Fixed levels make targets comparable between curves; "half the batch sizes" keeps a target most
    of the curve can be read at, without choosing it by a fit's outcome. `table`: `above_chance(curve)`.
    """
    table = above_chance(curve) if table is None else table
    if table.empty:
        return ()
    per_batch = table.groupby(["target", "batch_size"])["reached"].sum().reset_index()
    enough = per_batch[per_batch["reached"] >= MIN_REACHED].groupby("target")["batch_size"].nunique()
    batches = curve.epochs[an.BATCH_SIZE].nunique()
    return tuple(float(t) for t in TARGET_LADDER if enough.get(t, 0) * 2 >= batches)


def above_chance(curve: Curve) -> pd.DataFrame:
    """`reaches` at the ladder's levels above chance (a level at or below it is met by an untrained model)."""
    return reaches(curve, tuple(t for t in TARGET_LADDER if t > max(curve.chance.values(), default=0.0)))


# --- the table


@dataclass(frozen=True)
class TargetRow:
    """One batch size at one target: how many runs reached it, and when."""

    batch_size: int
    target: float
    n_runs: int
    n_reached: int
    steps: Estimate  # over the seeds that reached it; no interval below 2
    epochs: Estimate
    seconds: Estimate
    quiet_seconds: Estimate  # NaN without a timing.csv for the runs' configuration
    budget_steps: int  # the largest last-record step among the runs
    best_val_missed: tuple[float, ...]  # highest value of the metric of each run that did not reach it
    at_first_record: int  # reached by the first record (read from step 0 at chance)

    @property
    def not_reached(self) -> int:
        return self.n_runs - self.n_reached


def perfect_scaling(rows: Sequence[TargetRow], sizes: Iterable[int]) -> dict[int, float]:
    """Steps at each batch size of `sizes` under perfect scaling (steps x batch constant), through the
    smallest batch size whose every run reached the target; none below it, none without such a row.
    """
    complete = [r for r in rows if not r.not_reached]
    if not complete:
        return {}
    first = min(complete, key=lambda r: r.batch_size)
    constant = first.steps.mean * first.batch_size
    return {b: constant / b for b in sizes if b >= first.batch_size}


def _estimate(values: pd.Series) -> Estimate:
    """An estimate over seeds; fewer than MIN_REACHED values keep their mean but get no interval."""
    e = estimate(values)
    return e if e.n >= MIN_REACHED else Estimate(e.mean, math.nan, e.n, math.nan, math.nan)


def target_rows(table: pd.DataFrame) -> list[TargetRow]:
    """Summarise `reaches` per batch size and target."""
    found = []
    for (batch, target), rows in table.groupby(["batch_size", "target"], sort=True):
        hit = rows[rows["reached"]]
        found.append(
            TargetRow(
                batch_size=int(batch),
                target=float(target),
                n_runs=len(rows),
                n_reached=len(hit),
                steps=_estimate(hit["step"]),
                epochs=_estimate(hit["epoch"]),
                seconds=_estimate(hit["seconds"]),
                quiet_seconds=_estimate(hit["quiet_seconds"] if hit["quiet_seconds"].notna().all() else []),
                budget_steps=int(rows["budget_step"].max()),
                best_val_missed=tuple(float(v) for v in rows.loc[~rows["reached"], "best_val"]),
                at_first_record=int(hit["at_first_record"].sum()),
            )
        )
    return found


def seconds_spread(curve: Curve) -> tuple[int, float, float] | None:
    """The batch size whose whole-epoch times (epochs 2 on: epoch 1 includes graph tracing) vary most, min and max."""
    e = curve.epochs
    if vocab.EPOCH_SECONDS not in e:
        return None
    whole = e[(e[vocab.EPOCH] >= 2) & np.isclose(e[vocab.EPOCH] % 1, 0) & (e[vocab.EPOCH_SECONDS] > 0)]
    if whole.empty:
        return None
    span = whole.groupby(an.BATCH_SIZE)[vocab.EPOCH_SECONDS].agg(["min", "max"])
    b = (span["max"] / span["min"]).idxmax()
    return int(b), float(span.loc[b, "min"]), float(span.loc[b, "max"])


# --- one curve, read whole


@dataclass(frozen=True)
class CurveReading:
    """A curve with its targets, every run's reading at each, the table rows and the fits."""

    curve: Curve
    targets: tuple[float, ...]
    reaches: pd.DataFrame
    rows: list[TargetRow]
    fits: list[Fit]


def read(results: an.Results) -> list[CurveReading]:
    """Every curve of the results, read at its own targets."""
    found = []
    for curve in curves(results):
        ladder = above_chance(curve)  # read once: the chosen targets' rows are among these
        targets = choose_targets(curve, ladder)
        table = ladder[ladder["target"].isin(targets)].reset_index(drop=True) if targets else pd.DataFrame()
        rows = target_rows(table) if targets else []
        found.append(CurveReading(curve, targets, table, rows, [fit_scaling(table, t) for t in targets]))
    return found
