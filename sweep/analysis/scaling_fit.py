"""The fit S = S_min (1 + B_crit / B) of steps to a target against batch size (Shallue et al. 2019; McCandlish
et al. 2018) from a `sweep.analysis.scaling.reaches` table: fitted to per-batch-size summaries, with a bootstrap
interval over seeds and a lack-of-fit F test.

- Fitted: the batch sizes where every run reached the target (a mean over only the seeds that got there would
  be biased low), each with at least MIN_REACHED seeds. A batch size's summary is the mean of its seeds' log
  steps; the curve is least squares in log steps over those means, each weighted by its seeds. With equal seeds
  every batch size counts the same; the weights make the curve the one least squares over every seed's steps
  gives, and its residuals the lack-of-fit test's.
- The interval is a percentile bootstrap over seeds (Efron & Tibshirani 1993, ch. 13): RESAMPLES draws of the
  seeds with replacement from a fixed RNG seed (a report is reproducible), the curve refitted to each draw's
  means. Seeds that every fitted batch size ran are drawn together (a seed fixes the initial weights and the
  data order at every batch size: its runs are paired), else each batch size's seeds on their own. n paired
  seeds allow only C(2n - 1, n) distinct draws (10 at 3 seeds, 126 at 5); below FEW_DISTINCT the fit says so.
- The lack-of-fit F test (Draper & Smith 1998, section 2.1): the batch means' squares about the curve, over
  k - 2 degrees of freedom, against the seeds' squares about their batch mean (pure error), over N - k. It
  needs MIN_FIT_BATCHES batch sizes and a replicate. At p < ALPHA the form does not fit: `problem` says so and
  B_crit is no number to rely on. It takes the seeds as independent; seeds paired across batch sizes share
  their errors, which only makes the test slower to reject.
- The curve is fitted by profiling: at a given B_crit, log S_min is a weighted mean; B_crit is searched on a
  log grid from min(B) / 10^3 to max(B) x 10^3, then on finer grids between the best point's neighbours (every
  draw at once, as arrays). A B_crit at an end of the search is unbounded there, and so is a percentile at one.

numpy and scipy.special only (scipy.stats and scipy.optimize would add import time to every report).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
from scipy.special import fdtrc  # the F distribution's survival function

from sweep.analysis.estimates import ALPHA

MIN_REACHED = 2  # fewer seeds at a target give no interval (and no fit point)
MIN_FIT_BATCHES = 3  # two batch sizes fit the two parameters exactly: nothing tests the shape

GRID_DECADES = 3.0  # B_crit is searched from min(B) / 10^3 to max(B) x 10^3
GRID_POINTS = 241  # about 9% between neighbours: the first search
FINE_POINTS = 41  # each finer grid, between the best point's neighbours: 20 times finer
POINT_ROUNDS, DRAW_ROUNDS = 3, 1  # finer grids: the estimate to 0.01%, each draw to 0.5%, finer than its spread
RESAMPLES = 2000  # bootstrap draws: each 2.5% tail rests on 50 of them
BOOTSTRAP_SEED = 0  # fixed, so the same CSVs give the same interval
FEW_DISTINCT = 100  # fewer distinct draws than this: the percentiles are coarse, and the fit says so


@dataclass(frozen=True)
class LackOfFit:
    """The lack-of-fit F test of the curve against the batch-size means, pure error from the seeds."""

    f: float
    df_lack: int  # fitted batch sizes - 2
    df_pure: int  # seeds over all fitted batch sizes - fitted batch sizes
    p: float

    @property
    def fits(self) -> bool:
        return not self.p < ALPHA

    def words(self) -> str:
        return f"lack of fit F = {self.f:.3g} on {self.df_lack} and {self.df_pure} df, p = {self.p:.2g}"


@dataclass(frozen=True)
class Bootstrap:
    """How the interval was drawn."""

    resamples: int
    distinct: int  # distinct draws the seeds allow
    paired: bool  # seeds drawn together at every batch size
    seed: int  # the RNG's

    def words(self) -> str:
        how = "seeds paired across batch sizes" if self.paired else "seeds drawn within each batch size"
        return f"percentile bootstrap, {self.resamples} resamples, {how}"

    def note(self) -> str:
        """Why the interval's ends are coarse, or ""."""
        if self.distinct >= FEW_DISTINCT:
            return ""
        return f"these seeds allow only {self.distinct} distinct resamples, so the interval's ends are coarse"


@dataclass(frozen=True)
class Fit:
    """S_min and B_crit at one target, with bootstrap intervals; `problem` says why B_crit is not to be relied on."""

    target: float
    batch_sizes: tuple[int, ...]  # fitted: every run reached the target
    left_out: tuple[int, ...]  # some run did not reach it (or fewer than 2 runs)
    n_points: int  # per-seed steps behind the fitted means
    s_min: float
    s_min_low: float  # 0 when unbounded below
    s_min_high: float
    b_crit: float
    b_crit_low: float  # 0 when unbounded below
    b_crit_high: float  # inf when unbounded above
    problem: str = ""  # empty when identified and the form fits
    mean_steps: tuple[float, ...] = ()  # each fitted batch size's geometric mean steps, exp(mean log steps)
    lack_of_fit: LackOfFit | None = None  # None: too few batch sizes or no replicate
    bootstrap: Bootstrap | None = None

    @property
    def identified(self) -> bool:
        return not self.problem

    @property
    def form_fits(self) -> bool:
        """The lack-of-fit test did not reject S = S_min (1 + B_crit / B) (or there was none)."""
        return self.lack_of_fit is None or self.lack_of_fit.fits

    def predict(self, batch: float) -> float:
        return self.s_min * (1.0 + self.b_crit / batch)

    def shrinks(self) -> tuple[float, ...]:
        """How many times fewer steps each fitted batch size needed than the one before it."""
        return tuple(a / b for a, b in zip(self.mean_steps[:-1], self.mean_steps[1:], strict=True))


@dataclass(frozen=True)
class _Steps:
    """The fitted batch sizes' per-seed log steps, each batch size's in seed order."""

    batch: np.ndarray
    seeds: tuple[tuple[int, ...], ...]
    log_steps: tuple[np.ndarray, ...]

    @property
    def weights(self) -> np.ndarray:
        return np.array([len(v) for v in self.log_steps], dtype=float)

    @property
    def means(self) -> np.ndarray:
        return np.array([v.mean() for v in self.log_steps])

    @property
    def paired(self) -> bool:
        return len(set(self.seeds)) == 1


def fit_scaling(table: pd.DataFrame, target: float, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> Fit:
    """Fit one target's steps (a `reaches` table): the curve to the batch-size means, its bootstrap interval and
    the lack-of-fit test.
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
    steps = fitted["step"].to_numpy(dtype=float)
    if not (np.isfinite(steps).all() and (steps > 0).all()):
        return replace(empty, problem="a fitted step is not a positive number")
    return _fit(_steps_of(fitted), empty, resamples, seed)


def _steps_of(fitted: pd.DataFrame) -> _Steps:
    by_batch = [rows.sort_values("seed") for _, rows in fitted.groupby("batch_size", sort=True)]
    return _Steps(
        batch=np.array([float(rows["batch_size"].iloc[0]) for rows in by_batch]),
        seeds=tuple(tuple(int(s) for s in rows["seed"]) for rows in by_batch),
        log_steps=tuple(np.log(rows["step"].to_numpy(dtype=float)) for rows in by_batch),
    )


def _fit(data: _Steps, empty: Fit, resamples: int, seed: int) -> Fit:
    (b_crit,), (log_s_min,) = _solve(data.means[None, :], data.weights, data.batch, POINT_ROUNDS)
    at, logs = _solve(_draws(data, resamples, seed), data.weights, data.batch, DRAW_ROUNDS)
    ends = _search(data.batch)[[0, -1]]
    low, high = (float(np.quantile(at, q, method="inverted_cdf")) for q in (ALPHA / 2, 1 - ALPHA / 2))
    low_open, high_open = low <= ends[0], high >= ends[1]
    s_low, s_high = (float(np.exp(np.quantile(logs, q, method="inverted_cdf"))) for q in (ALPHA / 2, 1 - ALPHA / 2))
    fitted_log = log_s_min + np.log1p(b_crit / data.batch)
    fit = replace(
        empty,
        s_min=float(np.exp(log_s_min)),
        s_min_low=0.0 if high_open else s_low,  # S_min falls toward 0 as B_crit grows without bound
        s_min_high=s_high,
        b_crit=float(b_crit),
        b_crit_low=0.0 if low_open else low,
        b_crit_high=math.inf if high_open else high,
        mean_steps=tuple(float(np.exp(m)) for m in data.means),
        lack_of_fit=lack_of_fit(data.log_steps, fitted_log),
        bootstrap=Bootstrap(resamples, _distinct(data), data.paired, seed),
    )
    return replace(fit, problem=_problem(fit, low_open, high_open))


def _search(batch: np.ndarray) -> np.ndarray:
    """The first grid of B_crit: log-spaced from min(B) / 10^3 to max(B) x 10^3."""
    low, high = (math.log10(b) for b in (batch.min(), batch.max()))
    return np.logspace(low - GRID_DECADES, high + GRID_DECADES, GRID_POINTS)


def _profile(means: np.ndarray, weights: np.ndarray, shift: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each row of batch means (draws x k) and each B_crit's shift log(1 + B_crit / B), one grid for every row
    (grid x k) or a grid per row (draws x grid x k): the best log S_min, a weighted mean, and the weighted residual
    sum of squares (draws x grid).
    """
    total = weights.sum()
    if shift.ndim == 3:
        resid = means[:, None, :] - shift
        best = resid @ weights / total
        return best, (resid - best[:, :, None]) ** 2 @ weights
    # one grid: as sums of products, so every draw is one matrix product and no draws x grid x k array is made;
    # sum w (y - s - m)^2 = sum w y^2 - 2 sum w y s + sum w s^2 - W m^2
    weighted = shift * weights
    best = ((means @ weights)[:, None] - weighted.sum(axis=1)[None, :]) / total
    rss = (means**2 @ weights)[:, None] - 2 * means @ weighted.T + (weighted * shift).sum(axis=1)[None, :]
    return best, rss - total * best**2


def _solve(means: np.ndarray, weights: np.ndarray, batch: np.ndarray, rounds: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's least-squares B_crit and log S_min (a B_crit at an end of the search stays there)."""
    rows, search = np.arange(len(means)), _search(batch)
    best, rss = _profile(means, weights, np.log1p(search[:, None] / batch))
    k = rss.argmin(axis=1)
    grid, found, logs = np.broadcast_to(search, (len(means), GRID_POINTS)), search[k], best[rows, k]
    edge, at_edge, logs_at_edge = (k == 0) | (k == GRID_POINTS - 1), found, logs
    for _ in range(rounds):
        low, high = grid[rows, np.maximum(k - 1, 0)], grid[rows, np.minimum(k + 1, grid.shape[1] - 1)]
        grid = np.geomspace(low, high, FINE_POINTS, axis=1)
        best, rss = _profile(means, weights, np.log1p(grid[:, :, None] / batch))
        k = rss.argmin(axis=1)
        found, logs = grid[rows, k], best[rows, k]
    # at an end the curve runs on past the search (perfect scaling, or no gain at all): the end stands for it
    return np.where(edge, at_edge, found), np.where(edge, logs_at_edge, logs)


def _draws(data: _Steps, resamples: int, seed: int) -> np.ndarray:
    """Each draw's batch means (resamples x k): seeds drawn with replacement, together where they are paired."""
    rng = np.random.default_rng(seed)
    if data.paired:
        table = np.vstack(data.log_steps)  # batch sizes x seeds, the same seeds in the same order in every row
        picks = rng.integers(0, table.shape[1], size=(resamples, table.shape[1]))
        return table[:, picks].mean(axis=2).T
    columns = [v[rng.integers(0, len(v), size=(resamples, len(v)))].mean(axis=1) for v in data.log_steps]
    return np.column_stack(columns)


def _distinct(data: _Steps) -> int:
    """Distinct draws: multisets of n seeds from n, C(2n - 1, n), per pairing unit."""
    if data.paired:
        n = len(data.seeds[0])
        return math.comb(2 * n - 1, n)
    return math.prod(math.comb(2 * len(s) - 1, len(s)) for s in data.seeds)


def lack_of_fit(log_steps: tuple[np.ndarray, ...], fitted_log: np.ndarray) -> LackOfFit | None:
    """The F test of the curve's values (one per batch size) against per-seed log steps; None without 3 batch
    sizes, a replicate, or any spread between seeds.
    """
    k, n = len(log_steps), sum(len(v) for v in log_steps)
    pure = float(sum(((v - v.mean()) ** 2).sum() for v in log_steps))
    if k < MIN_FIT_BATCHES or n <= k or pure <= 0:
        return None
    lack = float(sum(len(v) * (v.mean() - f) ** 2 for v, f in zip(log_steps, fitted_log, strict=True)))
    df_lack, df_pure = k - 2, n - k
    f = (lack / df_lack) / (pure / df_pure)
    return LackOfFit(f, df_lack, df_pure, float(fdtrc(df_lack, df_pure, f)))


def _problem(fit: Fit, low_open: bool, high_open: bool) -> str:
    said = [s for s in (_unbounded(fit, low_open, high_open), _misfit(fit)) if s]
    return "; ".join(said)


def _misfit(fit: Fit) -> str:
    test = fit.lack_of_fit
    if test is None or test.fits:
        return ""
    return (
        f"S = S_min (1 + B_crit / B) does not fit these steps ({test.words()}): the batch sizes' mean steps "
        "depart from the curve by more than the seeds vary, so B_crit is no number to rely on"
    )


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
