"""The critical batch size: the gradient noise scale B_simple, measured, against the steps to target.

McCandlish et al. (2018) predict S(B) = S_min (1 + B_noise / B) steps to a target, with
B_noise approximately the measured B_simple. This module reads B_simple from the runs that
measured it, predicts each batch size's steps from the nearest smaller batch size that
reached the target with every seed, and says where the prediction holds or misses. How far
training got is read on the curve's own metric (`scaling.Curve.metric`: val_acc_recal where
recorded), the one its steps to target are read on. Every number a sentence quotes is a field
here, so the report says only what the data support.
pandas and numpy only; docs/report.md ("Gradient noise scale") explains the readings.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sweep import analysis as an
from sweep import vocab
from sweep.analysis import scaling, scaling_fit
from sweep.analysis.estimates import Estimate, estimate

BARELY_TRAINED = scaling.TARGET_LADDER[0]  # a run whose best metric stays below the lowest target


@dataclass(frozen=True)
class NoiseCell:
    """B_simple over seeds at one batch size and epoch end, with the curve's metric there (how far training got)."""

    batch_size: int
    epoch: int
    b_simple: Estimate
    val: Estimate  # the curve's metric: val_acc_recal where recorded, else val_acc


@dataclass(frozen=True)
class NoiseReading:
    """B_simple of one curve (one lr condition): per epoch, and at each run's last record."""

    curve: scaling.Curve
    cells: tuple[NoiseCell, ...]
    last: dict[int, Estimate]  # batch size -> B_simple at the runs' last record
    last_low: float  # smallest per-seed B_simple at a last record
    last_high: float
    barely: dict[int, tuple[float, float, float, float]]  # batch -> (best val lo, hi, B_simple lo, hi)


def noise_reading(curve: scaling.Curve) -> NoiseReading | None:
    """None when the curve's runs did not measure B_simple."""
    epochs, metric = curve.epochs, curve.metric
    if vocab.NOISE_SCALE not in epochs or epochs[vocab.NOISE_SCALE].isna().all():
        return None
    measured = epochs[epochs[vocab.NOISE_SCALE].notna()]
    ends = measured[np.isclose(measured[vocab.EPOCH] % 1, 0)]
    cells = tuple(
        NoiseCell(int(b), int(e), estimate(rows[vocab.NOISE_SCALE]), estimate(rows[metric]))
        for (b, e), rows in ends.groupby([an.BATCH_SIZE, vocab.EPOCH], sort=True)
    )
    last = measured.loc[measured.groupby(vocab.RUN_ID)[vocab.STEP].idxmax()]
    best = epochs.groupby(vocab.RUN_ID)[metric].max()
    last = last.assign(best_val=last[vocab.RUN_ID].map(best))
    barely = {
        int(b): (
            float(rows["best_val"].min()),
            float(rows["best_val"].max()),
            float(rows[vocab.NOISE_SCALE].min()),
            float(rows[vocab.NOISE_SCALE].max()),
        )
        for b, rows in last.groupby(an.BATCH_SIZE)
        if (rows["best_val"] < BARELY_TRAINED).all()
    }
    return NoiseReading(
        curve=curve,
        cells=cells,
        last={int(b): estimate(rows[vocab.NOISE_SCALE]) for b, rows in last.groupby(an.BATCH_SIZE)},
        last_low=float(last[vocab.NOISE_SCALE].min()),
        last_high=float(last[vocab.NOISE_SCALE].max()),
        barely=barely,
    )


def at_target(curve: scaling.Curve, target: float) -> dict[int, Estimate]:
    """B_simple per batch size over seeds at the record where each run first reached `target` on the curve's metric:
    where steps to target, and so B_crit, are read (B_simple changes as training goes on). A run that never reached
    it, or measured no B_simple there, gives none.
    """
    epochs = curve.epochs
    if vocab.NOISE_SCALE not in epochs:
        return {}
    hit = epochs[epochs[curve.metric] >= target]  # >=, as `reach` reads a target reached
    first = hit.loc[hit.groupby(vocab.RUN_ID)[vocab.STEP].idxmin()]
    return {int(b): estimate(rows[vocab.NOISE_SCALE]) for b, rows in first.groupby(an.BATCH_SIZE, sort=True)}


# --- the prediction S(B) = S_min (1 + B_noise / B)

CONSISTENT, MORE_STEPS, FEWER_STEPS, MISSED, BEYOND, UNDECIDED = (
    "consistent",
    "more steps than predicted",
    "fewer steps than predicted",
    "missed within budget",
    "beyond the budget",
    "undecided",
)
FAILS = (MORE_STEPS, MISSED)  # the batch size gains less than B_noise predicts


@dataclass(frozen=True)
class Prediction:
    """Steps to a target at one batch size, predicted from a smaller one with B_noise in [b_low, b_high]."""

    target: float
    batch_size: int
    anchor: int  # the nearest smaller batch size where every seed reached the target
    anchor_steps: Estimate
    low: float  # predicted steps, over the anchor's interval and the B_noise range
    high: float
    row: scaling.TargetRow  # what was measured at batch_size
    outcome: str


def predicted_range(anchor: int, steps: Estimate, batch: int, b_low: float, b_high: float) -> tuple[float, float]:
    """S(B) = S(B0) (1 + Bn/B) / (1 + Bn/B0) at the corners of S(B0)'s interval and [b_low, b_high]."""
    values = [s * (1 + bn / batch) / (1 + bn / anchor) for s in (steps.low, steps.high) for bn in (b_low, b_high)]
    return min(values), max(values)


def _outcome(row: scaling.TargetRow, low: float, high: float) -> str:
    if row.not_reached:
        if high < row.budget_steps:
            return MISSED
        return BEYOND if low >= row.budget_steps else UNDECIDED
    s = row.steps
    if not (math.isfinite(s.low) and math.isfinite(s.high)):
        return UNDECIDED
    if s.low > high:
        return MORE_STEPS
    return FEWER_STEPS if s.high < low else CONSISTENT


def predictions(rows: list[scaling.TargetRow], b_low: float, b_high: float) -> list[Prediction]:
    """Each batch size above the smallest that every seed reached, per target, predicted from its anchor."""
    found = []
    for target in sorted({r.target for r in rows}):
        at = sorted((r for r in rows if r.target == target), key=lambda r: r.batch_size)
        for row in at:
            anchors = [
                a for a in at if a.batch_size < row.batch_size and not a.not_reached and math.isfinite(a.steps.low)
            ]
            if not anchors:
                continue
            a = anchors[-1]
            low, high = predicted_range(a.batch_size, a.steps, row.batch_size, b_low, b_high)
            found.append(
                Prediction(target, row.batch_size, a.batch_size, a.steps, low, high, row, _outcome(row, low, high))
            )
    return found


# --- words: every number below is a field above


def _range(values: list[float], digits: int = 0) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if f"{lo:.{digits}f}" == f"{hi:.{digits}f}" else f"{lo:.{digits}f}-{hi:.{digits}f}"


def condition(curve: scaling.Curve) -> str:
    """The reading's conditions: lr, results folder, seeds, metric."""
    return f"lr {curve.lr} ({curve.source}, seeds {', '.join(map(str, curve.seeds))}; read on {curve.metric})"


def noise_sentences(reading: NoiseReading) -> list[str]:
    """What B_simple is at the last record, and where it was measured on a model that barely trained."""
    per_batch = "; ".join(f"batch {b}: {_fmt(e)}" for b, e in sorted(reading.last.items()))
    said = [
        f"At {condition(reading.curve)}, B_simple at each run's last record is {per_batch}; the per-seed values "
        f"range from {reading.last_low:.0f} to {reading.last_high:.0f}."
    ]
    for b, (vlo, vhi, blo, bhi) in sorted(reading.barely.items()):
        said.append(
            f"At batch {b} these runs never reach {reading.curve.metric} {BARELY_TRAINED:g} "
            f"(best {_range([vlo, vhi], 3)}), so their "
            f"B_simple ({_range([blo, bhi])}) describes a model that has barely trained."
        )
    return said


def _fmt(e: Estimate) -> str:
    if e.n < 2:
        return f"{e.mean:.0f} (1 seed)"
    return f"{e.mean:.0f} [{e.low:.0f}, {e.high:.0f}]"


def _measured(p: Prediction, metric: str) -> str:
    row = p.row
    if p.outcome == MISSED:
        best = _range(list(row.best_val_missed), 3)
        return (
            f"{row.not_reached} of {row.n_runs} seeds had not reached it after {row.budget_steps} steps "
            f"(their best {metric} {best})"
        )
    return f"it took {_fmt(row.steps)} steps ({row.n_reached} of {row.n_runs} seeds)"


def prediction_sentence(p: Prediction, reading: NoiseReading) -> str:
    metric = reading.curve.metric
    return (
        f"At batch {p.batch_size}, S = S_min (1 + B_noise / B) with B_noise = B_simple "
        f"({reading.last_low:.0f}-{reading.last_high:.0f}), from batch {p.anchor}'s {_fmt(p.anchor_steps)} steps, "
        f"predicts {metric} {p.target:g} within {p.low:.0f}-{p.high:.0f} steps; {_measured(p, metric)}: {p.outcome}."
    )


def conclusion(reading: NoiseReading, preds: list[Prediction], fits: list[scaling_fit.Fit]) -> list[str]:
    """The noise-scale section's conclusion, from the predictions' outcomes and the fits' intervals."""
    said: list[str] = []
    fails = [p for p in preds if p.outcome in FAILS]
    if fails:
        first = min(p.batch_size for p in fails)
        said += [prediction_sentence(p, reading) for p in fails if p.batch_size == first]
        below = f", below every measured B_simple ({reading.last_low:.0f})" if first < reading.last_low else ""
        said.append(
            f"So at batch {first} the steps to target do not fall as B_noise = B_simple predicts{below}: "
            f"the gain from a larger batch ends earlier than the measured noise scale says."
        )
    held = [p for p in preds if p.outcome in (CONSISTENT, FEWER_STEPS)]
    if held:
        where = ", ".join(f"batch {p.batch_size} at {p.target:g}" for p in held)
        said.append(
            f"The prediction and the measured steps' interval overlap (or the batch needed fewer steps) at {where}: "
            "consistent with B_simple there, which these few seeds do not pin down."
        )
    open_ = [p for p in preds if p.outcome in (UNDECIDED, BEYOND)]
    if open_:
        where = ", ".join(f"batch {p.batch_size} at {p.target:g}" for p in open_)
        said.append(f"Not decided within these runs' budget or intervals: {where}.")
    if not preds:
        said.append("No batch size has a smaller one that reached a target with every seed: nothing to predict from.")
    said.append(fit_sentence(reading, fits))
    return said


def fit_sentence(reading: NoiseReading, fits: list[scaling_fit.Fit]) -> str:
    identified = [f for f in fits if f.identified]
    if not identified:
        reason = fits[0].problem if fits else "no target was chosen"
        return (
            f"The fit of S_min and B_crit for these runs is not identified at any target ({reason}), "
            "so no fitted critical batch size is compared with B_simple."
        )
    parts = []
    for f in identified:
        if f.b_crit_high < reading.last_low:
            side = "lies below every measured B_simple"
        elif f.b_crit_low > reading.last_high:
            side = "lies above every measured B_simple"
        else:
            side = "overlaps the range of B_simple"
        parts.append(
            f"at {reading.curve.metric} {f.target:g}, B_crit {f.b_crit:.0f} [{f.b_crit_low:.0f}, {f.b_crit_high:.0f}] "
            f"{side}"
        )
    return f"Fitted critical batch size: {'; '.join(parts)}."
