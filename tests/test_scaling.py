"""Steps to target and the fit S = S_min (1 + B_crit / B), on constructed epochs tables (sweep/analysis/scaling.py)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sweep import vocab
from sweep.analysis import scaling, scaling_fit
from sweep.analysis.reach import elapsed_seconds

pytestmark = pytest.mark.unit


def run(
    steps: list[int],
    val: list[float],
    batch: int = 8,
    seed: int = 0,
    steps_per_epoch: int = 100,
    seconds: list[float] | None = None,
    run_id: str | None = None,
    **extra: object,
) -> pd.DataFrame:
    """One run's records; `epoch` is fractional where a record sits inside an epoch."""
    return pd.DataFrame(
        {
            vocab.RUN_ID: run_id or f"bs{batch}-s{seed}",
            vocab.SEED: seed,
            "train.batch_size": batch,
            vocab.STEP: steps,
            vocab.EPOCH: [s / steps_per_epoch for s in steps],
            vocab.VAL_ACC: val,
            vocab.EPOCH_SECONDS: seconds if seconds is not None else [10.0] * len(steps),
            **extra,
        }
    )


def reach(records: pd.DataFrame, target: float, chance: float = 0.0) -> tuple:
    """One run's reading at one target, as `reaches` reads it for a curve of that run alone."""
    curve = scaling.Curve("r", "fixed 0.001", "", (0,), records, {str(records[vocab.RUN_ID].iloc[0]): chance})
    (row,) = scaling.reaches(curve, (target,)).itertuples(index=False)
    return row


def test_the_step_is_interpolated_between_per_epoch_records() -> None:
    records = run([100, 200, 300], [0.05, 0.25, 0.45])
    r = reach(records, 0.2)
    # 0.2 is three quarters of the way from 0.05 to 0.25: step 100 + 75
    assert (r.step, r.epoch, r.reached, r.at_first_record, r.budget_step) == (175.0, 1.75, True, False, 300)
    assert r.seconds == pytest.approx(10.0 + 0.75 * 10.0)  # epoch 1 took 10 s, epoch 2 another 10


def test_records_inside_epochs_and_extra_columns_are_read_by_step() -> None:
    """eval_every_steps: fractional epochs, epoch_seconds counted from the start of each epoch; `*_recal` ignored."""
    records = run(
        [50, 100, 150, 200],
        [0.05, 0.10, 0.30, 0.50],
        seconds=[4.0, 9.0, 5.0, 10.0],
        val_acc_recal=[0.9, 0.9, 0.9, 0.9],
    )
    r = reach(records.sample(frac=1.0, random_state=1), 0.2)  # row order must not matter
    assert (r.step, r.epoch) == (125.0, 1.25)
    # at step 100 the run had trained 9 s; at step 150, 9 + 5 = 14 s; halfway: 11.5 s
    assert elapsed_seconds(records).tolist() == [4.0, 9.0, 14.0, 19.0]
    assert r.seconds == pytest.approx(11.5)


def test_a_target_reached_by_the_first_record_is_read_from_step_0_at_chance() -> None:
    r = reach(run([100, 200], [0.6, 0.7]), 0.3, chance=0.1)
    assert r.at_first_record and r.step == pytest.approx(100 * (0.3 - 0.1) / (0.6 - 0.1))


def test_a_seed_that_never_reaches_the_target_is_counted_not_dropped() -> None:
    epochs = pd.concat(
        [
            run([100, 200], [0.1, 0.4], seed=0),
            run([100, 200], [0.1, 0.3], seed=1),
            run([100, 200], [0.05, 0.12], seed=2),  # never reaches 0.25
        ]
    )
    curve = scaling.Curve("r", "fixed 0.001", "", (0, 1, 2), epochs, {})
    (row,) = scaling.target_rows(scaling.reaches(curve, (0.25,)))
    assert (row.n_runs, row.n_reached, row.not_reached, row.budget_steps) == (3, 2, 1, 200)
    assert row.best_val_missed == (0.12,)
    assert row.steps.mean == pytest.approx((150 + (100 + 100 * 0.15 / 0.2)) / 2)
    assert math.isfinite(row.steps.low)


def test_a_batch_size_with_one_seed_at_the_target_has_no_interval() -> None:
    epochs = pd.concat([run([100, 200], [0.1, 0.4], seed=0), run([100, 200], [0.1, 0.2], seed=1)])
    curve = scaling.Curve("r", "fixed 0.001", "", (0, 1), epochs, {})
    (row,) = scaling.target_rows(scaling.reaches(curve, (0.3,)))
    assert row.n_reached == 1 and math.isnan(row.steps.low) and math.isnan(row.steps.high)


def synthetic(s_min: float, b_crit: float, batches: tuple[int, ...], noise: float, seeds: int = 3) -> pd.DataFrame:
    """A `reaches` table whose per-seed steps follow S_min (1 + B_crit / B) with log-normal noise."""
    rng = np.random.default_rng(0)
    rows = [
        {
            "batch_size": b,
            "target": 0.3,
            "seed": s,
            "step": s_min * (1 + b_crit / b) * math.exp(rng.normal(0, noise)),
            "reached": True,
        }
        for b in batches
        for s in range(seeds)
    ]
    return pd.DataFrame(rows)


def test_the_fit_recovers_a_known_s_min_and_b_crit() -> None:
    fit = scaling_fit.fit_scaling(synthetic(200.0, 64.0, (8, 16, 32, 64, 128, 256, 512), 0.05), 0.3)
    assert fit.identified, fit.problem
    assert fit.s_min == pytest.approx(200.0, rel=0.1) and fit.b_crit == pytest.approx(64.0, rel=0.15)
    assert fit.s_min_low < 200.0 < fit.s_min_high and fit.b_crit_low < 64.0 < fit.b_crit_high
    assert fit.b_crit_high < 200  # a real interval, not the searched range
    assert fit.predict(64) == pytest.approx(fit.s_min * 2 * (1 + (fit.b_crit - 64) / 128), rel=1e-9)


def test_perfect_scaling_over_every_batch_size_leaves_b_crit_unbounded_above() -> None:
    """All batches far below B_crit: steps x B is constant, and no upper end of B_crit is supported."""
    fit = scaling_fit.fit_scaling(synthetic(1.0, 100_000.0, (8, 16, 32), 0.05), 0.3)
    assert not fit.identified and math.isinf(fit.b_crit_high) and "no upper end" in fit.problem


def test_fewer_than_three_batch_sizes_reaching_the_target_is_not_identified() -> None:
    table = synthetic(200.0, 64.0, (8, 16, 32), 0.05)
    table.loc[(table["batch_size"] == 32) & (table["seed"] == 0), ["step", "reached"]] = (math.nan, False)
    fit = scaling_fit.fit_scaling(table, 0.3)
    assert fit.left_out == (32,) and fit.batch_sizes == (8, 16)
    assert not fit.identified and "only 2 batch size(s)" in fit.problem and math.isnan(fit.b_crit)


def test_targets_are_the_levels_half_the_batch_sizes_reach_with_two_seeds() -> None:
    epochs = pd.concat(
        [run([100, 200], [0.15, 0.45], batch=8, seed=s) for s in (0, 1)]
        + [run([100, 200], [0.12, 0.25], batch=32, seed=s) for s in (0, 1)]
        + [run([100, 200], [0.02, 0.05], batch=128, seed=s) for s in (0, 1)]
        + [run([100, 200], [0.02, 0.11], batch=256, seed=s) for s in (0, 1)]
    )
    curve = scaling.Curve("r", "fixed 0.001", "", (0, 1), epochs, {})
    # 0.1: batches 8, 32, 256 (3 of 4); 0.2: 8 and 32 (half); 0.3 and 0.4: 8 alone
    assert scaling.choose_targets(curve) == (0.1, 0.2)


def test_no_target_at_or_below_chance() -> None:
    """With 4 classes an untrained model is at 0.25: 0.1 and 0.2 would be 'reached' at step 0."""
    epochs = pd.concat([run([100, 200], [0.3, 0.5], batch=b, seed=s) for b in (8, 32) for s in (0, 1)])
    chance = {str(r): 0.25 for r in epochs[vocab.RUN_ID].unique()}
    curve = scaling.Curve("r", "fixed 0.001", "", (0, 1), epochs, chance)
    assert scaling.choose_targets(curve) == (0.3, 0.4, 0.5)
