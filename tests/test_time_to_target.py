"""C6 on time to a target fixed in advance (sweep/analysis/reach.py, sweep/claims/speed_check.py): steps to the
target read between records, seconds as steps x the quiet seconds per step, paired by seed; a batch size that
never reaches the target counts its whole training, a bound that decides one side only (`Bound`). Constructed
tables, hand-worked numbers, scipy's t-test as the oracle.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweep import analysis as an
from sweep import claims, vocab
from sweep.analysis import reach
from sweep.analysis.estimates import Bound, Check, Estimate
from sweep.analysis.outcome import Outcome
from sweep.claims import basis
from sweep.claims.findings import ReadFrom
from sweep.claims.verdict import fixed
from sweep.config import timing_schema

pytestmark = pytest.mark.unit

BS = "train.batch_size"
FILLER = {an.column(m, w): 0.0 for m in an.SNAPSHOT_METRICS for w in ("epoch2", "last")}
FILLER |= {"epoch_seconds": 1.0, "epoch_seconds_median": 1.0, "samples_per_second": 1.0}
FILLER |= {an.column(vocab.VAL_ACC_RECAL, "last"): 0.5}
STEP_SECONDS = {8: 0.01, 256: 0.08}  # quiet seconds per optimizer step (timing.csv)
SMALL_STEPS = [1000.0, 1200.0, 1100.0]


def table(large_steps: list[float], trained: float = 500.0, small_steps: list[float] = SMALL_STEPS) -> pd.DataFrame:
    """A run summary: batch 8 and 256, 3 seeds; NaN steps = the target not reached within `trained` steps."""
    rows = []
    for bs, steps in ((8, small_steps), (256, large_steps)):
        for seed, step in enumerate(steps):
            rows.append(
                {"run_id": f"bs{bs}-s{seed}", "seed": seed, BS: bs, **FILLER}
                | {"steps_to_target_recal": step, reach.TRAINED_STEPS: trained if bs == 256 else 2000.0}
                | {timing_schema.QUIET_STEP_SECONDS: STEP_SECONDS[bs]}
            )
    return pd.DataFrame(rows)


def c6(data: pd.DataFrame) -> tuple[Check, list[str]]:
    finding = basis.read(claims.by_id("C6"), data)
    assert finding is not None and finding.reading == ReadFrom.QUIET.value
    (check,) = finding.checks
    return check, list(finding.notes)


def seconds(steps: list[float], bs: int) -> np.ndarray:
    return np.asarray(steps) * STEP_SECONDS[bs]


# --- reading a run's steps to the target


def test_a_run_reaches_the_target_between_its_records() -> None:
    """0.3 at step 100, 0.6 at step 200: 0.5 is two thirds of the way, step 166.7; epoch times 4 s and 5 s."""
    epochs = pd.DataFrame(
        {
            vocab.RUN_ID: ["r"] * 3 + ["slow"] * 3,
            vocab.SEED: 0,
            BS: 8,
            vocab.STEP: [100, 200, 300] * 2,
            vocab.EPOCH: [1, 2, 3] * 2,
            vocab.EPOCH_SECONDS: [4.0, 5.0, 5.0] * 2,
            vocab.VAL_ACC: [0.3, 0.6, 0.7, 0.1, 0.2, 0.3],
        }
    )
    found = reach.to_target(epochs)
    assert found.at["r", "steps_to_target"] == pytest.approx(100 + 100 * 0.2 / 0.3)
    assert found.at["r", "seconds_to_target"] == pytest.approx(4 + 5 * 0.2 / 0.3)
    assert math.isnan(found.at["slow", "steps_to_target"])  # never reached: not imputed here
    assert found.at["slow", reach.TRAINED_STEPS] == 300 and found.at["slow", reach.TRAINED_SECONDS] == 14.0
    assert "steps_to_target_recal" not in found  # not recorded: no recalibrated reading


# --- deciding on seconds to the target


def test_c6_is_quiet_seconds_to_the_target_paired_by_seed() -> None:
    large = [100.0, 115.0, 112.0]
    check, _ = c6(table(large))
    change = seconds(large, 256) / seconds(SMALL_STEPS, 8) - 1  # -0.200, -0.233, -0.185
    assert check.estimate.mean == pytest.approx(change.mean()) and check.estimate.n == 3
    p = stats.ttest_1samp(change, -0.10, alternative="less").pvalue
    assert 2 * p < 0.05 and check.outcome() is Outcome.HOLDS  # faster by more than 10%, decided
    assert check.bound is Bound.EXACT
    assert check.label.startswith("quiet seconds to val_acc_recal 0.5 at batch 256 relative to batch 8")


def test_a_large_batch_that_never_reaches_the_target_is_counted_and_fails() -> None:
    """Batch 256 never gets to 0.5 in its 200 steps: 16 s at least, against 10-12 s at batch 8; slower."""
    check, notes = c6(table([math.nan] * 3, trained=200.0))
    change = seconds([200.0] * 3, 256) / seconds(SMALL_STEPS, 8) - 1
    assert check.estimate.n == 3 and check.estimate.mean == pytest.approx(change.mean())  # not dropped
    assert check.bound is Bound.LOWER
    assert 2 * stats.ttest_1samp(change, -0.10, alternative="greater").pvalue < 0.05
    assert check.outcome() is Outcome.FAILS
    assert any("batch 256: 0 of 3 seeds" in n and "lower bound" in n for n in notes)


def test_a_missed_target_never_shows_faster() -> None:
    """Batch 256 stops after 95 steps without the target: 7.6 s is a lower bound of its time, so its -0.30 against
    batch 8 cannot show "faster" (read as exact numbers it would), and more seeds cannot change that.
    """
    data = table([math.nan] * 3, trained=95.0)
    check, _ = c6(data)
    change = seconds([95.0] * 3, 256) / seconds(SMALL_STEPS, 8) - 1
    assert 2 * stats.ttest_1samp(change, -0.10, alternative="less").pvalue < 0.05  # as if exact: holds
    assert Check("", check.estimate, high=-0.10).outcome() is Outcome.HOLDS
    assert check.outcome() is Outcome.UNDECIDED and not check.seeds_can_decide()
    finding = claims.evaluate(data)
    c6_finding = dict((c.id, f) for c, f in finding)["C6"]
    verdict = fixed(claims.by_id("C6"), c6_finding)
    assert verdict.long.startswith("undecided") and "more seeds cannot decide" in verdict.long


def test_a_seed_where_neither_batch_size_reached_the_target_is_left_out_and_counted() -> None:
    check, notes = c6(table([math.nan, 110.0, 100.0], small_steps=[math.nan, 1200.0, 1100.0]))
    assert check.estimate.n == 2
    assert any("Left out, with nothing to read: 1 seed where neither batch size reached it." in n for n in notes)


@pytest.mark.parametrize(
    ("bound", "mean", "expected"),
    [
        (Bound.EXACT, -0.3, Outcome.HOLDS),
        (Bound.EXACT, 0.3, Outcome.FAILS),
        (Bound.LOWER, 0.3, Outcome.FAILS),  # the truth is higher still: fails
        (Bound.LOWER, -0.3, Outcome.UNDECIDED),  # the truth may be above -0.1
        (Bound.UPPER, -0.3, Outcome.HOLDS),  # the truth is lower still: holds
        (Bound.UPPER, 0.3, Outcome.UNDECIDED),
        (Bound.MIXED, -0.3, Outcome.UNDECIDED),
    ],
)
def test_bounds_decide_only_the_side_they_make_safe(bound: Bound, mean: float, expected: Outcome) -> None:
    e = Estimate(mean, 0.01, 3, mean - 0.03, mean + 0.03)
    assert Check("", e, high=-0.10, bound=bound).outcome() is expected
    mirrored = Estimate(-mean, 0.01, 3, -mean - 0.03, -mean + 0.03)  # a low bound: the sides swap
    flip = {Bound.LOWER: Bound.UPPER, Bound.UPPER: Bound.LOWER}.get(bound, bound)
    assert Check("", mirrored, low=0.10, bound=flip).outcome() is expected
