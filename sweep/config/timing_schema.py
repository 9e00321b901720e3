"""timing.csv's schema: which settings make a *configuration* (they set the cost of one training step:
the dataset and input shape, the model, the optimizer, the batch size and the replicas), its key, and
the file's columns. Seed, learning rate, data order, imbalance, budgets and measuring settings leave
that cost alone, so every run that differs only in those shares one row, and runs are matched to rows
by these keys. Which keys set the cost is declared on each key (`cost=`, sweep/config/keys.py). Written
by sweep/train/timing.py, read by sweep/analysis/timing.py and `sweep study` (sweep/run/study.py), each
column by its name here. No TensorFlow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sweep import vocab
from sweep.config import declared
from sweep.config.plan import RunSpec

# timing.csv's columns, in this order: the configuration, one column per key that sets its cost (`timing_keys`),
# then the rest
CONFIG = "config"  # the normalised timing keys' values, one string per configuration
SWEEP = vocab.SWEEP  # the grid's name
TIMED_RUN_ID = "timed_run_id"  # the run whose settings were timed (the configuration's first in plan order)
TRAIN_SAMPLES = "train_samples"
STEPS_PER_EPOCH = "steps_per_epoch"
REPEATS = "repeats"  # timed epochs
EPOCH_SECONDS_BEST = "epoch_seconds_best"
EPOCH_SECONDS_MEDIAN = "epoch_seconds_median"
REPEATS_SECONDS = "epoch_seconds_all"  # every repeat's epoch seconds, in the order measured
STEP_SECONDS = "step_seconds_best"  # epoch_seconds_best / steps_per_epoch
THREADS = "threads"
CPU = "cpu"
LOAD_BEFORE, LOAD_AFTER = "load_average_before", "load_average_after"  # the 1-minute load average
MEASURED = "measured"  # when, UTC, ISO 8601

# The columns `attach` (sweep/analysis/timing.py) adds to epochs
QUIET_STEP_SECONDS = "quiet_step_seconds"
QUIET_REPEATS = "quiet_epoch_seconds_repeats"  # REPEATS_SECONDS' text, per run


def timing_keys(flat: Iterable[str]) -> list[str]:
    """The dotted keys of a spec (or runs.csv columns) that set a training step's cost, in timing.csv's order."""
    names = set(flat)
    return [k for k in declared.cost_keys() if k in names]


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
