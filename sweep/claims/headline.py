"""C1's map read setting by setting: where the post's epoch-2 picture shows, raw and recalibrated.

Each cell of the C1 map where both batch sizes learned becomes a `Setting`: the large batch's steps by
epoch 2, the weight BatchNorm's moving statistics still give their initial values (momentum^steps), and
the gaps of both batch sizes, raw (the post's reading) and recalibrated (`*_recal`: the same weights
without BatchNorm's lag). `sweep.report.sections.headline` puts them into words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, column
from sweep.analysis.estimates import Estimate, estimate
from sweep.analysis.outcome import Outcome
from sweep.analysis.selection import LR, OPTIMIZER, fmt_value, where
from sweep.claims.checks import BN_MOMENTUM, bn_momentum
from sweep.claims.findings import FAR_GAP, Part
from sweep.claims.maps import Cell, ConditionMap
from sweep.claims.registry import the

BN = "model.batchnorm"
SMALL, LARGE = the(Part.PICTURE).needs.values  # C1 compares batch 8 with batch 64


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
    shows: bool  # the post's picture at its size here, as the map says (every interval beyond its threshold)
    weight_small: float | None  # batch 8's momentum ** steps by epoch 2
    # the cell's settings but BatchNorm's momentum: cells alike in it trained the same weights (training normalises
    # with batch statistics), so their recalibrated numbers are one
    twin: str
    optimizer: str  # "adam, lr 0.001": what the figure colours by

    @property
    def closes(self) -> bool:
        """Recalibrated, batch 64's gap is no longer far above: its 95% interval lies wholly below the threshold."""
        return math.isfinite(self.recal_gap.high) and self.recal_gap.high < FAR_GAP.value


def settings(m: ConditionMap) -> list[Setting]:
    """The map's cells where both batch sizes learned as headline settings (a cell at chance shows no picture to
    explain); empty when their runs did not record recalibrated numbers.
    """
    recal, cells = column(vocab.EVAL_GAP_RECAL, "epoch2"), m.comparing()
    if not cells or any(recal not in c.rows or c.rows[recal].isna().any() for c in cells):
        return []
    return [_setting(c) for c in cells]


def _setting(cell: Cell) -> Setting:
    large, small = where(cell.rows, BATCH_SIZE, LARGE), where(cell.rows, BATCH_SIZE, SMALL)
    steps = float(large[column(vocab.STEP, "epoch2")].mean())
    steps_small = float(small[column(vocab.STEP, "epoch2")].mean())
    twin = ", ".join(f"{k}={v}" for k, v in cell.conditions if k != BN_MOMENTUM)
    first = cell.rows.iloc[0]
    optimizer = f"{first.get(OPTIMIZER, 'adam')}, lr {fmt_value(first.get(LR, ''))}"
    return Setting(
        cell.label(),
        steps,
        _weight(large, steps),
        estimate(large[column(vocab.GAP, "epoch2")]),
        estimate(small[column(vocab.GAP, "epoch2")]),
        estimate(large[column(vocab.EVAL_GAP_RECAL, "epoch2")]),
        estimate(small[column(vocab.EVAL_GAP_RECAL, "epoch2")]),
        cell.outcome is Outcome.HOLDS,
        _weight(small, steps_small),
        twin,
        optimizer,
    )


def _weight(rows: pd.DataFrame, steps: float) -> float | None:
    if BN in rows and not bool(rows[BN].astype(str).eq("True").all()):
        return None
    return bn_momentum(rows) ** steps
