"""Reproducing the post's numbers: every setting with batch 8 and 64 at epoch 2, ranked by its largest
distance from the post's four numbers (train_acc and val_acc at each batch size), those showing the
post's pattern first.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, column
from sweep.analysis.estimates import Estimate, estimate
from sweep.analysis.selection import where
from sweep.claims.findings import Part, shows_pattern
from sweep.claims.maps import groups_everywhere
from sweep.claims.registry import the

# The post's epoch-2 numbers: (batch size, metric) -> value.
POST_NUMBERS = {
    (64, vocab.TRAIN_ACC): 0.80,
    (64, vocab.VAL_ACC): 0.06,
    (8, vocab.TRAIN_ACC): 0.60,
    (8, vocab.VAL_ACC): 0.60,
}
NEAR = 0.10  # "comes within 0.1 of each number"


@dataclass(frozen=True)
class Candidate:
    """One setting with batch 8 and 64: its four epoch-2 numbers over seeds, and their distance from the post's."""

    label: str
    numbers: dict[tuple[int, str], Estimate]

    @property
    def distance(self) -> float:
        return max(abs(self.numbers[k].mean - v) for k, v in POST_NUMBERS.items())

    @property
    def pattern(self) -> bool:
        """The post's pattern in seed means (`shows_pattern`)."""
        gap = {bs: self.numbers[(bs, vocab.TRAIN_ACC)].mean - self.numbers[(bs, vocab.VAL_ACC)].mean for bs in (8, 64)}
        return shows_pattern(gap[64], gap[8])

    def farthest(self) -> str:
        k = max(POST_NUMBERS, key=lambda k: abs(self.numbers[k].mean - POST_NUMBERS[k]))
        return f"{k[1]} at batch {k[0]}"

    def covered(self) -> int:
        """How many of the post's numbers lie inside this setting's 95% interval."""
        return sum(e.low <= POST_NUMBERS[k] <= e.high for k, e in self.numbers.items() if math.isfinite(e.low))


def candidates(table: pd.DataFrame) -> list[Candidate]:
    """Every setting with batch 8 and 64 at epoch 2: those showing the post's pattern first, each part
    closest to the post's numbers first (a setting can be near the four numbers without their pattern).
    """
    found = []
    for _, sel in groups_everywhere(the(Part.PICTURE), table):
        numbers = {
            (bs, metric): estimate(where(sel.rows, BATCH_SIZE, bs)[column(metric, "epoch2")])
            for bs, metric in POST_NUMBERS
        }
        found.append(Candidate(sel.tested_at(), numbers))
    return sorted(found, key=lambda c: (not c.pattern, c.distance))  # the pattern first, then the numbers
