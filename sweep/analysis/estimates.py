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
  wholly inside (holds) or wholly outside (fails) the region, and the verdicts of a
  report use the Holm-adjusted p-value instead (`holm`, `Check.p_holm`).
- `sweep.analysis.power` turns an undecided check into the seeds that would decide it.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

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

    `p_holm` is set once the check is part of a report's family (`holm`); `family` is
    that family's size, which sets the level `sweep.analysis.power` plans for.
    """

    label: str
    estimate: Estimate
    low: float = -math.inf
    high: float = math.inf
    p_holm: float | None = None
    family: int = 1
    # After `run --until-decided` (optional stopping) the fixed-n p-value is not valid; the check's sequential
    # p-value (sweep.analysis.sequential: min over planned looks of p / share) is, whenever the looks stopped.
    p_sequential: float | None = None
    side_sequential: Outcome = Outcome.UNDECIDED  # the side the look that gave it pointed to (UNDECIDED: not recorded)
    key: Key | None = None  # what it estimates; None for a one-off check that nothing looks up (`ident`)
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
        return min(1.0, 2 * min(holds, fails)), fixed

    def _one_sided(self) -> tuple[float, float]:
        """One-sided p-values of "the mean lies in the region" and "it lies outside"."""
        low = self.low
        high = self.high
        e = self.estimate
        above = {b: _p_above(e, b) for b in (low, high) if math.isfinite(b)}  # H0: mean <= b
        below = {b: _p_below(e, b) for b in (low, high) if math.isfinite(b)}  # H0: mean >= b
        if math.isfinite(low) and math.isfinite(high):  # a band: TOST to hold, either side to fail
            return max(above[low], below[high]), min(below[low], above[high])
        if math.isfinite(low):
            return above[low], below[low]
        return below[high], above[high]

    def outcome(self) -> Outcome:
        """HOLDS, FAILS or UNDECIDED: at the 95% interval, or after Holm once p_holm is set."""
        e = self.estimate
        if not (math.isfinite(e.low) and math.isfinite(e.high)):
            return Outcome.UNDECIDED
        p, side = self.p_value()
        used = p if self.p_holm is None else self.p_holm
        return side if used < ALPHA else Outcome.UNDECIDED

    def uncorrected(self) -> Outcome:
        """The outcome from its own 95% interval (or sequential p-value), as if it were the only check."""
        return dataclasses.replace(self, p_holm=None, family=1).outcome()

    def region(self) -> str:
        if math.isinf(self.low):
            return f"< {self.high:.3g}"
        if math.isinf(self.high):
            return f"> {self.low:.3g}"
        return f"in ({self.low:.3g}, {self.high:.3g})"

    def margin(self) -> float:
        """Distance from the mean to the nearest boundary: the CI half-width that would decide."""
        bounds = [b for b in (self.low, self.high) if math.isfinite(b)]
        return min(abs(self.estimate.mean - b) for b in bounds)


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


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values; NaN (no p-value) stays NaN and is not in the family.

    The i-th smallest of m p-values is multiplied by m - i + 1, then made monotone:
    rejecting where the adjusted p < alpha keeps the chance of any false decision below alpha.
    """
    ranked = sorted((p, i) for i, p in enumerate(pvalues) if math.isfinite(p))
    m, running = len(ranked), 0.0
    adjusted = [math.nan] * len(pvalues)
    for rank, (p, i) in enumerate(ranked):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted
