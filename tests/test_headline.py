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


def test_the_headline_names_where_the_picture_shows_with_its_numbers() -> None:
    wide = per_setting()
    shows = wide[(wide[("gap", 64)] > 0.2) & (wide[("gap", 8)].abs() < 0.1)]
    first, _, test = the_headline()
    assert f"Over the {len(wide)} settings of {MAP_C1} where both batch sizes learned" in first
    assert f"shows at {len(shows)}: " in first
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
    _, mechanism, _ = the_headline()
    assert f"after batch 64's {steps:.0f} optimizer steps" in mechanism
    bn_weights = sorted(w for w in raw.index if w != "none")
    expected_raw = [f"{raw[w]:.2f} at weight {w}" for w in bn_weights] + [f"{raw['none']:.2f} without BatchNorm"]
    assert f"is {', '.join(expected_raw)};" in mechanism
    expected_recal = [f"{recal[w]:.2f}" for w in [*bn_weights, "none"]]
    assert f"recalibrated (eval_gap_recal), {', '.join(expected_recal)} in the same order" in mechanism
    assert bn_weights == [f"{0.99**steps:.2f}", f"{0.999**steps:.2f}"]


def test_recalibration_closes_the_gap_only_where_its_interval_says_so() -> None:
    *_, test = the_headline()
    wide = per_setting()
    shows = wide[(wide[("gap", 64)] > 0.2) & (wide[("gap", 8)].abs() < 0.1)]
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
