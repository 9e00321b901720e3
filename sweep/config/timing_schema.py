"""timing.csv's schema: which settings make a *configuration* (they set the cost of one training step:
the dataset and input shape, the model, the optimizer, the batch size and the replicas), its key, and
the file's columns. Seed, learning rate, data order, imbalance, budgets and measuring settings leave
that cost alone, so every run that differs only in those shares one row, and runs are matched to rows
by these keys. Written by sweep/train/timing.py, read by sweep/analysis/timing.py. No TensorFlow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sweep.config import declared
from sweep.config.plan import RunSpec

MODEL_PREFIX = "model."
SHAPE_KEYS = ("data.dataset", "data.classes", "data.image_size", "train.optimizer", "train.batch_size", "train.gpus")
CONFIG = "config"  # the normalised timing keys' values, one string per configuration
STEP_SECONDS = "step_seconds_best"
QUIET_STEP_SECONDS = "quiet_step_seconds"  # the column `attach` adds to epochs
REPEATS_SECONDS = "epoch_seconds_all"  # timing.csv: every repeat's epoch seconds, in the order measured
QUIET_REPEATS = "quiet_epoch_seconds_repeats"  # the column `attach` adds: that text, per run


def timing_keys(flat: Iterable[str]) -> list[str]:
    """The dotted keys of a spec (or runs.csv columns) that set a training step's cost."""
    names = list(flat)
    return [k for k in names if k.startswith(MODEL_PREFIX)] + [k for k in SHAPE_KEYS if k in names]


def _normal(value: Any) -> str:
    """One spelling per value, whether it came from a spec or through a CSV (1 == 1.0, True == 'True')."""
    if value is None or (isinstance(value, float) and value != value):
        return "none"
    if isinstance(value, bool) or str(value) in ("True", "False"):
        return str(value).lower()
    try:
        return f"{float(value):g}"
    except (TypeError, ValueError):
        return str(value)


def config_key(values: Mapping[str, Any], names: Iterable[str]) -> str:
    """A setting missing from `values` (a column written before the key existed) is at its default."""
    return " ".join(f"{k}={_normal(values.get(k, declared.default(k)))}" for k in names)


def configurations(specs: Iterable[RunSpec]) -> dict[str, RunSpec]:
    """The first spec of each configuration, in plan order."""
    found: dict[str, RunSpec] = {}
    for spec in specs:
        flat = spec.flat()
        found.setdefault(config_key(flat, timing_keys(flat)), spec)
    return found
