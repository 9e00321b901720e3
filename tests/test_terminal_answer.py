"""What `sweep run` and `sweep report` print at their end (sweep/report/sections/first_screen.py, `terminal`): each
claim's verdict, its effect, and its size and mechanism statements, each decided alone; an arm that stays at chance
named. On the committed results, against numbers recomputed here with pandas and scipy.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent


def epoch_two_gap(folder: Path) -> pd.Series:
    """eval_gap_recal at epoch 2, batch 64 minus batch 8, paired by seed."""
    e = pd.read_csv(folder / "epochs.csv")
    e = e[e["epoch"] == 2]
    gap = (e["train_eval_acc_recal"] - e["val_acc_recal"]).groupby([e["train.batch_size"], e["seed"]]).first()
    return (gap[64] - gap[8]).dropna()


def test_the_main_job_ends_with_c1s_direction_and_mechanism_in_words(tmp_path: Path) -> None:
    from sweep import report

    lines = report.build([REPO / "results" / "article"], tmp_path).summary
    block = lines[lines.index(next(x for x in lines if x.startswith("C1 "))) :][:4]
    diff = epoch_two_gap(REPO / "results" / "article")
    half = stats.t.ppf(0.975, len(diff) - 1) * diff.std(ddof=1) / np.sqrt(len(diff))
    # TOST at +-0.03: both one-sided tests below 0.05
    p = max(
        stats.ttest_1samp(diff, -0.03, alternative="greater").pvalue,
        stats.ttest_1samp(diff, 0.03, alternative="less").pvalue,
    )
    assert p < 0.05
    expected = (
        f"    mechanism holds: eval_gap_recal, batch 64 - 8, epoch 2 {diff.mean():.3f} "
        f"[{diff.mean() - half:.3f}, {diff.mean() + half:.3f}] (n={len(diff)}), equal when within +-0.03"
    )
    assert expected in block
    assert block[0].endswith(": direction shown, size not") and block[2].startswith("    size not reproduced: gap at")


def test_a_cause_that_prevents_learning_says_so_on_the_terminal(tmp_path: Path) -> None:
    from sweep import report

    lines = report.build([REPO / "results" / "causes"], tmp_path).summary
    start = lines.index(next(x for x in lines if x.startswith("C3 ")))
    named = [x for x in lines[start + 1 : start + 4] if "prevents learning" in x]
    assert len(named) == 1 and re.match(r"    the cause prevents learning: shuffle=False at chance", named[0])


def test_the_first_screen_says_where_the_budget_changes_the_batch_size_answer(tmp_path: Path) -> None:
    """results/batch_sizes, fixed lr: C8 is read recalibrated at equal epochs; the first screen names the budgets
    at which tables/readings.csv decides it the other way on the same reading, and no undecided one.
    """
    from sweep import report

    written = report.build([REPO / "results" / "batch_sizes"], tmp_path)
    readings = pd.read_csv(tmp_path / "tables" / "readings.csv").drop_duplicates(["claim", "reading", "batchnorm"])
    c8 = readings[(readings["claim"] == "C8") & (readings["batchnorm"] == "BatchNorm recalibrated")]
    own = c8.loc[c8["reading"] == "equal epochs", "verdict"].item()
    flipped = c8[c8["verdict"].isin(["supported", "contradicted"]) & (c8["verdict"] != own)]
    assert own == "supported" and len(flipped) >= 1
    said = ", ".join(f"{v} at {r}" for r, v in zip(flipped["reading"], flipped["verdict"], strict=True))
    (bullet,) = [line for line in written.markdown.read_text().splitlines() if "The budget changes" in line]
    assert f"C8 is supported at equal epochs, {said} (the same runs;" in bullet and "inconclusive" not in bullet
