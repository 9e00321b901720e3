"""C1's headline: where the post's epoch-2 picture appears over a condition map, and why.

The post saw batch 64 far above and batch 8 close at epoch 2. Over the C1 map's settings this
module says where that picture shows (raw, as the post read it), names the mechanism the
attribution points to, BatchNorm's moving statistics (after n optimizer steps at momentum m
they still weigh their initial values by m^n, and batch 64 takes 8x fewer steps per epoch than
batch 8), and tests it: with the statistics recomputed for the same weights (`*_recal`), does
batch 64's gap close? What remains after recalibration is generalisation. Every number is read
from the map's cells; nothing is typed in.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, column
from sweep.analysis.estimates import Estimate, estimate, fmt_estimate
from sweep.analysis.selection import where
from sweep.report.checks import bn_momentum
from sweep.report.findings import CLOSE_GAP, FAR_GAP, shows_pattern
from sweep.report.maps import Cell, ConditionMap

BN = "model.batchnorm"
LARGE, SMALL = 64, 8


@dataclass(frozen=True)
class Setting:
    """One cell of the C1 map, read for the headline."""

    label: str
    steps: float  # batch 64's optimizer steps by epoch 2
    weight: float | None  # momentum ** steps: the initial statistics' weight left; None without BatchNorm
    gap: Estimate  # batch 64's gap (running train_acc - val_acc), the post's reading
    gap_small: Estimate  # batch 8's
    recal_gap: Estimate  # batch 64's eval_gap_recal: the same weights without BatchNorm's lag
    recal_gap_small: Estimate  # batch 8's, for comparison

    @property
    def shows(self) -> bool:
        """The post's picture in seed means (as the reproduction ranks settings; with 3 seeds an interval inside
        the +-0.1 band is rarely reached).
        """
        return shows_pattern(self.gap.mean, self.gap_small.mean)


def settings(m: ConditionMap) -> list[Setting]:
    """The map's cells as headline settings; empty when its runs did not record recalibrated numbers."""
    recal, cells = column(vocab.EVAL_GAP_RECAL, "epoch2"), m.trained()
    if not cells or any(recal not in c.rows or c.rows[recal].isna().any() for c in cells):
        return []
    return [_setting(c) for c in cells]


def _setting(cell: Cell) -> Setting:
    large, small = where(cell.rows, BATCH_SIZE, LARGE), where(cell.rows, BATCH_SIZE, SMALL)
    steps = float(large[column(vocab.STEP, "epoch2")].mean())
    return Setting(
        cell.label(),
        steps,
        _weight(large, steps),
        estimate(large[column(vocab.GAP, "epoch2")]),
        estimate(small[column(vocab.GAP, "epoch2")]),
        estimate(large[column(vocab.EVAL_GAP_RECAL, "epoch2")]),
        estimate(small[column(vocab.EVAL_GAP_RECAL, "epoch2")]),
    )


def _weight(rows: pd.DataFrame, steps: float) -> float | None:
    if BN in rows and not bool(rows[BN].astype(str).eq("True").all()):
        return None
    return bn_momentum(rows) ** steps


def sentences(m: ConditionMap) -> list[str]:
    """The headline: where the picture shows, the mechanism's numbers there and elsewhere, and the test."""
    found = settings(m)
    if not found:
        return []
    shows = [s for s in found if s.shows]
    head = (
        f"Over the {len(found)} settings of {m.source} whose runs trained, the post's picture (in seed means, "
        f"batch {LARGE}'s gap above {FAR_GAP.value:g} while batch {SMALL}'s is within +-{CLOSE_GAP.value:g}, at "
        f"epoch 2, read as the post read it) shows at {len(shows)}"
    )
    if not shows:
        return [head + "."]
    return [f"{head}: {_labels(shows)}.", _mechanism(found), _test(shows)]


def _labels(chosen: Sequence[Setting]) -> str:
    return "; ".join(s.label for s in chosen)


def _span(values: Sequence[float], digits: int = 2) -> str:
    low, high = min(values), max(values)
    return f"{low:.{digits}f}" if f"{low:.{digits}f}" == f"{high:.{digits}f}" else f"{low:.{digits}f}-{high:.{digits}f}"


def _mechanism(found: Sequence[Setting]) -> str:
    """Batch 64's gap against the weight its moving statistics still give their initial values, raw and
    recalibrated: if BatchNorm's lag makes the picture, the raw gap follows the weight and the other does not.
    """
    by_weight: dict[str, list[Setting]] = {}
    for s in found:
        by_weight.setdefault("no BatchNorm" if s.weight is None else f"{s.weight:.2f}", []).append(s)
    order = sorted(by_weight, key=lambda w: (w == "no BatchNorm", float(w) if w != "no BatchNorm" else 0.0))

    def mean(chosen: list[Setting], pick: str) -> float:
        return sum(getattr(s, pick).mean for s in chosen) / len(chosen)

    raw = ", ".join(f"{mean(by_weight[w], 'gap'):.2f} {_weight_words(w)}" for w in order)
    recal = ", ".join(f"{mean(by_weight[w], 'recal_gap'):.2f}" for w in order)
    steps = _span([s.steps for s in found], 0)
    return (
        f"The mechanism: after batch {LARGE}'s {steps} optimizer steps by epoch 2, BatchNorm's moving statistics "
        f"still weigh their initial values by momentum^steps. Batch {LARGE}'s gap, averaged over the settings at "
        f"each weight, is {raw}; recalibrated (eval_gap_recal), {recal} in the same order."
    )


def _weight_words(weight: str) -> str:
    return "without BatchNorm" if weight == "no BatchNorm" else f"at weight {weight}"


def _test(shows: Sequence[Setting]) -> str:
    """Does recomputing BatchNorm's statistics for the same weights close batch 64's gap?"""
    closed = [s for s in shows if math.isfinite(s.recal_gap.high) and s.recal_gap.high < FAR_GAP.value]
    listed = "; ".join(
        f"{s.label}: gap {fmt_estimate(s.gap)} raw, eval_gap_recal {fmt_estimate(s.recal_gap)} at batch {LARGE} "
        f"and {s.recal_gap_small.mean:.2f} at batch {SMALL}"
        for s in shows
    )
    verdict = (
        f"at all {len(shows)} the recalibrated gap's 95% interval lies below {FAR_GAP.value:g}: the picture is "
        "BatchNorm's lag, not a failure to generalise"
        if len(closed) == len(shows)
        else f"at {len(closed)} of {len(shows)} the recalibrated gap's 95% interval lies below {FAR_GAP.value:g}"
    )
    return (
        f"Recomputing BatchNorm's statistics for the same weights (recalibrated; what remains is generalisation), "
        f"{verdict} ({listed})."
    )
