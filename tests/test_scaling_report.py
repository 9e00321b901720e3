"""The steps-to-target and noise-scale sections on the committed results: every sentence against the numbers.

The numbers the sentences must state are computed here again from the CSVs, by simpler code
than sweep/analysis/scaling.py's, so a section cannot quote a number its data do not give. The committed
runs recorded val_acc_recal (train.recalibrate_bn), so that is what they are read on.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweep import analysis, vocab
from sweep.analysis import critical, scaling
from sweep.report.document import Doc, Heading, Paragraph, Table
from sweep.report.figures.steps import steps_figure
from sweep.report.sections import steps

pytestmark = pytest.mark.unit

RESULTS = Path(__file__).resolve().parent.parent / "results"
FOLDERS = (RESULTS / "lr_search", RESULTS / "batch_sizes")


@pytest.fixture(scope="module")
def readings() -> list[scaling.CurveReading]:
    return scaling.read(analysis.load(FOLDERS))


def text_of(doc: Doc) -> str:
    return "\n".join(b.text for b in doc.blocks if isinstance(b, Paragraph))


def tuned_runs() -> pd.DataFrame:
    epochs = pd.read_csv(RESULTS / "lr_search" / "epochs.csv")
    return epochs[(epochs["role"] == "tuned") & (epochs["status"] == "done")]


def steps_to(
    run: pd.DataFrame, target: float, chance: float = 1 / 120, metric: str = vocab.VAL_ACC_RECAL
) -> float | None:
    """Plain linear interpolation between the records around the first crossing."""
    points = [(0, chance), *zip(run["step"], run[metric], strict=True)]
    points.sort()
    for (s0, v0), (s1, v1) in zip(points, points[1:], strict=False):
        if v1 >= target:
            return s0 + (s1 - s0) * (target - v0) / (v1 - v0)
    return None


def test_the_b_simple_range_quoted_is_the_tuned_runs_last_records(readings: list[scaling.CurveReading]) -> None:
    doc = Doc()
    steps.noise_section(doc, readings)
    text = text_of(doc)
    runs = tuned_runs()
    last = runs.loc[runs.groupby("run_id")["step"].idxmax(), "noise_scale"]
    assert f"range from {last.min():.0f} to {last.max():.0f}." in text
    assert "At lr tuned per batch size (" in text and "seeds 0, 1, 2; read on val_acc_recal" in text  # its conditions
    assert "not the batch size" not in text
    # how far training got is read on val_acc_recal too: every batch size passed 0.1 with it, none "barely trained"
    best = runs.groupby("train.batch_size")["val_acc_recal"].max()
    assert best.min() >= critical.BARELY_TRAINED and "never reach" not in text
    assert runs.groupby("train.batch_size")["val_acc"].max().min() < critical.BARELY_TRAINED  # as raw val_acc is not
    table = [b for b in doc.blocks if isinstance(b, Table) and b.head[0] == "batch"][0]
    assert table.head[1] == "epoch 1: B_simple / val_acc_recal"
    ends = runs[runs["epoch"] == 1].groupby("train.batch_size")["val_acc_recal"].mean()
    assert [row[1].split(" / ")[1] for row in table.rows] == [f"{v:.3f}" for v in ends]


def t_interval(values: list[float]) -> tuple[float, float]:
    """The 95% t-interval of a mean, by scipy."""
    from scipy import stats

    return stats.t.interval(0.95, len(values) - 1, loc=np.mean(values), scale=stats.sem(values))


def test_the_noise_conclusion_follows_from_the_prediction_at_batch_64(readings: list[scaling.CurveReading]) -> None:
    """Batch 32's steps to val_acc_recal 0.4 and B_simple's range predict batch 64's steps; the row's word and
    the conclusion follow where batch 64's measured interval lies against that prediction, computed here from
    the records (on the committed lr_search, searched on val_acc_recal: inside it, so consistent).
    """
    runs = tuned_runs()
    last = runs.loc[runs.groupby("run_id")["step"].idxmax(), "noise_scale"]
    at = {b: [steps_to(r, 0.4) for _, r in runs[runs["train.batch_size"] == b].groupby("run_id")] for b in (32, 64)}
    assert all(s is not None for s in at[32] + at[64])
    # (1 + Bn / B) / (1 + Bn / B0) falls as Bn grows: the prediction spans [smallest at the largest B_simple,
    # largest at the smallest B_simple]
    low32, high32 = t_interval(at[32])  # type: ignore[arg-type]
    floor = low32 * (1 + last.max() / 64) / (1 + last.max() / 32)
    ceiling = high32 * (1 + last.min() / 64) / (1 + last.min() / 32)
    low64, high64 = t_interval(at[64])  # type: ignore[arg-type]
    expected = (
        critical.MORE_STEPS if low64 > ceiling else critical.FEWER_STEPS if high64 < floor else critical.CONSISTENT
    )
    doc = Doc()
    steps.noise_section(doc, readings)
    text = text_of(doc)
    rows = [b.rows for b in doc.blocks if isinstance(b, Table) and b.head[0] == "target"][0]
    row = next(r for r in rows if r[0] == "0.4" and r[1] == "64")
    assert row[3] == f"{floor:.0f}-{ceiling:.0f}" and row[-1] == expected and "3 of 3" in row[4]
    assert expected == critical.CONSISTENT  # the committed data
    assert "batch 64 at 0.4" in text.split("consistent with B_simple there")[0]
    assert "consistent with B_simple there, which these few seeds do not pin down" in text


def test_the_steps_table_counts_every_seed_and_the_tuned_fit_is_compared_with_b_simple(
    readings: list[scaling.CurveReading],
) -> None:
    table = steps.steps_table(readings)
    assert set(table["metric"]) == {vocab.VAL_ACC_RECAL}  # every committed run recorded it
    tuned = table[(table["lr"] == scaling.TUNED) & (table["batch_size"] == 128)].set_index("target")
    runs = tuned_runs()
    for target, row in tuned.iterrows():  # every seed counted: reached, or not within the budget
        got = [steps_to(r, target) for _, r in runs[runs["train.batch_size"] == 128].groupby("run_id")]
        reached = sum(s is not None for s in got)
        assert (row["n_runs"], row["n_reached"], row["n_not_reached_within_budget"]) == (3, reached, 3 - reached)
    assert (tuned["n_reached"] < 3).any()  # the committed data: batch 128 misses its highest target
    expected = [steps_to(r, 0.3) for _, r in runs[runs["train.batch_size"] == 32].groupby("run_id")]
    at32 = table[(table["lr"] == scaling.TUNED) & (table["batch_size"] == 32) & (table["target"] == 0.3)]
    assert at32["steps_mean"].iloc[0] == pytest.approx(sum(expected) / 3)  # type: ignore[arg-type]
    fits = steps.fit_table(readings)
    assert set(fits["metric"]) == {vocab.VAL_ACC_RECAL}
    tuned_fits = fits[fits["lr"] == scaling.TUNED].set_index("target")
    # at 0.1 every seed of every batch size got there: four batch sizes, a fit
    reached = {
        b: all(steps_to(r, 0.1) for _, r in runs[runs["train.batch_size"] == b].groupby("run_id"))
        for b in (8, 32, 64, 128)
    }
    assert all(reached.values())
    fit = tuned_fits.loc[0.2]
    assert fit["batch_sizes_fitted"] == "8 32 64 128" and fit["batch_sizes_left_out"] == ""
    assert fit["b_crit_ci_low"] < fit["b_crit"] < fit["b_crit_ci_high"]
    # a fit wherever at least three batch sizes got there with every seed, none elsewhere; a fit the form does not
    # fit (lack of fit, here at 0.1) or whose interval has no upper end gives no number and says why
    complete = {
        t: sum(all(steps_to(r, t) for _, r in runs[runs["train.batch_size"] == b].groupby("run_id")) for b in reached)
        for t in tuned_fits.index
    }
    said = tuned_fits["not_identified"].fillna("")
    fitted = tuned_fits["b_crit"].notna() | said.str.contains("no upper end|does not fit")
    assert {t: n >= 3 for t, n in complete.items()} == fitted.to_dict()
    assert said.loc[0.1].startswith("S = S_min (1 + B_crit / B) does not fit these steps")
    last = runs.loc[runs.groupby("run_id")["step"].idxmax(), "noise_scale"]
    overlaps = fit["b_crit_ci_low"] <= last.max() and fit["b_crit_ci_high"] >= last.min()
    assert overlaps  # the committed data, searched on val_acc_recal: B_crit's interval meets B_simple's range
    doc = Doc()
    steps.noise_section(doc, readings)
    assert (
        f"Fitted critical batch size: at val_acc_recal 0.2, B_crit {fit['b_crit']:.0f} [{fit['b_crit_ci_low']:.0f}, "
        f"{fit['b_crit_ci_high']:.0f}] overlaps the range of B_simple"
    ) in text_of(doc)
    doc = Doc()
    steps.steps_section(doc, readings, [])
    fit_rows = [r for b in doc.blocks if isinstance(b, Table) and b.head[0] == "target" for r in b.rows]
    assert len(fit_rows) == len(fits)
    for row, (_, each) in zip(fit_rows, fits.iterrows(), strict=True):  # a number only where identified
        if each["not_identified"]:
            assert row[3] == "not identified" and row[4] == f"not identified: {each['not_identified']}"
        else:
            assert "nan" not in row[3] + row[4] and f"{each['b_crit']:.1f} [" in row[4]


def test_the_steps_figures_are_redrawn_only_when_their_numbers_change(
    readings: list[scaling.CurveReading], tmp_path: Path
) -> None:
    from dataclasses import replace

    from sweep.report.figures import steps as scaling_plots

    drawn = scaling_plots.draw(readings, tmp_path, svg=True)
    assert len(drawn) == sum(1 for r in readings if r.targets) >= 2
    assert all(f.svg is not None and f.svg.is_file() for f in drawn)
    first = {f.png: f.png.stat().st_mtime_ns for f in drawn}
    again = scaling_plots.draw(readings, tmp_path, svg=True)
    assert {f.png: f.png.stat().st_mtime_ns for f in again} == first  # nothing redrawn
    moved = [
        replace(r, reaches=r.reaches.assign(step=r.reaches["step"] + 1)) if i == 0 else r
        for i, r in enumerate(r for r in readings if r.targets)
    ]
    scaling_plots.draw(moved, tmp_path)
    changed = {p for p, t in first.items() if p.stat().st_mtime_ns != t}
    assert changed == {drawn[0].png}
    assert drawn[0].svg is not None and not drawn[0].svg.exists()  # an SVG of older numbers would mislead


# --- which accuracy the steps are read on


def batch_size_runs(folder: Path = RESULTS / "batch_sizes") -> dict[int, list[pd.DataFrame]]:
    epochs = pd.read_csv(folder / "epochs.csv")
    return {int(b): [r for _, r in rows.groupby("run_id")] for b, rows in epochs.groupby("train.batch_size")}


def log_fit_b_crit(steps_by_batch: dict[int, list[float]]) -> float:
    """B_crit of S = S_min (1 + B_crit / B), least squares in log steps, by scipy's optimizer."""
    from scipy.optimize import least_squares

    batch = np.array([b for b, values in steps_by_batch.items() for _ in values], dtype=float)
    log_steps = np.log([s for values in steps_by_batch.values() for s in values])
    fit = least_squares(lambda p: p[0] + np.log1p(np.exp(p[1]) / batch) - log_steps, x0=[np.log(30.0), np.log(50.0)])
    return float(np.exp(fit.x[1]))


def test_steps_to_target_on_batch_sizes_are_read_on_val_acc_recal() -> None:
    """Raw val_acc of batches 128 and 256 stays below 0.1 (BatchNorm's moving statistics lag their few steps);
    recalibrated, both reach it. The readings, tables, section and figure use val_acc_recal and say so.
    """
    runs = batch_size_runs()
    for b in (128, 256):
        assert all(steps_to(r, 0.1, metric=vocab.VAL_ACC) is None for r in runs[b])
    recal = {b: [steps_to(r, 0.1) for r in each] for b, each in runs.items()}
    assert all(s is not None for values in recal.values() for s in values)
    (reading,) = scaling.read(analysis.load([RESULTS / "batch_sizes"]))
    assert reading.curve.metric == vocab.VAL_ACC_RECAL
    table = steps.steps_table([reading])
    assert set(table["metric"]) == {vocab.VAL_ACC_RECAL}
    at = table[table["target"] == 0.1].set_index("batch_size")["steps_mean"]
    for b in (128, 256):
        assert at[b] == pytest.approx(np.mean(recal[b]))  # about 47 and 34 steps
    fit = steps.fit_table([reading]).set_index("target").loc[0.1]
    assert fit["metric"] == vocab.VAL_ACC_RECAL and fit["batch_sizes_fitted"] == "8 16 32 64 128 256"
    assert fit["b_crit"] == pytest.approx(log_fit_b_crit(recal), rel=0.01)  # about 89 (raw val_acc: 7.8)
    doc = Doc()
    steps.steps_section(doc, [reading], [])
    assert [b for b in doc.blocks if isinstance(b, Table)][0].head[1] == "target val_acc_recal"
    assert any(isinstance(b, Heading) and b.text.endswith("read on val_acc_recal") for b in doc.blocks)
    assert steps_figure(reading).get_suptitle().startswith("Steps to target val_acc_recal: ")


@pytest.mark.parametrize("missing", ["columns", "one run"])
def test_a_curve_without_recalibrated_records_is_read_on_val_acc_and_says_so(tmp_path: Path, missing: str) -> None:
    """Without val_acc_recal in every record of every run (no column, or one run without it) the curve
    falls back to raw val_acc for all its batch sizes, and says so.
    """
    epochs = pd.read_csv(RESULTS / "batch_sizes" / "epochs.csv")
    if missing == "columns":
        epochs = epochs.drop(columns=[c for c in epochs if c.endswith("_recal")])
    else:
        epochs.loc[epochs["run_id"] == epochs["run_id"].iloc[0], vocab.VAL_ACC_RECAL] = np.nan
    epochs.to_csv(tmp_path / "epochs.csv", index=False)
    pd.read_csv(RESULTS / "batch_sizes" / "runs.csv").to_csv(tmp_path / "runs.csv", index=False)
    (reading,) = scaling.read(analysis.load([tmp_path]))
    assert reading.curve.metric == vocab.VAL_ACC
    table = steps.steps_table([reading])
    assert set(table["metric"]) == {vocab.VAL_ACC}
    runs = batch_size_runs(tmp_path)
    raw = {b: [steps_to(r, 0.1, metric=vocab.VAL_ACC) for r in runs[b]] for b in (8, 16, 32, 64)}
    at = table[table["target"] == 0.1].set_index("batch_size")
    for b, values in raw.items():
        assert at.loc[b, "steps_mean"] == pytest.approx(np.mean(values))  # type: ignore[arg-type]
    assert (at.loc[[128, 256], "n_reached"] == 0).all()
    fit = steps.fit_table([reading]).set_index("target").loc[0.1]
    assert fit["metric"] == vocab.VAL_ACC and fit["b_crit"] == pytest.approx(log_fit_b_crit(raw), rel=0.01)
    doc = Doc()
    steps.steps_section(doc, [reading], [])
    assert [b for b in doc.blocks if isinstance(b, Table)][0].head[1] == "target val_acc"
    assert any(isinstance(b, Heading) and b.text.endswith("read on val_acc") for b in doc.blocks)
    assert steps_figure(reading).get_suptitle().startswith("Steps to target val_acc: ")
