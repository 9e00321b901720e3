"""The fit S = S_min (1 + B_crit / B) of steps to a target against batch size (Shallue et al. 2019),
with profile-likelihood intervals, from a `sweep.analysis.scaling.reaches` table.

Least squares in log steps over the per-seed steps of the batch sizes where every run reached the
target; the intervals come from the F test on the residual sum of squares, not a bootstrap (3 seeds
give a bootstrap only 10 distinct resamples). numpy and scipy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.special import fdtri  # the F distribution's quantile; scipy.stats would add a second of import time

from sweep.analysis.estimates import CONFIDENCE

MIN_REACHED = 2  # fewer seeds at a target give no interval (and no fit point)
MIN_FIT_BATCHES = 3  # two batch sizes fit the two parameters exactly: nothing tests the shape

GRID_DECADES = 3.0  # B_crit is searched from min(B) / 10^3 to max(B) x 10^3
GRID_POINTS = 2401


@dataclass(frozen=True)
class Fit:
    """S_min and B_crit at one target, with profile-likelihood intervals; `problem` says why it is not identified."""

    target: float
    batch_sizes: tuple[int, ...]  # fitted: every run reached the target
    left_out: tuple[int, ...]  # some run did not reach it (or fewer than 2 runs)
    n_points: int  # per-seed steps fitted
    s_min: float
    s_min_low: float  # 0 when unbounded below
    s_min_high: float
    b_crit: float
    b_crit_low: float  # 0 when unbounded below
    b_crit_high: float  # inf when unbounded above
    problem: str = ""  # empty when identified

    @property
    def identified(self) -> bool:
        return not self.problem

    def predict(self, batch: float) -> float:
        return self.s_min * (1.0 + self.b_crit / batch)


def _profile(batch: np.ndarray, log_steps: np.ndarray, b_crit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each B_crit: the best log S_min (closed form, a mean) and the residual sum of squares."""
    shift = np.log1p(b_crit[:, None] / batch[None, :])
    resid = log_steps[None, :] - shift
    best = resid.mean(axis=1)
    return best, ((resid - best[:, None]) ** 2).sum(axis=1)


def fit_scaling(table: pd.DataFrame, target: float) -> Fit:
    """Fit one target's per-seed steps (a `reaches` table) by least squares in log steps.

    Profile intervals: the B_crit values whose best residual sum of squares stays below
    RSS_min (1 + F(95%; 1, n - 2) / (n - 2)); S_min's interval is the range of S_min over
    the joint region. An interval that reaches the end of the searched range is unbounded there.
    """
    rows = table[table["target"] == target]
    complete = rows.groupby("batch_size")["reached"].agg(["all", "size"])
    usable = complete[complete["all"] & (complete["size"] >= MIN_REACHED)].index
    fitted = rows[rows["batch_size"].isin(usable)]
    left_out = tuple(int(b) for b in complete.index if b not in usable)
    batches = tuple(int(b) for b in usable)
    nan = math.nan
    empty = Fit(target, batches, left_out, len(fitted), nan, nan, nan, nan, nan, nan)
    if len(batches) < MIN_FIT_BATCHES:
        reason = (
            f"only {len(batches)} batch size(s) ({', '.join(map(str, batches)) or 'none'}) reached "
            f"{target:g} with every seed; the fit needs {MIN_FIT_BATCHES}"
        )
        return replace(empty, problem=reason)
    batch = fitted["batch_size"].to_numpy(dtype=float)
    steps = fitted["step"].to_numpy(dtype=float)
    if not (np.isfinite(steps).all() and (steps > 0).all()):
        return replace(empty, problem="a fitted step is not a positive number")
    log_steps = np.log(steps)
    grid = np.logspace(math.log10(batch.min()) - GRID_DECADES, math.log10(batch.max()) + GRID_DECADES, GRID_POINTS)
    best, rss = _profile(batch, log_steps, grid)
    n = len(batch)
    limit = rss.min() * (1.0 + fdtri(1, n - 2, CONFIDENCE) / (n - 2))
    inside = np.flatnonzero(rss <= limit)
    k = int(np.argmin(rss))
    # the joint region's S_min: each B_crit inside allows log S_min within +- sqrt((limit - rss) / n)
    half = np.sqrt(np.maximum(limit - rss[inside], 0.0) / n)
    low_open, high_open = inside[0] == 0, inside[-1] == len(grid) - 1
    fit = Fit(
        target=target,
        batch_sizes=batches,
        left_out=left_out,
        n_points=n,
        s_min=float(np.exp(best[k])),
        s_min_low=0.0 if high_open else float(np.exp((best[inside] - half).min())),
        s_min_high=float(np.exp((best[inside] + half).max())),
        b_crit=float(grid[k]),
        b_crit_low=0.0 if low_open else float(grid[inside[0]]),
        b_crit_high=math.inf if high_open else float(grid[inside[-1]]),
    )
    return replace(fit, problem=_unbounded(fit, low_open, high_open))


def _unbounded(fit: Fit, low_open: bool, high_open: bool) -> str:
    if high_open and low_open:
        return "B_crit's 95% interval is unbounded on both sides: these steps do not locate it"
    if high_open:
        return (
            f"B_crit's 95% interval has no upper end (B_crit >= {fit.b_crit_low:.3g}): the steps are consistent with "
            f"perfect scaling up to batch {max(fit.batch_sizes)}, so the critical batch size is not identified"
        )
    if low_open:
        return (
            f"B_crit's 95% interval has no lower end (B_crit <= {fit.b_crit_high:.3g}): the steps are consistent with "
            "no gain from a larger batch, so the critical batch size is not identified"
        )
    return ""
