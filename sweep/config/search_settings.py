"""The grid file's `search:` block: a learning-rate search for every grid point, its settings, their
checks, and what a grid cannot do while it searches (vary or scale the learning rate itself).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from sweep.config.keys import PointConfig
from sweep.config.problems import KeyProblem, checked, reject_unknown
from sweep.config.validators import boolean, got, non_negative_int, number_in, one_of, positive_int
from sweep.vocab import RECAL

# The metric a learning-rate search optimises, at the last epoch, and in which direction. The `_recal`
# ones read BatchNorm statistics recomputed for the weights (train.recalibrate_bn): raw val_acc lags
# behind the weights where few steps were taken, so it scores such trials on that lag, not only their lr.
SEARCH_METRICS: dict[str, Literal["maximize", "minimize"]] = {
    "val_acc": "maximize",
    "val_loss": "minimize",
    "val_acc_recal": "maximize",
    "val_loss_recal": "minimize",
}
SEARCH_KEYS = ("lr", "trials", "metric", "seed", "data_seed", "prune", "widen", "rerun")
SEARCH_DOCS = {
    "search.lr": "{low, high, log}: the range learning rates are drawn from (log: true, the default, = log-uniform)",
    "search.trials": "learning rates tried per grid point (default 8; the first half at random, then TPE)",
    "search.metric": "val_acc (maximised, the default) | val_loss (minimised) | val_acc_recal | val_loss_recal "
    "(the same with recalibrated BatchNorm; need train.recalibrate_bn: true), at the last epoch",
    "search.seed": "the seed the trials run at (default 0; pick one outside seeds: so the re-runs are fresh)",
    "search.data_seed": "the data.seed the trials run at (default: the grid's): another split of the data (and, for a "
    "built-in dataset, other images), so the lr is not chosen on the validation images its re-runs are read on",
    "search.prune": "stop a trial below the median of earlier trials from epoch 2 (default true)",
    "search.widen": "times a search whose best lr sits at an edge of its range reaches a decade past that edge, "
    "with half as many trials again (default 2; 0: never)",
    "search.rerun": "how many of a search's best lrs are re-run at every seed (default 1; 2 also re-runs the "
    "runner-up, role runner_up, so a report can say how much the choice of lr moves the result)",
}
SEARCH_LR_KEYS = ("low", "high", "log")


@dataclass(frozen=True)
class SearchConfig:
    """The `search:` block: a learning-rate search for every grid point, then its best lr over the seeds.

    Every combination of the grid (and variants) gets its own Optuna study of
    `trials` runs at seed `seed`, each with a learning rate drawn from
    [lr_low, lr_high]; the best one is re-run at every seed of the grid file.
    """

    lr_low: float
    lr_high: float
    lr_log: bool = True
    trials: int = 8
    metric: str = "val_acc"
    seed: int = 0
    data_seed: int | None = None  # held out: the trials' data.seed, where it differs from the grid's
    prune: bool = True
    widen: int = 2  # times the range may reach a decade further when the best lr sits at its edge
    rerun: int = 1  # the best lrs re-run at every seed: the best (tuned), then runner-ups (runner_up)


def parse_search(raw: Any) -> SearchConfig:
    """The `search:` block of a grid file, checked; KeyProblem at the first key that is wrong."""
    example = "e.g. {lr: {low: 1e-4, high: 1e-1}, trials: 8}"
    if not isinstance(raw, dict) or "lr" not in raw:
        raise KeyProblem("search", f"must be a mapping with at least lr: {{low, high}}, {example}; {got(raw)}")
    reject_unknown(raw, SEARCH_KEYS, "search.")
    lr = raw["lr"]
    if not isinstance(lr, dict) or not {"low", "high"} <= set(lr):
        raise KeyProblem("search.lr", f"must be a mapping with low and high (and optionally log), {got(lr)}")
    reject_unknown(lr, SEARCH_LR_KEYS, "search.lr.")
    positive = number_in(0, math.inf, low_open=True, high_open=True)
    low = checked("search.lr.low", positive, lr["low"])
    high = checked("search.lr.high", positive, lr["high"])
    if low >= high:
        raise KeyProblem("search.lr", f"low must be less than high, got low={low:g}, high={high:g}")
    return SearchConfig(
        lr_low=low,
        lr_high=high,
        lr_log=checked("search.lr.log", boolean, lr.get("log", True)),
        trials=checked("search.trials", positive_int, raw.get("trials", 8)),
        metric=checked("search.metric", one_of(*SEARCH_METRICS), raw.get("metric", "val_acc")),
        seed=checked("search.seed", non_negative_int, raw.get("seed", 0)),
        data_seed=None
        if raw.get("data_seed") is None
        else checked("search.data_seed", non_negative_int, raw["data_seed"]),
        prune=checked("search.prune", boolean, raw.get("prune", True)),
        widen=checked("search.widen", non_negative_int, raw.get("widen", 2)),
        rerun=checked("search.rerun", positive_int, raw.get("rerun", 1)),
    )


def check_metric(search: SearchConfig, point: PointConfig, point_name: str) -> None:
    """A `_recal` metric is in a run's records only with train.recalibrate_bn: true; without it every trial
    would fail at the end of its first epoch, when the search reads it.
    """
    if search.metric.endswith(RECAL) and not point.train.recalibrate_bn:
        raw = " | ".join(m for m in SEARCH_METRICS if not m.endswith(RECAL))
        raise KeyProblem(
            "search.metric",
            f"{search.metric} is recorded only with train.recalibrate_bn: true, which {point_name} does "
            f"not set; set it, or use {raw}",
        )


def lr_problem(point: PointConfig, varied: list[str]) -> str | None:
    """With search:, the learning rate is the search's: it cannot also be varied or scaled."""
    if "train.lr" in varied:
        return (
            "train.lr is tuned by search.lr; remove it from grid and variants "
            "(base.train.lr stays the untuned reference)"
        )
    if point.train.lr_scaling != "none":
        return (
            "train.lr_scaling must be none with search: the search picks the learning rate of every batch size itself"
        )
    return None
