"""The study's decision rule on intervals (sweep/analysis/study_decision.py) on constructed rungs, against
hand-worked t-tests: the margin, non-inferiority by a one-sided test, and the pick it makes.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from sweep.analysis.estimates import estimate
from sweep.analysis.study import Rung
from sweep.analysis.study_decision import Basis, Verdict, bounded, compare, decide, margin

pytestmark = pytest.mark.unit


def rung(batch: int, values: dict[int, float]) -> Rung:
    """A batch size whose tuned runs read `values` (seed -> val_acc_recal) at their last record."""
    empty = estimate([])
    return Rung(
        batch_size=batch,
        best_lr=1e-3,
        lr_range=(1e-4, 3e-2),
        edge="",
        trials=8,
        val=estimate(list(values.values())),
        by_seed=tuple(values.items()),
        raw=empty,
        untuned=empty,
        untuned_lr=None,
        lag=empty,
        failed=(),
        target=None,
        step_seconds=math.nan,
        b_simple=None,
    )


def t_cdf_df2(t: float) -> float:
    """Student's t CDF with 2 degrees of freedom in closed form: 1/2 + t / (2 sqrt(2 + t^2))."""
    return 0.5 + t / (2 * math.sqrt(2 + t * t))


def test_non_inferiority_is_a_one_sided_paired_t_test_against_the_margin() -> None:
    """Three seeds, worked by hand: d = best - other per seed, t = (mean(d) - 0.02) / (sd(d) / sqrt 3) on 2 df."""
    best = rung(8, {0: 0.90, 1: 0.92, 2: 0.91})
    close = rung(16, {0: 0.90, 1: 0.91, 2: 0.905})  # d = 0, 0.01, 0.005: mean 0.005, sd 0.005
    t = (0.005 - 0.02) / (0.005 / math.sqrt(3))  # -5.196
    found = compare(best, close, 0.02)
    assert found.paired and found.p_within == pytest.approx(t_cdf_df2(t), rel=1e-9)  # 0.0175 < 0.05
    assert found.verdict is Verdict.NON_INFERIOR and found.p_worse == pytest.approx(1 - t_cdf_df2(t), rel=1e-9)
    noisy = rung(32, {0: 0.89, 1: 0.90, 2: 0.905})  # d = 0.01, 0.02, 0.005: mean 0.011667, sd 0.0076376
    t = (0.035 / 3 - 0.02) / (0.0076376 / math.sqrt(3))  # -1.890: p 0.0997, neither side at 0.05
    found = compare(best, noisy, 0.02)
    assert found.p_within == pytest.approx(t_cdf_df2(t), rel=1e-4) and found.verdict is Verdict.UNSEPARATED
    worse = rung(64, {0: 0.80, 1: 0.83, 2: 0.80})  # d = 0.1, 0.09, 0.11: far past the margin
    assert compare(best, worse, 0.02).verdict is Verdict.WORSE


def test_without_shared_seeds_it_is_welchs_test() -> None:
    """No seed in common: Welch's t on (best - margin) against the other, worked from its formula."""
    a, b = [0.90, 0.92, 0.91, 0.93], [0.905, 0.90, 0.91]
    best, other = rung(8, dict(enumerate(a))), rung(16, {10 + k: v for k, v in enumerate(b)})
    va, vb = np.var(a, ddof=1) / 4, np.var(b, ddof=1) / 3
    t = (np.mean(a) - 0.02 - np.mean(b)) / math.sqrt(va + vb)
    df = (va + vb) ** 2 / (va**2 / 3 + vb**2 / 2)
    found = compare(best, other, 0.02)
    assert not found.paired and found.p_within == pytest.approx(stats.t.cdf(t, df), rel=1e-9)


def test_the_pick_is_the_largest_shown_non_inferior_never_a_point_mean() -> None:
    """Batch 32's mean is within 0.02 of the best (the old pick on point means), but its seeds spread too
    widely to show it: the rule decides by time to target among the batch sizes not shown worse, or, with no time
    to target, takes the largest shown non-inferior (16).
    """
    rungs = [
        rung(8, {0: 0.92, 1: 0.93, 2: 0.925}),
        rung(16, {0: 0.92, 1: 0.925, 2: 0.92}),  # d = 0, 0.005, 0.005: non-inferior
        rung(32, {0: 0.87, 1: 0.95, 2: 0.91}),  # mean 0.91, within 0.02 of 0.925 by its mean only
        rung(64, {0: 0.80, 1: 0.81, 2: 0.80}),  # worse
    ]
    seen: list[list[int]] = []

    def fastest(some: list[Rung]) -> Rung | None:
        seen.append([r.batch_size for r in some])
        return some[-1]

    decision = decide(rungs, margin(0.02, None), fastest)
    assert decision.best.batch_size == 8 and decision.with_verdict(Verdict.UNSEPARATED) == (32,)
    assert decision.basis is Basis.TIME_TO_TARGET and decision.chosen.batch_size == 32
    assert seen == [[8, 16, 32]]  # batch 64, shown worse, is no candidate
    decision = decide(rungs, margin(0.02, None), lambda some: None)
    assert decision.basis is Basis.LARGEST_SHOWN and decision.chosen.batch_size == 16
    decided = decide([*rungs[:2], rungs[3]], margin(0.02, None), fastest)  # without batch 32: the tests decide
    assert decided.basis is Basis.NON_INFERIORITY and decided.chosen.batch_size == 16


def test_a_margin_finer_than_one_validation_image_is_widened_and_said() -> None:
    """On 40 validation images one image is 0.025: a tolerance of 0.02 cannot be measured, so it becomes 0.025."""
    wide = margin(0.02, 40)
    assert wide.value == pytest.approx(0.025) and wide.widened
    assert "one validation image of 40" in wide.words() and "widened" in wide.words()
    kept = margin(0.02, 300)
    assert kept.value == 0.02 and not kept.widened and "6 of 300 validation images" in kept.words()


def test_at_the_ceiling_or_at_chance_no_batch_size_is_picked_by_the_tests() -> None:
    """All at 1.0 (no spread): every test calls every batch size non-inferior, which would pick the largest; at the
    ceiling the pick is by time to target over all of them instead. All within 0.02 of chance (0.1): no pick.
    """
    top = [rung(b, {0: 1.0, 1: 1.0, 2: 1.0}) for b in (8, 16, 32, 64, 128)]
    seen: list[list[int]] = []

    def fastest(some: list[Rung]) -> Rung | None:
        seen.append([r.batch_size for r in some])
        return some[1]

    decision = decide(top, margin(0.02, None), fastest)
    assert decision.basis is Basis.CEILING and decision.chosen.batch_size == 16 and seen == [[8, 16, 32, 64, 128]]
    assert bounded([*top[:4], rung(128, {0: 1.0, 1: 0.99, 2: 0.98})], None, 0.02) is None  # its interval dips below
    low = [rung(b, {0: 0.10, 1: 0.11, 2: 0.105}) for b in (8, 16, 32)]  # mean 0.105, interval up to 0.117
    assert bounded(low, 0.1, 0.02) is Basis.AT_CHANCE and bounded(low, 0.05, 0.02) is None
    assert decide(low, margin(0.02, None), fastest, chance=0.1).basis is Basis.AT_CHANCE
