"""C1's headline (sweep.report.sections.headline) on the committed results/map_c1: every number in its sentences
recomputed here from runs.csv and epochs.csv with plain pandas, not with the report's code.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from scipy.stats import binomtest

from sweep import analysis
from sweep.analysis import health
from sweep.claims import maps
from sweep.report.sections import headline

pytestmark = pytest.mark.unit

MAP_C1 = Path(__file__).resolve().parent.parent / "results" / "map_c1"
SETTING = ["model.batchnorm", "model.bn_momentum", "train.optimizer", "train.lr"]


def records() -> pd.DataFrame:
    epochs = pd.read_csv(MAP_C1 / "epochs.csv")
    epochs.loc[~epochs["model.batchnorm"], "model.bn_momentum"] = -1.0  # unused without BatchNorm
    return epochs


def epoch_two() -> pd.DataFrame:
    """Epoch-2 records of every run (a run at chance too: it is in its setting's numbers)."""
    epochs = records()
    rows = epochs[epochs["epoch"] == 2].copy()
    rows["gap"] = rows["train_acc"] - rows["val_acc"]
    return rows


def learned(metric: str, images: str) -> pd.Series:
    """(setting, batch size) -> whether its runs' `metric` at the last record is above chance: scipy's one-sided
    binomial test of the correct answers pooled over seeds (round(accuracy x images) per run), at 0.05.
    """
    runs = pd.read_csv(MAP_C1 / "runs.csv").set_index("run_id")
    last = records().sort_values("epoch").groupby("run_id").last()
    counts = runs.loc[last.index, ["val_samples", images]].min(axis=1)
    last = last.assign(
        correct=(last[metric] * counts).round(), images=counts, chance=1 / runs.loc[last.index, "num_classes"]
    )
    return last.groupby([*SETTING, "train.batch_size"]).apply(
        lambda g: (
            binomtest(int(g["correct"].sum()), int(g["images"].sum()), g["chance"].iloc[0], "greater").pvalue < 0.05
        )
    )


def per_setting() -> pd.DataFrame:
    """Seed means per setting and batch size, for the settings where both batch sizes learned: batch 8 on
    validation, batch 64 on validation or training images (the same `train_eval_acc_recal` the report reads).
    """
    means = epoch_two().groupby([*SETTING, "train.batch_size"])[["gap", "eval_gap_recal", "step"]].mean()
    wide = means.unstack("train.batch_size").dropna()
    val = learned("val_acc_recal", "val_samples").unstack("train.batch_size")
    train = learned("train_eval_acc_recal", "train_samples").unstack("train.batch_size")
    both = val[8] & (val[64] | train[64])
    return wide[both.reindex(wide.index).astype(bool)]


def the_headline() -> list[str]:
    results = analysis.load([MAP_C1])
    problems = health.run_health(results)
    found = maps.maps(health.claims_summary(results, problems))
    (c1,) = [m for m in found if m.claim.id == "C1"]
    return headline.sentences(c1)


T_975_2DF = 4.302652729911275


def interval(values: pd.Series) -> tuple[float, float]:
    half = T_975_2DF * values.std(ddof=1) / len(values) ** 0.5
    return values.mean() - half, values.mean() + half


def showing() -> list[tuple]:
    """The settings where the post's picture shows at its size: batch 64's gap interval wholly above 0.5, batch 8's
    wholly within +-0.1 (the map's rule, by hand).
    """
    runs, found = epoch_two(), []
    for key, rows in runs.groupby(SETTING):
        if rows["train.batch_size"].nunique() < 2:  # trained at one batch size only: no cell
            continue
        low64, _ = interval(rows.loc[rows["train.batch_size"] == 64, "gap"])
        low8, high8 = interval(rows.loc[rows["train.batch_size"] == 8, "gap"])
        if low64 > 0.5 and low8 > -0.1 and high8 < 0.1:
            found.append(key)
    return found


def test_the_headline_names_where_the_picture_shows_with_its_numbers() -> None:
    wide = per_setting()
    shows = wide.loc[showing()] if showing() else wide.iloc[0:0]
    first, *rest = the_headline()
    assert f"Over the {len(wide)} settings of {MAP_C1} where both batch sizes learned" in first
    assert f"shows at {len(shows)}" in first
    test = rest[-1] if len(rest) == 2 else ""
    for (bn, momentum, optimizer, lr), row in shows.iterrows():
        label = f"batchnorm={bn}, bn_momentum={momentum:g}, optimizer={optimizer}, lr={lr:g}"
        assert label in first
        assert f"{label}: gap {row[('gap', 64)]:.3f} [" in test
        assert f"eval_gap_recal {row[('eval_gap_recal', 64)]:.3f} [" in test
        assert f"and {row[('eval_gap_recal', 8)]:.2f} at batch 8" in test


def test_the_mechanism_sentence_is_the_gap_by_weight_of_the_initial_statistics() -> None:
    wide = per_setting().reset_index()
    steps = wide[("step", 64)].iloc[0]
    weight = wide["model.bn_momentum"].map(lambda m: "none" if m < 0 else f"{m**steps:.2f}")
    raw = wide[("gap", 64)].groupby(weight).mean()
    recal = wide[("eval_gap_recal", 64)].groupby(weight).mean()
    mechanism = the_headline()[1]
    assert f"after batch 64's {steps:.0f} optimizer steps" in mechanism
    bn_weights = sorted(w for w in raw.index if w != "none")
    expected_raw = [f"{raw[w]:.2f} at weight {w}" for w in bn_weights] + [f"{raw['none']:.2f} without BatchNorm"]
    assert f"is {', '.join(expected_raw)};" in mechanism
    expected_recal = [f"{recal[w]:.2f}" for w in [*bn_weights, "none"]]
    assert f"recalibrated (eval_gap_recal), {', '.join(expected_recal)} in the same order" in mechanism
    assert bn_weights == [f"{0.99**steps:.2f}", f"{0.999**steps:.2f}"]


def test_recalibration_closes_the_gap_only_where_its_interval_says_so() -> None:
    sentences = the_headline()
    wide = per_setting()
    shows = wide.loc[showing()] if showing() else wide.iloc[0:0]
    if shows.empty:  # nothing to close: no sentence about it
        assert len(sentences) == 2
        return
    test = sentences[2]
    runs = epoch_two()
    closed = 0
    for key in shows.index:
        at = runs[(runs[SETTING].apply(tuple, axis=1) == key) & (runs["train.batch_size"] == 64)]
        values = at["eval_gap_recal"]
        half = 4.302652729911275 * values.std(ddof=1) / len(values) ** 0.5  # t(0.975, 2)
        closed += values.mean() + half < 0.2
    if closed == len(shows):
        assert f"at all {len(shows)} the recalibrated gap's 95% interval lies below 0.2" in test
    else:
        assert f"at {closed} of {len(shows)} the recalibrated gap's 95% interval lies below 0.2" in test


def test_the_mechanism_figure_draws_each_cell_raw_and_each_trained_weight_once_recalibrated() -> None:
    """Cells that differ only in BatchNorm momentum trained the same weights (by hand: their recalibrated gaps are
    equal), so the figure draws one open point for them and one filled point per cell, at momentum^steps.
    """
    from matplotlib.colors import to_rgba

    from sweep.report.figures import lag

    results = analysis.load([MAP_C1])
    (c1,) = [m for m in maps.maps(health.claims_summary(results, health.run_health(results))) if m.claim.id == "C1"]
    settings = [s for s in headline_settings(c1) if s.weight is not None]
    twins = {s.twin for s in settings}
    assert len(twins) < len(settings)  # momentum 0.99 and 0.999 of one setting: one set of weights
    for twin in twins:
        recal = {round(s.recal_gap.mean, 12) for s in settings if s.twin == twin}
        assert len(recal) == 1, twin  # identical weights, identical recalibrated numbers
    fig = lag.figure(settings)
    large = fig.axes[1]
    markers = [line for line in large.get_lines() if line.get_marker() == "o" and len(line.get_xdata()) == 1]
    drawn = [m for m in markers if m.get_label().startswith("_")]  # the legend's entries are labelled
    open_points = [m for m in drawn if to_rgba(m.get_markerfacecolor()) == to_rgba("white")]
    assert len(open_points) == len(twins) and len(drawn) - len(open_points) == len(settings)
    filled_x = sorted(float(m.get_xdata()[0]) for m in drawn if m not in open_points)
    assert filled_x == pytest.approx(sorted(s.weight for s in settings))


def headline_settings(m: maps.ConditionMap) -> list:
    from sweep.claims import headline as claims_headline

    return claims_headline.settings(m)
