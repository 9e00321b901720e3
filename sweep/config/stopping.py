"""`train.early_stopping`: the rule, its check, and when it stops a run.

The rule is read at the end of every epoch from the epoch's record (records inside
an epoch, `train.eval_every_steps`, are not looked at), as Keras's `EarlyStopping`
does: the run stops when `metric` has not improved by more than `min_delta` for
`patience` epochs in a row. A loss (`val_loss`, `val_loss_recal`, ...) improves downwards,
any other metric upwards. The run keeps the records it has; `runs.csv` says at which
epoch it stopped (`stopped_early`), and its final numbers are that epoch's.

Stopping is part of training (a stopped run has fewer epochs), so the rule takes
part in the run id like any other setting.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from sweep import vocab
from sweep.config.validators import decoded, got

METRICS = (
    vocab.VAL_ACC,
    vocab.VAL_LOSS,
    vocab.TRAIN_EVAL_ACC,
    vocab.TRAIN_EVAL_LOSS,
    vocab.TRAIN_ACC,
    vocab.TRAIN_LOSS,
    vocab.VAL_ACC_RECAL,
    vocab.VAL_LOSS_RECAL,
)
FIELDS = ("metric", "patience", "min_delta")


@dataclass(frozen=True)
class Rule:
    metric: str = vocab.VAL_ACC
    patience: int = 2
    min_delta: float = 0.0

    @property
    def lower_is_better(self) -> bool:
        """A loss improves downwards, recalibrated or not (val_loss_recal too), anything else upwards."""
        return "loss" in self.metric.split("_")


def rule_check(value: Any) -> str | None:
    """null, or {metric, patience, min_delta} (each optional) kept as canonical JSON text."""
    if value is None:
        return None
    value = decoded(value)  # JSON text as stored, or the file's mapping; bounded either way
    if not isinstance(value, dict) or set(value) - set(FIELDS):
        raise ValueError(f"must be a mapping with keys {', '.join(FIELDS)} (or null), {got(value)}")
    metric = value.get("metric", Rule.metric)
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {' | '.join(METRICS)}, {got(metric)}")
    patience = value.get("patience", Rule.patience)
    if not isinstance(patience, int) or isinstance(patience, bool) or patience < 1:
        raise ValueError(f"patience must be a positive integer (epochs without improvement), {got(patience)}")
    delta = value.get("min_delta", Rule.min_delta)
    if not isinstance(delta, (int, float)) or isinstance(delta, bool) or not (0 <= delta < math.inf):
        raise ValueError(f"min_delta must be a number >= 0, {got(delta)}")
    return json.dumps({"metric": metric, "patience": patience, "min_delta": float(delta)}, sort_keys=True)


def parse(text: str | None) -> Rule | None:
    return Rule(**json.loads(text)) if text else None


class Watch:
    """Feed it each epoch's record; `stop` turns true when the rule says so."""

    def __init__(self, rule: Rule) -> None:
        self.rule, self.best, self.waited = rule, math.nan, 0

    def stop(self, record: dict[str, Any]) -> bool:
        value = float(record[self.rule.metric])
        sign = -1.0 if self.rule.lower_is_better else 1.0
        if math.isnan(self.best) or sign * (value - self.best) > self.rule.min_delta:
            self.best, self.waited = value, 0
            return False
        self.waited += 1
        return self.waited >= self.rule.patience
