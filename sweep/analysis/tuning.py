"""Batch sizes at their own best learning rate: tables for the report.

Reads what `sweep.analysis.load` returns; no TensorFlow. The question:

- Shallue et al. (2019): compared at a learning rate tuned for each batch size
  (the search's best lr, re-run at every seed), does a small batch still end with
  a higher validation accuracy than a large one? And how much did tuning change each
  batch size against the post's fixed lr (paired by seed)?
- Each point reads val_acc_recal where every record of its tuned and fixed-lr runs has
  it (`scaling.metric_of`), else val_acc, and says which: raw val_acc of a large batch
  lags behind its weights (BatchNorm's moving statistics).
- A search whose best lr is still at an edge of its range (`sweep.config.lr_range`) after the
  widenings `search.widen` allows may have its optimum outside it: the point says so
  (the range, widened, is in runs.csv's search_lr_low / search_lr_high).

The gradient noise scale, and what it predicts about steps to a target, is read by
`sweep.analysis.critical`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from sweep import analysis as an
from sweep import vocab
from sweep.analysis import scaling
from sweep.analysis.estimates import Estimate, estimate, fmt_estimate
from sweep.analysis.selection import fmt_value, matches
from sweep.config import lr_range

SMALL_BATCH = 32  # the post's advice, "batch_size 32 or less" (claim C8 and the tuned comparison)


@dataclass(frozen=True)
class TunedPoint:
    """One learning-rate search: its trials, its best lr, and that lr against the fixed lr over seeds."""

    batch_size: int
    context: str  # the other settings that vary between searches, if any
    best_lr: float
    fixed_lr: float | None
    trials: tuple[tuple[float, float, str], ...]  # (lr, final `metric`, status), by lr
    tuned_val: Estimate  # `metric` at the last epoch, over seeds, at the best lr
    fixed_val: Estimate  # the same at the post's fixed lr (grid runs of the same point)
    change: Estimate  # tuned - fixed, paired by seed
    tuned_gap2: Estimate  # the post's gap at epoch 2, at the best lr
    fixed_gap2: Estimate
    metric: str = vocab.VAL_ACC  # val_acc_recal where every tuned and fixed-lr record has it
    search_metric: str = ""  # what the search chose the best lr on; "" where runs.csv does not say
    lr_range: tuple[float, float] | None = None  # search.lr's low and high; None where runs.csv does not say

    def edge(self) -> str:
        """The flag "at the edge of the range [low, high]: widen search.lr ..." when the best lr is at an edge
        of the range the search ended with (`lr_range.edge_side`); "" otherwise (or where it is not known).
        """
        if self.lr_range is None:
            return ""
        low, high = self.lr_range
        side = lr_range.edge_side(self.best_lr, (lr for lr, _, _ in self.trials if math.isfinite(lr)), low, high)
        if not side:
            return ""
        return f"at the edge of the range [{low:.3g}, {high:.3g}]: widen search.lr or raise search.widen"


@dataclass(frozen=True)
class Tuning:
    points: tuple[TunedPoint, ...]
    small_vs_large: Estimate | None  # best tuned batch <= 32 minus best tuned batch > 32, paired, on `metric`
    small: int | None
    large: int | None
    metric: str = vocab.VAL_ACC  # val_acc_recal where both points read it

    def conclusion(self) -> str:
        if self.small_vs_large is None or self.small_vs_large.n == 0:
            return (
                "These searches do not cover batch sizes on both sides of 32, so the post's advice is not "
                "tested at tuned learning rates."
            )
        e = self.small_vs_large
        side = "higher" if e.mean > 0 else "lower"
        sure = "" if e.n > 1 and not (e.low <= 0 <= e.high) else "; the interval includes 0, so the sign is not settled"
        return (
            f"At its own best learning rate, batch {self.small} ends with a {self.metric} {abs(e.mean):.3f} {side} "
            f"than batch {self.large} ({fmt_estimate(e)}, paired by seed){sure}."
        )


def tuning(results: an.Results) -> Tuning | None:
    """None when the results hold no finished learning-rate search."""
    runs, tuned = results.runs, results.tuned
    if tuned.empty or vocab.ROLE not in runs or vocab.SEARCH_GROUP not in tuned:
        return None
    points = [
        p
        for group, rows in tuned.groupby(vocab.SEARCH_GROUP, sort=False)
        if (p := _point(results, group, rows)) is not None
    ]
    points.sort(key=lambda p: (p.context, p.batch_size))
    if not points:
        return None
    small, large, diff, metric = _small_vs_large(tuned, points)
    return Tuning(tuple(points), diff, small, large, metric)


def _point(results: an.Results, group: str, tuned_epochs: pd.DataFrame) -> TunedPoint | None:
    runs = results.runs
    trials = runs[(runs[vocab.ROLE] == vocab.SEARCH) & (runs[vocab.SEARCH_GROUP] == group)]
    last = an.at_epoch(tuned_epochs, None)
    if last.empty:
        return None
    best_lr = float(last["train.lr"].iloc[0])
    fixed = _fixed_runs(results.epochs, last)
    fixed_last = an.at_epoch(fixed, None) if not fixed.empty else fixed
    metric = scaling.metric_of(pd.concat([tuned_epochs, fixed]))
    tuned_val, fixed_val = _by_seed(last, metric), _by_seed(fixed_last, metric)
    return TunedPoint(
        batch_size=int(last[an.BATCH_SIZE].iloc[0]),
        context=_context(last, results.tuned),
        best_lr=best_lr,
        fixed_lr=float(fixed["train.lr"].iloc[0]) if not fixed.empty else None,
        trials=tuple(
            sorted(
                (float(r["train.lr"]), float(r.get(f"final_{metric}", math.nan)), str(r[vocab.STATUS]))
                for _, r in trials.iterrows()
            )
        ),
        tuned_val=estimate(tuned_val),
        fixed_val=estimate(fixed_val),
        change=estimate((tuned_val - fixed_val).dropna()),
        tuned_gap2=estimate(_by_seed(an.at_epoch(tuned_epochs, an.EPOCH_TWO), vocab.GAP)),
        fixed_gap2=estimate(_by_seed(an.at_epoch(fixed, an.EPOCH_TWO), vocab.GAP) if not fixed.empty else []),
        metric=metric,
        search_metric=_recorded(trials, vocab.SEARCH_METRIC) or "",
        lr_range=_lr_range(trials),
    )


def _recorded(trials: pd.DataFrame, name: str) -> Any:
    """A search setting runs.csv records on its trials (results written before it was recorded: None)."""
    if name not in trials or trials[name].isna().all():
        return None
    return trials[name].dropna().iloc[0]


def _lr_range(trials: pd.DataFrame) -> tuple[float, float] | None:
    low, high = _recorded(trials, vocab.SEARCH_LR_LOW), _recorded(trials, vocab.SEARCH_LR_HIGH)
    return None if low is None or high is None else (float(low), float(high))


def _others(table: pd.DataFrame) -> list[str]:
    return [c for c in an.setting_columns(table) if c != "train.lr"]


def _fixed_runs(grid_epochs: pd.DataFrame, tuned_last: pd.DataFrame) -> pd.DataFrame:
    """The grid's runs of the same point: every setting equal except the learning rate."""
    if grid_epochs.empty:
        return grid_epochs
    columns = [c for c in _others(tuned_last) if c in grid_epochs]
    want = set(an.row_key(tuned_last, columns))
    return grid_epochs[an.row_key(grid_epochs, columns).isin(want)]


def _by_seed(rows: pd.DataFrame, metric: str) -> pd.Series:
    if rows.empty:
        return pd.Series(dtype=float)
    return rows.groupby(vocab.SEED)[metric].mean()


def _context(last: pd.DataFrame, all_tuned: pd.DataFrame) -> str:
    varying = [c for c in an.varying(all_tuned, exclude=("train.lr", an.BATCH_SIZE))]
    return ", ".join(f"{c}={fmt_value(last[c].iloc[0])}" for c in varying)


def _small_vs_large(
    tuned: pd.DataFrame, points: list[TunedPoint]
) -> tuple[int | None, int | None, Estimate | None, str]:
    """The post's advice at tuned lrs: the best small batch against the best large one, in the first context,
    on the metric both points read (val_acc_recal only where both do).
    """
    context = points[0].context
    mine = [p for p in points if p.context == context]
    small = [p for p in mine if p.batch_size <= SMALL_BATCH]
    large = [p for p in mine if p.batch_size > SMALL_BATCH]
    if not small or not large:
        return None, None, None, vocab.VAL_ACC
    best_small = max(small, key=lambda p: p.tuned_val.mean)
    best_large = max(large, key=lambda p: p.tuned_val.mean)
    recal = best_small.metric == best_large.metric == vocab.VAL_ACC_RECAL
    metric = vocab.VAL_ACC_RECAL if recal else vocab.VAL_ACC
    last = an.at_epoch(tuned, None)
    values = {
        p.batch_size: _by_seed(last[matches(last[an.BATCH_SIZE], p.batch_size)], metric)
        for p in (best_small, best_large)
    }
    return (
        best_small.batch_size,
        best_large.batch_size,
        estimate((values[best_small.batch_size] - values[best_large.batch_size]).dropna()),
        metric,
    )


def describe(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) and not math.isnan(value) else "n/a"
