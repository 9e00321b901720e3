"""Analysis on small committed results (tests/fixtures/fx_*), numbers checked against the raw CSV rows."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REPO

from sweep import analysis as an
from sweep import vocab
from sweep.analysis import estimates, outcome, selection
from sweep.analysis.outcome import Outcome
from sweep.vocab import RunStatus

FIXTURES = REPO / "tests" / "fixtures"
BS, CAUSES, GPUS = FIXTURES / "fx_bs", FIXTURES / "fx_causes", FIXTURES / "fx_gpus"
T_975_2DF = 4.302652729911275  # Student t, 97.5% quantile, 2 degrees of freedom (3 seeds)


@pytest.mark.unit
def test_load_counts_and_deduplicates() -> None:
    results = an.load([BS])
    # 3 batch sizes x 3 seeds -> 9 runs of 3 epochs (576, 288, 72 steps), a record every 36 steps and at
    # every epoch end: 18 records at batch 8, 10 at 16, 4 at 64 -> 3 x 32 = 96 rows
    assert len(results.runs) == 9 and len(results.epochs) == 96
    assert an.varying(results.epochs) == [an.BATCH_SIZE]
    twice = an.load([BS, BS])  # the same run_id in two folders is one run
    assert len(twice.runs) == 9 and len(twice.epochs) == 96


def _relabelled(source: Path, folder: Path, batch_size: int, sweep: str) -> set[str]:
    """A copy of source's runs at one batch size, as a sweep that does not vary it would name them:
    the same specs (same hashes), slugs without the batch size. Returns the new run ids.
    """
    folder.mkdir()
    runs, epochs = pd.read_csv(source / vocab.RUNS_CSV), pd.read_csv(source / vocab.EPOCHS_CSV)
    runs = runs[runs["train.batch_size"] == batch_size].assign(sweep=sweep)
    epochs = epochs[epochs["train.batch_size"] == batch_size]
    rename = {run_id: run_id.split("-", 1)[1] for run_id in runs[vocab.RUN_ID]}  # bs64-s0-ac7df268 -> s0-ac7df268
    runs.assign(**{vocab.RUN_ID: runs[vocab.RUN_ID].map(rename)}).to_csv(folder / vocab.RUNS_CSV, index=False)
    epochs.assign(**{vocab.RUN_ID: epochs[vocab.RUN_ID].map(rename)}).to_csv(folder / vocab.EPOCHS_CSV, index=False)
    return set(rename.values())


@pytest.mark.unit
def test_a_run_is_its_spec_not_its_slug(tmp_path: Path) -> None:
    """The same spec under two slugs in two folders is one run, and the first folder's copy is kept."""
    relabelled = _relabelled(BS, tmp_path / "no_batch_axis", 64, "no_batch_axis")
    combined = an.load([BS, tmp_path / "no_batch_axis"])
    assert len(combined.runs) == 9 and len(combined.epochs) == 96
    assert not relabelled & set(combined.runs[vocab.RUN_ID]) and set(combined.epochs[an.SOURCE]) == {str(BS)}
    summary = an.run_summary(combined.epochs)
    at64 = summary[summary[an.BATCH_SIZE] == 64]
    assert estimates.estimate(at64[an.column(vocab.VAL_ACC, "last")]).n == 3  # not 6
    reversed_order = an.load([tmp_path / "no_batch_axis", BS])
    assert relabelled <= set(reversed_order.runs[vocab.RUN_ID]) and len(reversed_order.runs) == 9
    # each folder's figures still show its own sweep whole: all 96 rows, and batch 64's 3 x 4
    assert len(combined.folder_epochs) == 96 + 12


@pytest.mark.unit
def test_a_run_takes_every_row_from_one_folder(tmp_path: Path) -> None:
    """The first folder's copy of a run was cut short after epoch 1: the second folder's done copy
    must not lend it epochs 2 and 3.
    """
    run_id, partial = "bs8-s0-f0b216a6", tmp_path / "partial"
    partial.mkdir()
    runs, epochs = pd.read_csv(BS / vocab.RUNS_CSV), pd.read_csv(BS / vocab.EPOCHS_CSV)
    runs[runs[vocab.RUN_ID] == run_id].assign(**{vocab.STATUS: RunStatus.RUNNING}).to_csv(
        partial / vocab.RUNS_CSV, index=False
    )
    cut = epochs[(epochs[vocab.RUN_ID] == run_id) & (epochs[vocab.EPOCH] <= 1)]  # 6 records, every 36 steps
    assert len(cut) == 6
    cut.assign(**{vocab.STATUS: RunStatus.RUNNING}).to_csv(partial / vocab.EPOCHS_CSV, index=False)
    results = an.load([partial, BS])
    assert results.runs.set_index(vocab.RUN_ID).loc[run_id, vocab.STATUS] == RunStatus.RUNNING
    # only done runs' rows are analysed: the 8 other runs' 96 - 18
    assert run_id not in set(results.epochs[vocab.RUN_ID]) and len(results.epochs) == 78


@pytest.mark.unit
def test_search_slots_of_different_searches_stay_apart(tmp_path: Path) -> None:
    """A slot whose lr is not drawn yet shows its slot id, <group>-t<k>: the part after the last '-' is no hash."""
    runs = pd.DataFrame(
        {
            vocab.RUN_ID: ["bs8-1a2b3c4d-t1", "bs64-5e6f7a8b-t1", "bs8-s0-0fb1ea29"],
            vocab.ROLE: [vocab.SEARCH, vocab.SEARCH, vocab.GRID],
            vocab.SEARCH_GROUP: ["bs8-1a2b3c4d", "bs64-5e6f7a8b", None],
            vocab.STATUS: [RunStatus.PENDING, RunStatus.PENDING, RunStatus.PENDING],
        }
    )
    runs.to_csv(tmp_path / vocab.RUNS_CSV, index=False)
    (tmp_path / vocab.EPOCHS_CSV).write_text("")
    assert len(an.load([tmp_path]).runs) == 3


@pytest.mark.unit
def test_a_folder_without_csvs_is_a_one_line_error(tmp_path: Path) -> None:
    (tmp_path / vocab.RUNS_CSV).write_text("run_id\n")
    with pytest.raises(an.ResultsError, match=r"no epochs\.csv here; make it with `sweep run"):
        an.load([tmp_path])


@pytest.mark.unit
def test_mean_and_t_interval_match_a_hand_computation() -> None:
    raw = pd.read_csv(BS / vocab.EPOCHS_CSV)
    values = raw[(raw["train.batch_size"] == 64) & (raw["epoch"] == 2)]["val_acc"].to_numpy()
    assert len(values) == 3
    mean = sum(values) / 3
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / 2)
    half = T_975_2DF * sd / math.sqrt(3)

    curves = an.summarize(an.load([BS]).epochs)
    row = curves[(curves[an.BATCH_SIZE] == 64) & (curves["epoch"] == 2) & (curves["metric"] == "val_acc")]
    assert len(row) == 1
    assert row["n"].item() == 3
    assert row["mean"].item() == pytest.approx(mean)
    assert row["ci_low"].item() == pytest.approx(mean - half)
    assert row["ci_high"].item() == pytest.approx(mean + half)
    assert estimates.t_multiplier(3) == pytest.approx(T_975_2DF)


@pytest.mark.unit
def test_paired_difference_matches_seeds_by_hand() -> None:
    raw = pd.read_csv(BS / vocab.EPOCHS_CSV)
    at2 = raw[raw["epoch"] == 2].set_index(["train.batch_size", "seed"])["gap"]
    diffs = np.array([at2[(64, s)] - at2[(8, s)] for s in (0, 1, 2)])
    half = T_975_2DF * diffs.std(ddof=1) / math.sqrt(3)

    summary = an.run_summary(an.load([BS]).epochs)
    est = selection.paired(summary, an.BATCH_SIZE, 8, 64, an.column("gap", "epoch2"))
    assert est.n == 3
    assert est.mean == pytest.approx(diffs.mean())
    assert (est.low, est.high) == pytest.approx((diffs.mean() - half, diffs.mean() + half))


@pytest.mark.unit
def test_run_summary_speed_skips_the_tracing_epoch() -> None:
    """Speed is read from whole epochs after the first: a record inside an epoch (every 36 steps) times
    only part of one.
    """
    raw = pd.read_csv(BS / vocab.EPOCHS_CSV)
    run = raw[raw["run_id"] == raw["run_id"].iloc[0]]
    assert (run.epoch % 1 != 0).any()
    summary = an.run_summary(an.load([BS]).epochs).set_index("run_id")
    later_epochs = run[(run.epoch > 1) & (run.epoch % 1 == 0)]["epoch_seconds"]
    assert len(later_epochs) == 2
    assert summary.loc[run["run_id"].iloc[0], "epoch_seconds"] == pytest.approx(later_epochs.mean())
    assert summary.loc[run["run_id"].iloc[0], "gap_last"] == pytest.approx(run[run.epoch == 3]["gap"].item())


@pytest.mark.unit
def test_gap_table_has_epoch_two_and_the_last_epoch() -> None:
    gaps = an.gap_table(an.load([BS]).epochs)
    # 3 batch sizes x 2 moments x 5 metrics
    assert len(gaps) == 30
    assert set(gaps["at"]) == {"epoch 2", "last"} and set(gaps[gaps["at"] == "last"]["epoch"]) == {3}


@pytest.mark.unit
def test_checks_are_three_valued() -> None:
    H, F, U = Outcome.HOLDS, Outcome.FAILS, Outcome.UNDECIDED
    inside = estimates.Estimate(0.5, 0.1, 3, 0.3, 0.7)
    assert estimates.Check("x", inside, low=0.2).outcome() is Outcome.HOLDS
    assert estimates.Check("x", inside, low=0.8).outcome() is Outcome.FAILS
    assert estimates.Check("x", inside, low=0.4).outcome() is Outcome.UNDECIDED
    assert estimates.Check("x", inside, low=-1.0, high=0.6).outcome() is Outcome.UNDECIDED
    assert outcome.all_of([H, U]) is U and outcome.all_of([H, F, U]) is F and outcome.all_of([H, H]) is H
    assert outcome.any_of([F, U]) is U and outcome.any_of([F, H]) is H and outcome.any_of([F, F]) is F
    assert outcome.all_of([]) is U and outcome.any_of([]) is U


@pytest.mark.unit
def test_choose_context_prefers_the_post_defaults_and_the_first_folder() -> None:
    summary = an.run_summary(an.load([CAUSES, BS]).epochs)
    imbalance = selection.choose_context(summary, "data.imbalance")
    assert imbalance is not None
    # the other toggles stay at the post's setting: 2 values x 3 seeds
    assert len(imbalance.rows) == 6 and set(imbalance.rows["data.shuffle"]) == {True}
    by_batch = selection.choose_context(summary, an.BATCH_SIZE, (8, 64))
    assert by_batch is not None and set(by_batch.rows[an.SOURCE]) == {str(BS)}
    assert selection.choose_context(summary, an.GPUS) is None  # neither folder varies the replicas
    assert selection.toggle_values(summary, "data.shuffle") == [True, False]
    assert selection.toggle_values(summary, "data.samples_per_class") == [240, 120]


@pytest.mark.unit
def test_write_tables(tmp_path: Path) -> None:
    paths = an.write_tables(an.load([GPUS]), tmp_path)
    assert sorted(p.name for p in paths) == ["curves.csv", "gaps.csv", "run_summary.csv"]
    curves = pd.read_csv(tmp_path / "tables" / "curves.csv")
    # 2 replica counts x 2 epochs x 12 metrics
    assert len(curves) == 48 and set(curves["n"]) == {2}


@pytest.mark.system  # a fresh interpreter
def test_analysis_plots_and_report_do_not_import_tensorflow(tmp_path: Path) -> None:
    code = (
        "import sys; from sweep.cli import main; "
        f"code = main(['report', {str(BS)!r}, '--out', {str(tmp_path)!r}]); "
        "assert code == 0, code; "
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')); "
        "print('HEAVY', heavy)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "HEAVY []" in done.stdout
    assert (tmp_path / "report.html").is_file()


@pytest.mark.unit
def test_a_list_setting_missing_from_older_results_groups_with_its_default() -> None:
    """train.callbacks (a list, runs.csv holds it as JSON) is empty in results written before it existed:
    those runs ran without callbacks and group with runs that say so.
    """
    rows = pd.DataFrame({"train.callbacks": [None, None, "[]", '["m:f"]'], "train.batch_size": [8, 8, 8, 8]})
    keyed = selection.settings_key(rows, ["train.callbacks", "train.batch_size"])
    assert keyed.iloc[0] == keyed.iloc[1] == keyed.iloc[2] != keyed.iloc[3]
    older = rows.iloc[:2]  # a folder of older runs only: every cell empty
    assert selection.settings_key(older, ["train.callbacks"]).nunique() == 1
