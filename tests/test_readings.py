"""Comparable readings (sweep/analysis/readings.py) on constructed curves whose values at every point are known."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from sweep import analysis, vocab
from sweep.analysis import column, readings
from sweep.vocab import RunStatus

pytestmark = pytest.mark.unit

BS = "train.batch_size"


def curves() -> pd.DataFrame:
    """Batch 8: 100 steps per epoch, records every 25 steps; batch 64: 10 steps per epoch, records at epoch ends.

    val_acc = step / 1000 + seed / 100; fit loss = 4 - step / 100 (batch 8) or 4 - step / 10 (batch 64);
    every epoch takes 2 s at batch 8 and 1 s at batch 64.
    """
    rows = []
    for seed in (0, 1):
        for batch, per_epoch, every, loss_rate in ((8, 100, 25, 100), (64, 10, 10, 10)):
            for step in range(every, 3 * per_epoch + 1, every):
                epoch = step / per_epoch
                into = step - (math.ceil(epoch) - 1) * per_epoch
                rows.append(
                    {
                        vocab.RUN_ID: f"bs{batch}-s{seed}-h{batch}{seed}",
                        vocab.STATUS: RunStatus.DONE,
                        analysis.SOURCE: "f",
                        vocab.SEED: seed,
                        BS: batch,
                        "data.samples_per_class": 50,
                        vocab.EPOCH: epoch,
                        vocab.STEP: step,
                        **{m: 0.0 for m in analysis.SNAPSHOT_METRICS if m != vocab.STEP},
                        vocab.VAL_ACC: step / 1000 + seed / 100,
                        vocab.TRAIN_EVAL_LOSS: 4 - step / loss_rate,
                        vocab.EPOCH_SECONDS: (2.0 if batch == 8 else 1.0) * into / per_epoch,
                        vocab.SAMPLES_PER_SECOND: 1.0,
                    }
                )
    return pd.DataFrame(rows)


def read(reading: readings.Reading, values: tuple = ()) -> pd.DataFrame:
    epochs = curves()
    summary = analysis.run_summary(epochs)
    return readings.reread(summary, epochs, (BS,), reading, values).set_index(vocab.RUN_ID)


def test_equal_epochs_is_the_post_reading_unchanged() -> None:
    epochs = curves()
    summary = analysis.run_summary(epochs)
    assert readings.reread(summary, epochs, (BS,), readings.EPOCHS).equals(summary)
    assert summary.set_index(vocab.RUN_ID).loc["bs8-s0-h80", column(vocab.VAL_ACC, "epoch2")] == pytest.approx(0.2)


def test_equal_steps_reads_every_run_at_the_fewest_steps_interpolating_inside_epochs() -> None:
    table = read(readings.STEPS)
    # epoch 2: batch 64 has taken 20 steps; batch 8 is read at step 20, between its records at 0.. 25: none before
    assert table["point_epoch2"].eq(20).all()
    assert np.isnan(table.loc["bs8-s0-h80", column(vocab.VAL_ACC, "epoch2")])  # its first record is step 25
    assert table.loc["bs64-s1-h641", column(vocab.VAL_ACC, "epoch2")] == pytest.approx(0.02 + 0.01)
    # last: batch 64 ends at step 30; batch 8 read at step 30, between steps 25 and 50 (epoch 0.3)
    assert table["point_last"].eq(30).all()
    assert table.loc["bs8-s1-h81", column(vocab.VAL_ACC, "last")] == pytest.approx(0.03 + 0.01)
    assert table.loc["bs8-s1-h81", column(vocab.EPOCH, "last")] == pytest.approx(0.3)


def test_equal_fit_reads_where_each_run_first_reaches_the_worst_fit_at_the_snapshot() -> None:
    table = read(readings.FIT)
    # last: fit loss 4 - 300/100 = 1 at batch 8, 4 - 30/10 = 1 at batch 64: equal, every run read at its end
    assert table["point_last"].eq(1.0).all()
    # epoch 2: batch 8 at 4 - 2 = 2, batch 64 at 4 - 2 = 2 as well; construct a harder case below
    epochs = curves()
    epochs.loc[epochs[BS] == 64, vocab.TRAIN_EVAL_LOSS] += 1.0  # batch 64 fits worse: 3 at epoch 2
    summary = analysis.run_summary(epochs)
    table = readings.reread(summary, epochs, (BS,), readings.FIT).set_index(vocab.RUN_ID)
    assert table["point_epoch2"].eq(3.0).all()
    # batch 8 reaches loss 3 at step 100 exactly (4 - 100/100): its epoch-1 record
    assert table.loc["bs8-s0-h80", column(vocab.VAL_ACC, "epoch2")] == pytest.approx(0.1)
    assert table.loc["bs8-s0-h80", column(vocab.EPOCH, "epoch2")] == pytest.approx(1.0)


def test_equal_fit_interpolates_between_the_records_around_the_crossing() -> None:
    epochs = curves()
    epochs.loc[epochs[BS] == 64, vocab.TRAIN_EVAL_LOSS] += 1.1  # 3.1 at batch 64's epoch 2
    summary = analysis.run_summary(epochs)
    table = readings.reread(summary, epochs, (BS,), readings.FIT).set_index(vocab.RUN_ID)
    # batch 8: loss 3.25 at step 75, 3.0 at step 100 -> 3.1 at step 90
    assert table.loc["bs8-s0-h80", column(vocab.STEP, "epoch2")] == pytest.approx(90)
    assert table.loc["bs8-s0-h80", column(vocab.VAL_ACC, "epoch2")] == pytest.approx(0.09)


def test_equal_time_reads_at_the_shortest_training_time() -> None:
    table = read(readings.TIME)
    # epoch 2: batch 64 has trained 2 s, batch 8 4 s; batch 8 is read at 2 s = step 100 (end of epoch 1)
    assert table["point_epoch2"].eq(2.0).all()
    assert table.loc["bs8-s1-h81", column(vocab.STEP, "epoch2")] == pytest.approx(100)


def test_named_values_restrict_the_comparison() -> None:
    assert set(read(readings.STEPS, values=(64,))[BS]) == {64}


def test_recalibrated_swaps_inference_numbers_and_its_gap_is_eval_gap_recal() -> None:
    epochs = curves().assign(
        **{**{m: 0.5 for m in vocab.RECAL_METRICS}, vocab.TRAIN_ACC: 0.9, vocab.EVAL_GAP_RECAL: 0.03}
    )
    summary = analysis.run_summary(epochs)
    assert readings.has_recalibrated(summary)
    swapped = readings.recalibrated(summary)
    assert swapped[column(vocab.VAL_ACC, "last")].eq(0.5).all()
    # never the running train_acc 0.9 minus the recalibrated val_acc 0.5 (0.4): one model, one mode
    assert swapped[column(vocab.GAP, "epoch2")].eq(0.03).all()
    assert swapped[column(vocab.EVAL_GAP, "last")].eq(0.03).all()
    assert not readings.has_recalibrated(analysis.run_summary(curves()))


def test_the_report_runs_each_batch_size_check_unchanged_at_every_reading() -> None:
    """C7's val_acc check (batch 64 - batch 8, last): -0.27 at equal epochs (step 30 vs 300), 0 at equal steps."""
    from sweep.claims import comparable

    epochs = curves()
    found = comparable.comparable(analysis.run_summary(epochs), epochs)
    c7 = {r.reading.name: r for r in found if r.claim.id == "C7"}
    assert set(c7) == {"equal epochs", "equal steps", "equal fit", "equal time"}
    val = {name: next(c for c in r.finding.checks if c.label.startswith("val_acc")).estimate for name, r in c7.items()}
    assert val["equal epochs"].mean == pytest.approx(0.03 - 0.3)
    assert val["equal steps"].mean == pytest.approx(0.0, abs=1e-12) and val["equal steps"].n == 2
    assert "step 30" in c7["equal steps"].points
    rows = comparable.table(found)
    assert set(rows.loc[rows.claim == "C7", "reading"]) == set(c7)


def test_runs_without_recalibrated_numbers_get_none_and_fit_is_chosen_per_group() -> None:
    """Two sweeps in one report: one measured with train.recalibrate_bn, one without (spc 50 vs 25)."""
    with_recal = curves().assign(**{m: 0.5 for m in vocab.RECAL_METRICS})
    with_recal[vocab.TRAIN_EVAL_LOSS_RECAL] = with_recal[vocab.TRAIN_EVAL_LOSS] - 1.0  # recalibrated fits better
    without_recal = curves().assign(**{"data.samples_per_class": 25})
    without_recal[vocab.RUN_ID] = without_recal[vocab.RUN_ID] + "x"
    epochs = pd.concat([with_recal, without_recal], ignore_index=True)
    summary = analysis.run_summary(epochs)
    swapped = readings.recalibrated(summary).set_index(vocab.RUN_ID)
    assert swapped.loc["bs8-s0-h80", column(vocab.VAL_ACC, "last")] == 0.5
    assert np.isnan(swapped.loc["bs8-s0-h80x", column(vocab.VAL_ACC, "last")])  # never its raw number
    fit = readings.reread(summary, epochs, (BS,), readings.FIT).set_index(vocab.RUN_ID)
    assert fit.loc["bs8-s0-h80", "point_last"] == pytest.approx(0.0)  # recalibrated loss: 4 - 3 - 1
    assert fit.loc["bs8-s0-h80x", "point_last"] == pytest.approx(1.0)  # raw loss in the other sweep


@pytest.mark.parametrize("reading", [readings.STEPS, readings.FIT, readings.TIME], ids=lambda r: r.name)
def test_one_epoch_runs_have_no_epoch_2_point_and_say_nothing(reading: readings.Reading) -> None:
    """Runs of one epoch have no epoch-2 snapshot: its point and values are empty, with no NumPy warning."""
    import warnings

    epochs = curves()
    epochs = epochs[epochs[vocab.EPOCH] <= 1]
    summary = analysis.run_summary(epochs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        table = readings.reread(summary, epochs, (BS,), reading)
    assert table["point_epoch2"].isna().all() and table[column(vocab.VAL_ACC, "epoch2")].isna().all()
    assert table["point_last"].notna().all()


def test_every_other_record_inside_epochs_goes_one_way_or_the_other_and_epoch_ends_stay() -> None:
    epochs = curves()
    first, second = readings.every_other(epochs) or (None, None)
    assert first is not None and second is not None
    run = "bs8-s0-h80"  # records every 25 steps in epochs of 100
    steps = {name: sorted(t.loc[t[vocab.RUN_ID] == run, vocab.STEP]) for name, t in (("1", first), ("2", second))}
    assert steps["1"] == [25, 75, 100, 150, 200, 225, 275, 300]
    assert steps["2"] == [50, 100, 125, 175, 200, 250, 300]
    at_ends = epochs[epochs[BS] == 64]  # records at epoch ends only: in both
    assert len(first[first[BS] == 64]) == len(second[second[BS] == 64]) == len(at_ends)
    assert readings.every_other(epochs[epochs[vocab.EPOCH] % 1 == 0]) is None


def test_a_crossing_read_between_records_is_steady_only_if_every_other_record_decides_alike() -> None:
    """C7's val_acc check (batch 64 - batch 8) at equal time, last: batch 64's 3 s is batch 8's step 150.

    On straight curves every reading is steady. With batch 8's val_acc 0.5 lower at step 150 only,
    the check reads +0.38 there, and -0.12 from the records at steps 125 and 175 without it: not steady.
    """
    from sweep.claims import comparable

    epochs = curves()
    epochs.loc[epochs[BS] == 8, vocab.VAL_ACC] += epochs[vocab.SEED] * 0.001  # a spread over seeds
    found = comparable.comparable(analysis.run_summary(epochs), epochs)
    steady = {(r.claim.id, r.reading.name): r.steady for r in found}
    assert steady[("C7", "equal epochs")] is None and steady[("C7", "equal steps")] is None
    assert steady[("C7", "equal fit")] is True and steady[("C7", "equal time")] is True
    epochs.loc[(epochs[BS] == 8) & (epochs[vocab.STEP] == 150), vocab.VAL_ACC] -= 0.5
    found = comparable.comparable(analysis.run_summary(epochs), epochs)
    time = next(r for r in found if r.claim.id == "C7" and r.reading == readings.TIME)
    val = next(c for c in time.finding.checks if c.label.startswith("val_acc")) if time.finding else None
    assert (
        val is not None
        and val.estimate.mean == pytest.approx(0.03 - (0.15 - 0.5 + 0.0005))
        and val.outcome() is not None
    )
    assert time.steady is False and comparable.UNSTEADY in comparable.cell(time)
    rows = comparable.table(found)
    assert set(rows.loc[(rows.claim == "C7") & (rows.reading == "equal time"), "steady"]) == {"no"}
    assert set(rows.loc[(rows.claim == "C7") & (rows.reading == "equal fit"), "steady"]) == {"yes"}
    assert set(rows.loc[rows.reading == "equal epochs", "steady"]) == {""}
