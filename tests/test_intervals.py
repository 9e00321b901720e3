"""Intervals over seeds and paired differences (sweep/analysis/estimates.py, sweep/analysis/selection.py)
against scipy.stats, at n = 2, 3 and 10: the same interval, the same decision as the t-test, non-finite
values dropped, and pairs matched by seed (a seed missing on one side drops that pair, never shifts the others).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweep.analysis import estimates, selection
from sweep.analysis.outcome import Outcome

pytestmark = pytest.mark.unit

SIZES = (2, 3, 10)


def values(n: int) -> np.ndarray:
    return np.random.default_rng(n).normal(0.3, 0.05, n)


@pytest.mark.parametrize("n", SIZES)
def test_the_interval_is_scipys_t_interval(n: int) -> None:
    x = values(n)
    e = estimates.estimate(x)
    low, high = stats.t.interval(0.95, n - 1, loc=x.mean(), scale=stats.sem(x))
    assert (e.n, e.mean, e.sd) == (n, pytest.approx(x.mean(), abs=1e-15), pytest.approx(x.std(ddof=1), abs=1e-15))
    assert (e.low, e.high) == pytest.approx((low, high), abs=1e-12)
    ci = stats.ttest_1samp(x, 0.0).confidence_interval(0.95)
    assert (e.low, e.high) == pytest.approx((ci.low, ci.high), abs=1e-12)


@pytest.mark.parametrize("n", SIZES)
def test_a_check_decides_where_the_t_test_rejects(n: int) -> None:
    """The whole interval above a threshold exactly when the two-sided t-test rejects it with the mean above."""
    x = values(n)
    for threshold in (0.0, 0.2, 0.25, 0.28, 0.3, 0.35, 1.0):
        test = stats.ttest_1samp(x, threshold)
        above = test.pvalue < 0.05 and x.mean() > threshold
        below = test.pvalue < 0.05 and x.mean() < threshold
        outcome = estimates.Check("x", estimates.estimate(x), low=threshold).outcome()
        assert outcome is (Outcome.HOLDS if above else Outcome.FAILS if below else Outcome.UNDECIDED), (
            n,
            threshold,
            test.pvalue,
        )


def test_nan_and_infinite_values_are_dropped() -> None:
    finite = [0.1, 0.2, 0.4]
    e = estimates.estimate([0.1, math.nan, 0.2, math.inf, 0.4, -math.inf])  # 3 of 6 values dropped
    assert e == estimates.estimate(finite) and e.n == 3
    low, high = stats.t.interval(0.95, 2, loc=np.mean(finite), scale=stats.sem(finite))
    assert (e.low, e.high) == pytest.approx((low, high), abs=1e-12)
    one = estimates.estimate([math.nan, 0.5, math.inf])  # 2 of 3 dropped: a mean, no interval
    assert (one.n, one.mean) == (1, 0.5) and math.isnan(one.low) and math.isnan(one.high)
    none = estimates.estimate([math.nan, -math.inf])
    assert none.n == 0 and math.isnan(none.mean)


def runs(at_8: dict[int, float], at_64: dict[int, float]) -> pd.DataFrame:
    """A run-summary table: one row per run, batch 8 or 64, by seed; rows not in seed order."""
    rows = [
        {"train.batch_size": batch, "data.classes": 4, "seed": seed, "gap_last": value}
        for batch, by_seed in ((64, at_64), (8, at_8))
        for seed, value in sorted(by_seed.items(), reverse=True)
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize("n", SIZES)
def test_a_paired_difference_is_scipys_paired_t_interval(n: int) -> None:
    rng = np.random.default_rng(100 + n)
    small, large = rng.normal(0.1, 0.05, n), rng.normal(0.2, 0.05, n)
    table = runs(dict(enumerate(small)), dict(enumerate(large)))
    e = selection.paired(table, "train.batch_size", 8, 64, "gap_last")
    test = stats.ttest_rel(large, small)
    ci = test.confidence_interval(0.95)
    assert (e.n, e.mean) == (n, pytest.approx(np.mean(large - small), abs=1e-15))
    assert (e.low, e.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    decided = test.pvalue < 0.05 and e.mean > 0
    assert estimates.Check("x", e, low=0.0).outcome() is (Outcome.HOLDS if decided else Outcome.UNDECIDED)


def test_a_seed_missing_on_one_side_drops_its_pair_only() -> None:
    at_8 = {0: 0.10, 1: 0.12, 2: 0.50, 3: 0.11, 4: 0.13}  # seed 2 has no batch-64 run
    at_64 = {0: 0.20, 1: 0.25, 3: 0.21, 4: 0.30, 5: 0.90}  # seed 5 has no batch-8 run
    seeds = [0, 1, 3, 4]
    large, small = np.array([at_64[s] for s in seeds]), np.array([at_8[s] for s in seeds])
    table = runs(at_8, at_64)
    diffs = selection.paired_values(table, "train.batch_size", 8, 64, "gap_last")  # indexed by settings|seed
    by_seed = {int(key.rsplit("|", 1)[1]): value for key, value in diffs.items()}
    assert by_seed == pytest.approx({s: at_64[s] - at_8[s] for s in seeds}, abs=1e-15)
    e = selection.paired(table, "train.batch_size", 8, 64, "gap_last")
    ci = stats.ttest_rel(large, small).confidence_interval(0.95)
    assert (e.n, e.mean) == (4, pytest.approx(np.mean(large - small), abs=1e-15))
    assert (e.low, e.high) == pytest.approx((ci.low, ci.high), abs=1e-12)
    relative = selection.paired_relative(table, "train.batch_size", 8, 64, "gap_last")
    assert (relative.n, relative.mean) == (4, pytest.approx(np.mean(large / small - 1), abs=1e-12))


def test_a_pair_with_a_nan_side_is_dropped() -> None:
    table = runs({0: 0.1, 1: 0.2, 2: 0.3}, {0: 0.4, 1: math.nan, 2: 0.5})  # seed 1 diverged at batch 64
    e = selection.paired(table, "train.batch_size", 8, 64, "gap_last")
    assert (e.n, e.mean) == (2, pytest.approx(0.25))
