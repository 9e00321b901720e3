"""Estimates over seeds with Student-t intervals, and three-valued checks on them.

Pure statistics: numbers in, numbers and words out (numpy and scipy only, no tables).

- The unit of replication is the seed; an estimate's n is its number of seeds
  (or of per-seed differences, for paired comparisons).
- The 95% interval is Student's t over seeds: mean +- t(0.975, n-1) * sd / sqrt(n).
  It assumes the seed-to-seed values are roughly normal and independent; with
  n = 3 the multiplier is 4.30 (not 1.96), so intervals are wide on purpose. A
  bootstrap over 3 seeds would be narrower only because it cannot see the tails.
- A check says where a number must lie for a claim to hold. It is True when the
  whole interval lies there, False when the whole interval lies outside, and
  None (undecided) otherwise; `seeds_needed` estimates how many seeds would
  decide it from the observed SD.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy.special import (
    stdtrit,  # the t quantile; scipy.stats would add a second of import time
)

CONFIDENCE = 0.95
MAX_SEEDS = 1000  # seeds_needed gives up beyond this

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"
NOT_TESTED = "not tested by this sweep"


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


def t_multiplier(n: int, confidence: float = CONFIDENCE) -> float:
    """t(1 - alpha/2, n - 1): 12.71 at n=2, 4.30 at n=3, 2.26 at n=10."""
    return float(stdtrit(n - 1, 0.5 + confidence / 2)) if n > 1 else math.nan


def estimate(values: Iterable[float], confidence: float = CONFIDENCE) -> Estimate:
    x = np.asarray(list(values), dtype=float)
    x = x[np.isfinite(x)]
    n = len(x)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, math.nan, math.nan)
    mean = float(x.mean())
    sd = float(x.std(ddof=1)) if n > 1 else math.nan
    half = t_multiplier(n, confidence) * sd / math.sqrt(n) if n > 1 else math.nan
    return Estimate(mean, sd, n, mean - half, mean + half)


@dataclass(frozen=True)
class Check:
    """The claim holds for this number when it lies in the open interval (low, high)."""

    label: str
    estimate: Estimate
    low: float = -math.inf
    high: float = math.inf

    def outcome(self) -> bool | None:
        """True: the whole CI is inside; False: the whole CI is outside; None: undecided."""
        e = self.estimate
        if not (math.isfinite(e.low) and math.isfinite(e.high)):
            return None
        if e.low > self.low and e.high < self.high:
            return True
        if e.high <= self.low or e.low >= self.high:
            return False
        return None

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

    def seeds_needed(self) -> int | None:
        """Smallest n with t(n-1) * sd / sqrt(n) < margin, from the observed SD (None: > MAX_SEEDS or unknown)."""
        return seeds_to_decide(self.estimate.sd, self.margin())


def seeds_to_decide(sd: float, margin: float) -> int | None:
    if not (math.isfinite(sd) and math.isfinite(margin)) or margin <= 0:
        return None
    n = np.arange(2, MAX_SEEDS + 1)
    decided = np.flatnonzero(stdtrit(n - 1, 0.5 + CONFIDENCE / 2) * sd / np.sqrt(n) < margin)
    return int(n[decided[0]]) if decided.size else None


def all_of(outcomes: Iterable[bool | None]) -> bool | None:
    values = list(outcomes)
    return False if False in values else (True if values and all(v is True for v in values) else None)


def any_of(outcomes: Iterable[bool | None]) -> bool | None:
    values = list(outcomes)
    return True if True in values else (False if values and all(v is False for v in values) else None)


def verdict(outcome: bool | None) -> str:
    return {True: SUPPORTED, False: CONTRADICTED, None: INCONCLUSIVE}[outcome]
