"""A search's runner-up lr re-run at the seeds of its best (`search.rerun: 2`): the study reads the paired difference
best - runner-up, against scipy's t interval of the same differences, says it beside the search, writes it in
tables/study.csv, and warns only where its interval reaches past the margin.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from test_study import SEEDS, _run, write_study

from sweep import vocab
from sweep.analysis import study, study_advice
from sweep.report import study_report, study_words

pytestmark = pytest.mark.unit

RUNNER_LR = 0.001


def _with_runner_up(folder: Path, batch: int, below: dict[int, float]) -> None:
    """Batch `batch`'s runner-up at every seed, scoring `below[seed]` under that seed's best-lr run."""
    best = study.read(folder).rung(batch).seeds()
    runs = pd.read_csv(folder / vocab.RUNS_CSV)
    group = str(
        runs.loc[(runs[vocab.ROLE] == vocab.TUNED) & (runs["train.batch_size"] == batch), vocab.SEARCH_GROUP].iloc[0]
    )
    rows = [
        {
            vocab.RUN_ID: f"bs{batch}-lr{RUNNER_LR:g}-s{seed}-r{seed}",
            **_run(vocab.RUNNER_UP, group, seed, batch, RUNNER_LR, {"train.optimizer": "adam", "train.epochs": 3}),
            "final_val_acc_recal": best[seed] - below[seed],
        }
        for seed in SEEDS
    ]
    pd.concat([runs, pd.DataFrame(rows)], ignore_index=True).to_csv(folder / vocab.RUNS_CSV, index=False)


def test_the_runner_up_is_read_paired_by_seed_and_warned_of_only_past_the_margin(tmp_path: Path) -> None:
    folder = write_study(tmp_path / "s")
    close = dict(zip(SEEDS, (0.004, -0.002, 0.006, 0.001, 0.003), strict=True))
    far = dict(zip(SEEDS, (0.05, 0.01, 0.09, 0.03, 0.07), strict=True))
    _with_runner_up(folder, 16, close)
    _with_runner_up(folder, 64, far)
    found = study.read(folder)
    for batch, below in ((16, close), (64, far)):
        gap = found.rung(batch).runner_up.gap
        d = np.array(list(below.values()))
        low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
        assert (gap.n, gap.mean, gap.low, gap.high) == (
            5,
            pytest.approx(d.mean()),
            pytest.approx(low),
            pytest.approx(high),
        )
    assert found.rung(8).runner_up is None  # no runner-up re-run
    advice = study_advice.advise(found)
    said = [w for w in advice.warnings if "runner-up" in w]
    assert len(said) == 1 and said[0].startswith("Batch 64: its runner-up lr 0.001 scores ")
    table = study_report.csv_table(found, advice).set_index("batch_size")
    assert table.loc[64, "runner_up_lr"] == RUNNER_LR and table.loc[
        64, "best_minus_runner_up_estimate"
    ] == pytest.approx(0.05)
    assert np.isnan(table.loc[8, "runner_up_lr"]) and table.loc[8, "best_minus_runner_up_n"] == 0
    assert study_words.runner_up_words(found, found.rung(64)).startswith("; the runner-up lr 0.001 scores ")
    assert study_words.runner_up_words(found, found.rung(8)) == ""
