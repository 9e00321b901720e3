"""Estimates over seeds with Student-t intervals, and three-valued checks on them.

Pure statistics: numbers in, numbers and words out (numpy and scipy only, no tables).

- The unit of replication is the seed; an estimate's n is its number of seeds
  (or of per-seed differences, for paired comparisons).
- The 95% interval is Student's t over seeds: mean +- t(0.975, n-1) * sd / sqrt(n).
  It assumes the seed-to-seed values are roughly normal and independent; with
  n = 3 the multiplier is 4.30 (not 1.96), so intervals are wide on purpose. A
  bootstrap over 3 seeds would be narrower only because it cannot see the tails.
- A check says where a number must lie for a claim to hold. Its p-value is the
  t-test of the same mean, sd and n as its interval: twice the smaller one-sided
  p-value of "it holds" and "it fails" (for a band, "it holds" is TOST: the larger
  of its two one-sided p-values). So p < 0.05 exactly when the 95% interval lies
  wholly inside (holds) or wholly outside (fails) the region. A check with a
  `margin` also fails when the number lies wholly within `margin` of its bound on
  the holding side: an effect that small is no effect (equivalence at that margin).
- Each side is decided at its own level (`Check.level_holds`, `level_fails`), which
  the claim it belongs to sets (`sweep.claims.family`: error control per claim).
- Values that are bounds of the truth (`Bound`: a run that missed a target counts its whole budget) decide
  only the side the bound makes safe.
- `sweep.analysis.power` turns an undecided check into the seeds that would decide it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum

import numpy as np
from scipy.special import (  # scipy.stats would add a second of import time
    stdtr,  # the t distribution's CDF
    stdtrit,  # its quantile
)

from sweep.analysis.outcome import Outcome

ALPHA = 0.05  # a p-value below it decides a check: the 95% interval excludes the threshold
CONFIDENCE = 1 - ALPHA


@dataclass(frozen=True)
class Estimate:
    """Mean over seeds (or over per-seed differences) with a Student-t interval."""

    mean: float
    sd: float
    n: int
    low: float
    high: float


def fmt_estimate(e: Estimate) -> str:
    """ "0.147 [0.116, 0.179] (n=3)", as the report writes every estimate."""
    if e.n == 0:
        return "no data"
    if e.n == 1:
        return f"{e.mean:.3f} (1 seed, no interval)"
    return f"{e.mean:.3f} [{e.low:.3f}, {e.high:.3f}] (n={e.n})"


@functools.lru_cache(maxsize=4096)  # a report asks for the same few n thousands of times
def t_multiplier(n: int, confidence: float = CONFIDENCE) -> float:
    """t(1 - alpha/2, n - 1): 12.71 at n=2, 4.30 at n=3, 2.26 at n=10."""
    return float(stdtrit(n - 1, 0.5 + confidence / 2)) if n > 1 else math.nan


def estimate(values: Iterable[float], confidence: float = CONFIDENCE) -> Estimate:
    # an array or a Series converts directly; copying it into a list first cost more than the statistics
    x = np.asarray(values if hasattr(values, "__array__") else list(values), dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, math.nan, math.nan)
    mean = float(x.mean())
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    half = t_multiplier(n, confidence) * sd / math.sqrt(n) if n > 1 else math.nan
    return Estimate(mean, sd, n, mean - half, mean + half)


class Bound(Enum):
    """What a check's per-seed values are: the truth, or bounds of it. A run that did not reach a target within
    its budget took at least its whole budget: that value is a lower bound, and a ratio with it on top is too.
    """

    EXACT = "exact"
    LOWER = "lower bounds"  # the true mean is at or above: only "above a bound" can be shown
    UPPER = "upper bounds"  # the true mean is at or below: only "below a bound" can be shown
    MIXED = "bounds both ways"  # neither side can be shown


@dataclass(frozen=True)
class Key:
    """What a check (or an evidence row) estimates, as data: the column it reads and where, e.g. gap at
    batch_size=64, epoch 2. Its label is words for readers; code that must know which check it holds (the
    looks of `run --until-decided`, decisions.csv read back, the answer's sentences) compares keys.
    """

    metric: str
    at: tuple[tuple[str, str], ...] = ()

    def renamed(self, names: Mapping[str, str]) -> Key:
        """The key with its metric renamed (val_acc -> val_acc_recal where the recalibrated numbers are read)."""
        return dataclasses.replace(self, metric=names.get(self.metric, self.metric))

    def __str__(self) -> str:
        """ "gap|batch_size=64|epoch=2": decisions.csv's check_id column."""
        return self.metric + "".join(f"|{name}={value}" for name, value in self.at)


@dataclass(frozen=True)
class Check:
    """The claim holds for this number when it lies in the open interval (low, high).

    `margin` (one-bound checks only): the check also fails when the number lies wholly within `margin` of its
    bound on the holding side (below low + margin, or above high - margin): no effect worth the name.
    `level_holds` and `level_fails` are the two-sided levels each side is decided at (ALPHA alone; the claim's
    rule sets them: `sweep.claims.family.controlled`); `sweep.analysis.power` plans at the same levels.
    """

    label: str
    estimate: Estimate
    low: float = -math.inf
    high: float = math.inf
    margin: float = 0.0
    level_holds: float = ALPHA
    level_fails: float = ALPHA
    # After `run --until-decided` (optional stopping) the fixed-n p-value is not valid; the check's sequential
    # p-value (sweep.analysis.sequential: min over planned looks of p / share) is, whenever the looks stopped.
    p_sequential: float | None = None
    side_sequential: Outcome = Outcome.UNDECIDED  # the side the look that gave it pointed to (UNDECIDED: not recorded)
    key: Key | None = None  # what it estimates; None for a one-off check that nothing looks up (`ident`)
    bound: Bound = Bound.EXACT  # values that are bounds (a target not reached) decide one side only
    short: str = ""  # the label in a few words, for the first screen ("" : the label itself)

    @property
    def ident(self) -> Key:
        """The check's identity: its key (a one-off check without one is known by its label alone)."""
        return self.key if self.key is not None else Key(self.label)

    @property
    def brief(self) -> str:
        return self.short or self.label

    def p_value(self) -> tuple[float, Outcome]:
        """(p, side): the two-sided p-value and the outcome it points to (HOLDS or FAILS; UNDECIDED with no p);
        the sequential p-value where the check was continued with `run --until-decided`.
        """
        holds, fails = self._one_sided()
        fixed = Outcome.UNDECIDED
        if math.isfinite(holds) and math.isfinite(fails):
            fixed = Outcome.HOLDS if holds < fails else Outcome.FAILS
        if self.p_sequential is not None and math.isfinite(self.p_sequential):
            side = self.side_sequential if self.side_sequential.decided else fixed
            return (self.p_sequential, side) if side.decided else (math.nan, Outcome.UNDECIDED)
        if not fixed.decided:
            return math.nan, Outcome.UNDECIDED
        sides = ((Outcome.HOLDS, 2 * holds), (Outcome.FAILS, 2 * fails))
        # with a margin both sides can be small (an effect, but below the margin): holding is said first, and the
        # claim's size statement says the effect is small; otherwise the side its own level decides, else the nearer
        decided = [(side, p) for side, p in sides if p < self.level(side)]
        side, p = decided[0] if decided else min(sides, key=lambda s: s[1])
        return min(1.0, p), side

    def _one_sided(self) -> tuple[float, float]:
        """One-sided p-values of "the mean lies in the region" and "it lies outside" (within the margin)."""
        low = self.low
        high = self.high
        e = self.estimate
        if math.isfinite(low) and math.isfinite(high):  # a band: TOST to hold, either side to fail
            return max(_p_above(e, low), _p_below(e, high)), min(_p_below(e, low), _p_above(e, high))
        if math.isfinite(low):
            return _p_above(e, low), _p_below(e, low + self.margin)
        return _p_below(e, high), _p_above(e, high - self.margin)

    def level(self, side: Outcome) -> float:
        """The two-sided level `side` is decided at."""
        return self.level_holds if side is Outcome.HOLDS else self.level_fails

    def outcome(self) -> Outcome:
        """HOLDS, FAILS or UNDECIDED: the side its p-value points to, where below that side's level."""
        e = self.estimate
        if not (math.isfinite(e.low) and math.isfinite(e.high)):
            return Outcome.UNDECIDED
        p, side = self.p_value()
        return side if side.decided and p < self.level(side) and self.can_show(side) else Outcome.UNDECIDED

    def can_show(self, side: Outcome) -> bool:
        """Whether values of this `bound` can show `side`: lower bounds show only that the mean is above a bound
        (holding above `low`, failing above `high` - margin), upper bounds only that it is below one.
        """
        if self.bound is Bound.EXACT:
            return True
        if self.bound is Bound.MIXED or (math.isfinite(self.low) and math.isfinite(self.high)):
            return False
        above = (side is Outcome.HOLDS) == math.isfinite(self.low)
        return above == (self.bound is Bound.LOWER)

    def seeds_can_decide(self) -> bool:
        """Whether more seeds could decide it: not where its mean points to a side its bounds cannot show."""
        side = self.p_value()[1]
        return not side.decided or self.can_show(side)

    def alone(self) -> Outcome:
        """The outcome from its own 95% interval (or sequential p-value), at ALPHA on both sides."""
        return dataclasses.replace(self, level_holds=ALPHA, level_fails=ALPHA).outcome()

    def region(self) -> str:
        no_effect = f"; fails below {self.low + self.margin:.3g}" if self.margin and math.isinf(self.high) else ""
        if self.margin and math.isinf(self.low):
            no_effect = f"; fails above {self.high - self.margin:.3g}"
        if math.isinf(self.low):
            return f"< {self.high:.3g}{no_effect}"
        if math.isinf(self.high):
            return f"> {self.low:.3g}{no_effect}"
        return f"in ({self.low:.3g}, {self.high:.3g})"

    def distance(self) -> float:
        """Distance from the mean to the bound the side it points to must clear: the CI half-width that would
        decide (for a band, the nearer edge).
        """
        mean = self.estimate.mean
        if math.isfinite(self.low) and math.isfinite(self.high):
            return min(abs(mean - self.low), abs(mean - self.high))
        bound, no_effect = (
            (self.low, self.low + self.margin) if math.isfinite(self.low) else (self.high, self.high - self.margin)
        )
        return abs(mean - (bound if self.p_value()[1] is Outcome.HOLDS else no_effect))


def _t(e: Estimate, bound: float) -> float:
    """The t statistic of the mean against a bound; an sd of 0 puts it at +-inf (or 0 on the bound)."""
    diff = e.mean - bound
    se = e.sd / math.sqrt(e.n) if e.n > 1 else math.nan
    if se == 0:
        return math.copysign(math.inf, diff) if diff else 0.0
    return diff / se


def _p_above(e: Estimate, bound: float) -> float:
    """One-sided p of H0: mean <= bound (small when the mean is clearly above it)."""
    t = _t(e, bound)
    return float(stdtr(e.n - 1, -t)) if math.isfinite(e.sd) and e.n > 1 else math.nan


def _p_below(e: Estimate, bound: float) -> float:
    """One-sided p of H0: mean >= bound."""
    t = _t(e, bound)
    return float(stdtr(e.n - 1, t)) if math.isfinite(e.sd) and e.n > 1 else math.nan


def q_values(pvalues: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values); NaN (no p-value) stays NaN and is not counted.

    The i-th smallest of m p-values times m / i, made monotone from the largest down: deciding where q < 0.05
    keeps the expected share of false discoveries among the decided below 5% (for independent or positively
    dependent tests).
    """
    ranked = sorted((p, i) for i, p in enumerate(pvalues) if math.isfinite(p))
    m, running = len(ranked), 1.0
    out = [math.nan] * len(pvalues)
    for rank in range(m, 0, -1):
        p, i = ranked[rank - 1]
        running = min(running, p * m / rank)
        out[i] = running
    return out
