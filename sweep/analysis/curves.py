"""Curves over seeds: every metric at every epoch, per group of runs with the same settings, its mean and 95%
interval over the seeds (`summarize`), and the gaps at epoch 2 and at the last epoch (`gap_table`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from sweep import vocab
from sweep.analysis.estimates import t_multiplier
from sweep.analysis.settings import setting_columns
from sweep.analysis.summary import EPOCH_TWO, at_epoch

CURVE_METRICS: tuple[str, ...] = tuple(m for m in vocab.EPOCH_METRICS if m != vocab.EPOCH)


def summarize(
    table: pd.DataFrame, metrics: Sequence[str] = CURVE_METRICS, by: Sequence[str] | None = None
) -> pd.DataFrame:
    """Long table: one row per (group, epoch, metric) with n, mean, sd, ci_low, ci_high.

    A group is every run with the same settings (all setting columns unless `by`).
    """
    by = list(setting_columns(table) if by is None else by)
    present = [m for m in metrics if m in table]
    if table.empty or not present:
        return pd.DataFrame(columns=[*by, vocab.EPOCH, "metric", "n", "mean", "sd", "ci_low", "ci_high"])
    long = table.melt(id_vars=[*by, vocab.EPOCH], value_vars=present, var_name="metric")
    stats = (
        long.groupby([*by, vocab.EPOCH, "metric"], dropna=False, sort=True)["value"]
        .agg(n="count", mean="mean", sd="std")
        .reset_index()
    )
    mult = stats["n"].map(lambda n: t_multiplier(int(n)))
    half = mult * stats["sd"] / np.sqrt(stats["n"])
    return stats.assign(ci_low=stats["mean"] - half, ci_high=stats["mean"] + half)


def gap_table(epochs: pd.DataFrame) -> pd.DataFrame:
    """gap and eval_gap (and the accuracies behind them) at epoch 2 and at the last epoch, per group."""
    metrics = (vocab.GAP, vocab.EVAL_GAP, vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.VAL_ACC)
    parts = [
        summarize(at_epoch(epochs, e), metrics).assign(at=label)
        for label, e in (("epoch 2", EPOCH_TWO), ("last", None))
    ]
    return pd.concat(parts, ignore_index=True)
