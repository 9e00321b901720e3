"""The study's critical batch size (sweep/analysis/study.py, sweep/report/study_words.py, study_report.py): a target
fixed from the learning-rate searches' held-out runs before the tuned runs are read, B_simple read where B_crit is,
and a fit whose form does not fit said so in words, on results folders written by test_study's `write_study`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_study import BATCHES, SEEDS, write_study

from sweep import vocab
from sweep.analysis import study, study_advice
from sweep.report import study_report, study_words

pytestmark = pytest.mark.unit

# steps to 0.5 per batch size shrinking x2.2, 1.2, 1.3, 2.1, 1.2 per doubling: a zigzag, not diminishing returns
ZIGZAG = dict(zip(BATCHES, np.cumprod([1200.0, 1 / 2.2, 1 / 1.2, 1 / 1.3, 1 / 2.1, 1 / 1.2]), strict=True))


def _edit(folder: Path, name: str, change: Callable[[pd.DataFrame], pd.DataFrame]) -> None:
    path = folder / name
    pd.read_csv(path).pipe(change).to_csv(path, index=False)


def _tuned_at(table: pd.DataFrame, batch: int) -> pd.Series:
    return (table[vocab.ROLE] == vocab.TUNED) & (table["train.batch_size"] == batch)


def test_the_target_is_fixed_by_the_search_runs_alone(tmp_path: Path) -> None:
    """Batch 256's search winner ends at 0.83: the target is 0.8. Cutting batch 256's tuned runs to 0.75 leaves the
    target at 0.8 (they are counted as not reaching it; a target read off the tuned runs would drop to 0.7); cutting
    its search winner to 0.75 moves the target to 0.7.
    """
    folder = write_study(tmp_path / "study")
    found = study.read(folder)
    assert found.target == 0.8
    levels = "0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9"  # above chance, 1 / 10 classes
    assert found.target_rule.startswith(f"one level below the highest of the levels {levels} (above chance)")
    assert found.target_rule.endswith("so it reads higher than its re-runs will)")
    assert "that the winning trial of every batch size's search (its held-out run at the lr" in found.target_rule

    def tuned_cut(epochs: pd.DataFrame) -> pd.DataFrame:
        value = epochs[vocab.VAL_ACC_RECAL]
        return epochs.assign(**{vocab.VAL_ACC_RECAL: value.where(~_tuned_at(epochs, 256), value.clip(0, 0.75))})

    _edit(folder, vocab.EPOCHS_CSV, tuned_cut)
    cut = study.read(folder)
    assert (cut.target, cut.target_rule) == (found.target, found.target_rule)
    row = cut.rung(256).target
    assert row is not None and row.not_reached == len(SEEDS)

    def winner_at(runs: pd.DataFrame) -> pd.DataFrame:
        search = (runs[vocab.ROLE] == vocab.SEARCH) & (runs["train.batch_size"] == 256)
        best = runs[search]["final_val_acc_recal"].idxmax()
        return runs.assign(final_val_acc_recal=runs["final_val_acc_recal"].where(runs.index != best, 0.75))

    _edit(folder, vocab.RUNS_CSV, winner_at)
    assert study.read(folder).target == 0.6  # every winner reached 0.7 now: the level below it


def test_the_rule_falls_back_to_three_batch_sizes_and_never_to_a_level_at_chance() -> None:
    """Winners at 0.9, 0.9, 0.85 and 0.75: every batch size's winner reached 0.7, so the target is 0.6, a level of
    headroom below; three reached 0.8, the fallback (0.7) where the fourth reached nothing above chance (0.25 with
    4 classes, so 0.2 is no level); a winner at the lowest level keeps it (no level below it above chance).
    """
    winners = {8: 0.9, 16: 0.9, 32: 0.85, 64: 0.75}
    assert study.choose_target(winners, (8, 16, 32, 64), "val_acc", 0.25)[0] == 0.6
    target, rule = study.choose_target({**winners, 64: 0.24}, (8, 16, 32, 64), "val_acc", 0.25)
    assert target == 0.7 and rule.startswith("no level of the levels 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9 (above chance)")
    assert "one level below the highest that the winners of 3 or more batch sizes reached" in rule
    assert study.choose_target(dict.fromkeys((8, 16, 32), 0.35), (8, 16, 32), "val_acc", 0.25)[0] == 0.3
    target, rule = study.choose_target({8: 0.9, 16: 0.9}, (8, 16, 32, 64), "val_acc", 0.25)
    assert target is None and "train longer" in rule
    target, rule = study.choose_target({}, (8, 16, 32), "val_acc", 0.25)
    assert target is None and rule.startswith("runs.csv gives no search trial's final_val_acc")


def test_the_target_and_its_rule_are_written_in_the_study_csv_and_the_report(tmp_path: Path) -> None:
    found = study.read(write_study(tmp_path / "study"))
    table = study_report.csv_table(found, study_advice.advise(found))
    assert table["target"].eq(0.8).all() and table["target_rule"].eq(found.target_rule).all()
    words = study_report._target_words(found)
    assert words.startswith(
        "The target, val_acc_recal 0.8, was fixed from the learning-rate searches' held-out runs before the tuned "
        "runs were read: one level below the highest of the levels"
    )
    assert words.endswith("The tuned runs compared at it did not choose it.")


def test_b_simple_is_read_at_the_record_where_each_run_reached_the_target(tmp_path: Path) -> None:
    """B_simple set to each record's step: a batch size's B_simple is the mean over seeds of the step of the first
    record at or above the target (computed here from epochs.csv), not of the last record; the words say where.
    """
    folder = write_study(tmp_path / "study")
    _edit(folder, vocab.EPOCHS_CSV, lambda e: e.assign(**{vocab.NOISE_SCALE: e[vocab.STEP].astype(float)}))
    found = study.read(folder)
    epochs = pd.read_csv(folder / vocab.EPOCHS_CSV)
    tuned = epochs[epochs[vocab.ROLE] == vocab.TUNED]
    first = tuned[tuned[vocab.VAL_ACC_RECAL] >= 0.8].sort_values(vocab.STEP).groupby(vocab.RUN_ID).head(1)
    last = tuned.sort_values(vocab.STEP).groupby(vocab.RUN_ID).tail(1)
    for batch in BATCHES:
        b_simple = found.rung(batch).b_simple
        assert b_simple is not None and b_simple.n == len(SEEDS)
        at = first[first["train.batch_size"] == batch][vocab.STEP]
        assert b_simple.mean == pytest.approx(at.mean())
        assert b_simple.mean < last[last["train.batch_size"] == batch][vocab.STEP].mean()
    assert found.b_simple_at == "the record where each run first reached val_acc_recal 0.8"
    assert "B_simple at the record where each run first reached val_acc_recal 0.8 ranges" in study_words.critical_words(
        found
    )
    head, _ = study_report.table(found)
    assert "B_simple at the target" in head


def test_a_known_b_crit_is_said_with_its_bootstrap_interval_and_lack_of_fit_test(tmp_path: Path) -> None:
    found = study.read(write_study(tmp_path / "study"))
    fit = found.fit
    assert fit is not None and fit.lack_of_fit is not None and fit.form_fits
    words = study_words.critical_words(found)
    assert words.startswith(
        f"Critical batch size at val_acc_recal 0.8: B_crit {fit.b_crit:.0f} [{fit.b_crit_low:.0f}, "
        f"{fit.b_crit_high:.0f}] (95% interval, percentile bootstrap, 2000 resamples, seeds paired across batch sizes; "
    )
    assert f"; {fit.lack_of_fit.words()}, the form not rejected)" in words
    table = study_report.csv_table(found, study_advice.advise(found))
    assert table["b_crit_estimate"].eq(fit.b_crit).all() and table["lack_of_fit_p"].eq(fit.lack_of_fit.p).all()
    assert table["bootstrap_resamples"].eq(2000).all() and table["bootstrap_distinct_resamples"].eq(126).all()


def test_a_study_whose_steps_zigzag_says_plainly_that_the_form_does_not_fit(tmp_path: Path) -> None:
    """Steps per doubling x2.2, 1.2, 1.3, 2.1, 1.2: lack of fit p < 0.05; B_crit is not reported, in the words, the
    terminal's line and the CSV, and no device prediction is made from it.
    """
    found = study.read(write_study(tmp_path / "zigzag", steps=ZIGZAG))
    fit = found.fit
    assert fit is not None and fit.lack_of_fit is not None and fit.lack_of_fit.p < 0.05 and not fit.form_fits
    words = study_words.critical_words(found)
    assert words.startswith(
        "Critical batch size at val_acc_recal 0.8: not reported. S = S_min (1 + B_crit / B) does not fit these steps "
        f"({fit.lack_of_fit.words()}): from one batch size to the next (8, 16, 32, 64, 128, 256) the mean steps fell "
        "by x2.2, x1.2, x1.3, x2.1, x1.2 (the form has each cut smaller than the one before, from x2 toward x1)"
    )
    assert "; no single B_crit describes them, so none is reported" in words and f"{fit.b_crit:.0f} [" not in words
    advice = study_advice.advise(found)
    assert advice is not None
    assert study_words.terminal_lines(advice)[3].endswith(
        f"; B_crit not reported: the form does not fit (p = {fit.lack_of_fit.p:.2g})"
    )
    assert study_words.devices_words(advice).startswith("8 devices: no prediction, the steps do not follow S = S_min")
    table = study_report.csv_table(found, advice)
    assert table["b_crit_estimate"].isna().all() and (table["lack_of_fit_p"] < 0.05).all()
    assert table["b_crit_problem"].str.contains("does not fit these steps").all()
    assert math.isfinite(fit.b_crit)  # fitted, but not reported anywhere a user reads it as a number
