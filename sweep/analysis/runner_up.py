"""How much the choice of lr moves a tuned result: a search's runner-up lr re-run at the same seeds as its best
(`search.rerun: 2`, role runner_up), read on the same metric at each run's last record, and the paired difference
best - runner-up. One lr chosen on one held-out search seed carries that search's luck, which no interval over the
re-run seeds shows; the runner-up at the same seeds puts a number on it. pandas only.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from sweep import vocab
from sweep.analysis.estimates import Estimate, estimate
from sweep.vocab import RunStatus


@dataclass(frozen=True)
class RunnerUp:
    """A search's runner-up lr at the seeds its best lr was re-run at."""

    lr: float
    val: Estimate  # the metric at its runs' last record, over seeds
    gap: Estimate  # best - runner-up, paired by seed (the seeds both trained)


def runner_up(runs: pd.DataFrame, group: str, metric: str, best: dict[int, float]) -> RunnerUp | None:
    """The runner-up of search `group` (runs.csv rows of role runner_up, done), against the best lr's `best` (seed ->
    its metric at the last record); None where the search re-ran no runner-up or runs.csv lacks the reading.
    """
    column = f"final_{metric}"
    if vocab.ROLE not in runs or vocab.SEARCH_GROUP not in runs or column not in runs:
        return None
    mine = runs[
        (runs[vocab.ROLE] == vocab.RUNNER_UP)
        & (runs[vocab.SEARCH_GROUP] == group)
        & (runs[vocab.STATUS] == RunStatus.DONE)
    ]
    if mine.empty:
        return None
    values = mine.groupby(vocab.SEED)[column].mean().dropna()
    paired = [best[int(seed)] - float(v) for seed, v in values.items() if int(seed) in best]
    return RunnerUp(lr=float(mine["train.lr"].iloc[0]), val=estimate(values), gap=estimate(paired))
