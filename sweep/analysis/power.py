"""Seeds that would decide an undecided check: a power calculation, with the range its own sd allows.

Pure statistics (numpy and scipy only), on a `sweep.analysis.estimates.Check`:

- the true mean is taken to be the observed one and the true sd the observed one;
  n is the smallest number of seeds with at least 80% power to decide the check
  the way its mean points, with the paired (or one-sample) t-test the check uses;
- the level is the one the side the mean points to is decided at (`Check.level`: alpha for a
  check that must hold with the claim's others, alpha / k where one of the claim's k checks
  is enough, `sweep.claims.family`); each side is tested at half of it, as the interval does;
- a band (C9's equivalence) whose mean lies inside must pass both one-sided tests
  (TOST): the power used is 1 - (miss one side) - (miss the other), a lower bound;
- the sd from n seeds is itself uncertain: its 95% chi-square interval,
  sd * sqrt((n-1) / chi2(0.975 or 0.025, n-1)), gives the range of seeds needed.
  The mean's own uncertainty is not in that range: it is a planning number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import chdtri, nctdtr, stdtrit

from sweep.analysis.estimates import Check

POWER = 0.80
MAX_SEEDS = 1000  # the search gives up beyond this


@dataclass(frozen=True)
class SeedsNeeded:
    """Seeds per setting for 80% power, and its range over the sd's 95% interval (None: > MAX_SEEDS)."""

    n: int | None
    low: int | None  # at the sd's lower 95% limit
    high: int | None  # at its upper limit
    alpha: float  # the two-sided level planned for

    def words(self) -> str:
        """ "25 (range 9 to 860)", "> 1000 (range 40 to > 1000)"."""
        return f"{_count(self.n)} (range {_count(self.low)} to {_count(self.high)})"

    def sort_key(self) -> float:
        return math.inf if self.n is None else float(self.n)


def _count(n: int | None) -> str:
    return f"> {MAX_SEEDS}" if n is None else str(n)


def sd_interval(sd: float, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The chi-square interval of a normal sd estimated from n values."""
    df = n - 1
    if df < 1 or not math.isfinite(sd):
        return math.nan, math.nan
    tail = (1 - confidence) / 2
    return sd * math.sqrt(df / chdtri(df, tail)), sd * math.sqrt(df / chdtri(df, 1 - tail))


def one_sided_power(n: np.ndarray, distance: float, sd: float, alpha: float) -> np.ndarray:
    """Power of the one-sided t-test at level alpha / 2 when the mean lies `distance` beyond the bound."""
    df = n - 1
    noncentrality = distance * np.sqrt(n) / sd
    return 1 - nctdtr(df, noncentrality, stdtrit(df, 1 - alpha / 2))


def seeds_for_power(distances: tuple[float, ...], sd: float, alpha: float) -> int | None:
    """Smallest n (2..MAX_SEEDS) whose power reaches POWER; several distances: every side must be passed (TOST)."""
    if not math.isfinite(sd) or not distances or min(distances) <= 0 or not all(map(math.isfinite, distances)):
        return None
    if sd == 0:
        return 2
    n = np.arange(2, MAX_SEEDS + 1, dtype=float)
    misses = sum(1 - one_sided_power(n, d, sd, alpha) for d in distances)
    enough = np.flatnonzero(1 - misses >= POWER)
    return int(n[enough[0]]) if enough.size else None


def distances(check: Check) -> tuple[float, ...]:
    """How far the mean is from each bound it must clear to be decided the way it points."""
    mean = check.estimate.mean
    low = check.low
    high = check.high
    if math.isfinite(low) and math.isfinite(high) and low < mean < high:
        return (mean - low, high - mean)  # inside a band: equivalence needs both sides
    return (check.distance(),)


def seeds_needed(check: Check) -> SeedsNeeded:
    """Seeds for 80% power at the level of the side the check's mean points to (`Check.level`: the claim's
    error control sets it), with the range from the sd's interval.
    """
    alpha = check.level(check.p_value()[1])
    sd, n = check.estimate.sd, check.estimate.n
    low_sd, high_sd = sd_interval(sd, n)
    dist = distances(check)
    low, mid, high = (seeds_for_power(dist, s, alpha) for s in (low_sd, sd, high_sd))
    return SeedsNeeded(mid, low, high, alpha)
