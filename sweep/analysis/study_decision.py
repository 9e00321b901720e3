"""The study's decision rule on intervals: which batch size to recommend, never by point means alone.

- *The margin* (`margin`): the accuracy a larger batch size may give up against the best, `--tolerance`
  (default 0.02, two points of accuracy), stated with how many validation images it is. A margin finer than
  one validation image (1 / val_samples) cannot be measured on that many images; it is widened to one image
  and said.
- *Non-inferiority* (`compare`): batch size B is non-inferior to the best (the highest mean, the reference)
  when a one-sided t-test over seeds rejects "best - B >= margin" at ALPHA (0.05): paired by seed where two
  or more seeds are shared (the seed fixes the initial weights and the data order), else Welch's. The mirror
  test (H1: best - B > margin) shows it worse by more than the margin; neither: these seeds do not separate it.
- *At the ceiling or at chance* (`bounded`): where every batch size's interval lies at or above CEILING
  (0.99), or every one's within the margin of chance (1 / classes), the metric cannot separate batch sizes:
  said; at the ceiling the pick is the fastest to the target, at chance there is none.
- *The pick* (`decide`): the largest batch size shown non-inferior, when no larger batch size is unseparated.
  Otherwise the seeds cannot separate the candidates (every batch size not shown worse), and the pick is the
  one of them fastest to the target (every run reached it, fewest mean seconds); where none has a time to
  target, the largest shown non-inferior, said.

scipy's t-tests; no TensorFlow.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

import numpy as np
from scipy import stats

from sweep.analysis.estimates import ALPHA, Estimate, estimate
from sweep.analysis.study import Rung


class Verdict(Enum):
    BEST = "the best"
    NON_INFERIOR = "non-inferior"
    WORSE = "worse by more than the margin"
    UNSEPARATED = "not separated by these seeds"


CEILING = 0.99  # an interval at or above it: the metric has no room left to separate batch sizes


class Basis(Enum):
    """What decided the pick."""

    NON_INFERIORITY = "the largest batch size non-inferior to the best"
    TIME_TO_TARGET = "the fastest to the target of the batch sizes these seeds cannot separate"
    LARGEST_SHOWN = "the largest batch size shown non-inferior (no time to target to decide by)"
    CEILING = "every batch size at the ceiling: the fastest to the target"
    AT_CHANCE = "every batch size at chance: no pick"


@dataclass(frozen=True)
class Margin:
    value: float  # what the tests use
    asked: float  # --tolerance
    images: int | None  # validation images a run is read on (None: unknown)

    @property
    def widened(self) -> bool:
        return self.value > self.asked

    def words(self) -> str:
        if self.widened and self.images:
            return (
                f"{self.value:.3g}, one validation image of {self.images} (the tolerance {self.asked:g} is finer than "
                "one image, which no run can measure: widened)"
            )
        images = f", {self.value * self.images:.3g} of {self.images} validation images" if self.images else ""
        return f"{self.value:g} (--tolerance: the accuracy a larger batch size may give up{images})"


def margin(tolerance: float, images: int | None) -> Margin:
    """The tolerance, widened to one validation image where it is finer."""
    one = 1.0 / images if images else 0.0
    return Margin(max(tolerance, one), tolerance, images)


@dataclass(frozen=True)
class Comparison:
    """The best against one batch size: best - it, and the two one-sided tests against the margin."""

    batch_size: int
    gap: Estimate  # best - this batch size, per seed pair (paired) or of the means (Welch: n is the smaller n)
    paired: bool
    p_within: float  # H1: best - this < margin (non-inferior)
    p_worse: float  # H1: best - this > margin
    verdict: Verdict

    def test_words(self) -> str:
        kind = "paired" if self.paired else "Welch"
        return f"one-sided {kind} t-test p = {self.p_within:.2g}"


def compare(best: Rung, other: Rung, delta: float, alpha: float = ALPHA) -> Comparison:
    """The one-sided tests of best - other against `delta` over seeds (paired where 2+ seeds are shared)."""
    a, b = best.seeds(), other.seeds()
    shared = sorted(a.keys() & b.keys())
    if len(shared) >= 2:
        d = np.array([a[s] - b[s] for s in shared])
        p_within = _p(stats.ttest_1samp(d, delta, alternative="less"))
        p_worse = _p(stats.ttest_1samp(d, delta, alternative="greater"))
        gap, paired = estimate(d), True
    elif len(a) >= 2 and len(b) >= 2:
        x, y = np.array(list(a.values())) - delta, np.array(list(b.values()))
        p_within = _p(stats.ttest_ind(x, y, equal_var=False, alternative="less"))
        p_worse = _p(stats.ttest_ind(x, y, equal_var=False, alternative="greater"))
        gap, paired = estimate([]), False
    else:
        p_within = p_worse = math.nan
        gap, paired = estimate([a[s] - b[s] for s in shared]), bool(shared)
    if p_within < alpha:
        verdict = Verdict.NON_INFERIOR
    elif p_worse < alpha:
        verdict = Verdict.WORSE
    else:
        verdict = Verdict.UNSEPARATED
    return Comparison(other.batch_size, gap, paired, p_within, p_worse, verdict)


def _p(result: Any) -> float:
    """A test's p-value; NaN (no decision) where the differences have no spread and equal the margin."""
    p = float(result.pvalue)
    return p if math.isfinite(p) else math.nan


@dataclass(frozen=True)
class Decision:
    best: Rung
    chosen: Rung
    basis: Basis
    margin: Margin
    comparisons: tuple[Comparison, ...]  # every batch size but the best, smallest first

    def of(self, batch: int) -> Comparison | None:
        return next((c for c in self.comparisons if c.batch_size == batch), None)

    def with_verdict(self, verdict: Verdict) -> tuple[int, ...]:
        return tuple(c.batch_size for c in self.comparisons if c.verdict is verdict)


def bounded(rungs: Sequence[Rung], chance: float | None, delta: float) -> Basis | None:
    """CEILING where every batch size's interval (its mean with one seed) is at or above CEILING; AT_CHANCE where
    every one's upper end is within `delta` of `chance`; else None.
    """
    low = [r.val.low if r.val.n > 1 else r.val.mean for r in rungs]
    high = [r.val.high if r.val.n > 1 else r.val.mean for r in rungs]
    if all(v >= CEILING for v in low):
        return Basis.CEILING
    if chance is not None and all(v <= chance + delta for v in high):
        return Basis.AT_CHANCE
    return None


def decide(
    rungs: Sequence[Rung],
    delta: Margin,
    fastest: Callable[[list[Rung]], Rung | None],
    chance: float | None = None,
) -> Decision:
    """The pick among `rungs` (each with a run that trained); `fastest` picks by time to target among some;
    `chance`: the metric's chance level (1 / classes), where known.
    """
    best = max(rungs, key=lambda r: r.val.mean)  # the reference the tests compare against, not the pick
    found = tuple(compare(best, r, delta.value) for r in sorted(rungs, key=lambda r: r.batch_size) if r is not best)
    edge = bounded(rungs, chance, delta.value)
    if edge is Basis.CEILING:
        return Decision(best, fastest(list(rungs)) or best, edge, delta, found)
    if edge is Basis.AT_CHANCE:
        return Decision(best, best, edge, delta, found)
    verdict = {c.batch_size: c.verdict for c in found} | {best.batch_size: Verdict.BEST}
    shown = max((r for r in rungs if verdict[r.batch_size] in (Verdict.BEST, Verdict.NON_INFERIOR)), key=_size)
    larger = [r for r in rungs if verdict[r.batch_size] is Verdict.UNSEPARATED and r.batch_size > shown.batch_size]
    if not larger:
        return Decision(best, shown, Basis.NON_INFERIORITY, delta, found)
    candidates = [r for r in rungs if verdict[r.batch_size] is not Verdict.WORSE]
    quickest = fastest(candidates)
    if quickest is None:
        return Decision(best, shown, Basis.LARGEST_SHOWN, delta, found)
    return Decision(best, quickest, Basis.TIME_TO_TARGET, delta, found)


def _size(rung: Rung) -> int:
    return rung.batch_size
