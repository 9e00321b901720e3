"""Quiet training times read back: timing.csv (written by `python -m sweep time`, sweep/train/timing.py)
matched to a folder's runs by their configuration (sweep/config/timing_schema.py), and the sentence the
report says about where they come from. pandas only.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pandas as pd

from sweep import vocab
from sweep.config.plan import RunSpec
from sweep.config.timing_schema import (
    CPU,
    LOAD_AFTER,
    LOAD_BEFORE,
    MEASURED,
    QUIET_REPEATS,
    QUIET_STEP_SECONDS,
    REPEATS,
    REPEATS_SECONDS,
    STEP_SECONDS,
    STEPS_PER_EPOCH,
    THREADS,
    config_key,
    timing_keys,
)


def read(path: Path) -> pd.DataFrame | None:
    return pd.read_csv(path) if path.is_file() else None


def _keyed(timing: pd.DataFrame, other: Iterable[str]) -> tuple[list[str], pd.Series]:
    """The configuration keys to match on (timing.csv's and `other`'s: either may predate a key) and each
    timing row's configuration string.
    """
    names = timing_keys(timing.columns)
    names += [k for k in timing_keys(other) if k not in names]
    return names, timing.apply(lambda row: config_key(row, names), axis=1)


def attach(folder: Path, epochs: pd.DataFrame) -> pd.DataFrame:
    """`epochs` with each run's quiet seconds per optimizer step from `folder/timing.csv`, and its configuration's
    repeats' epoch seconds as text in the order measured (empty where none matched).
    """
    timing = read(folder / vocab.TIMING_CSV)
    if timing is None or epochs.empty:
        return epochs
    names, keys_of = _keyed(timing, epochs.columns)
    per_config = dict(zip(keys_of, timing[STEP_SECONDS], strict=True))
    repeats = dict(zip(keys_of, timing[REPEATS_SECONDS].astype(str), strict=True)) if REPEATS_SECONDS in timing else {}
    runs = epochs.drop_duplicates(vocab.RUN_ID)  # settings are per run: one key each, not one per record
    per_run = dict(zip(runs[vocab.RUN_ID], runs.apply(lambda row: config_key(row, names), axis=1), strict=True))
    configs = epochs[vocab.RUN_ID].map(per_run)
    return epochs.assign(
        **{QUIET_STEP_SECONDS: configs.map(per_config).astype(float), QUIET_REPEATS: configs.map(repeats)}
    )


def first_record_seconds(folder: Path, spec: RunSpec) -> float | None:
    """Quiet seconds from a run's first step to its first record where `folder/timing.csv` measured its
    configuration: its steps to that record (`train.eval_every_steps`, or an epoch's) x the best seconds per step.
    """
    timing = read(folder / vocab.TIMING_CSV)
    if timing is None or timing.empty:
        return None
    flat = spec.flat()
    names, keys_of = _keyed(timing, flat)
    rows = timing[keys_of == config_key(flat, names)]
    if rows.empty:
        return None
    steps = int(rows[STEPS_PER_EPOCH].iloc[-1])
    return float(rows[STEP_SECONDS].iloc[-1]) * min(steps, spec.point.train.eval_every_steps or steps)


def describe(folder: Path) -> str:
    """One sentence on where a folder's quiet times come from, for the report; empty without timing.csv."""
    timing = read(folder / vocab.TIMING_CSV)
    if timing is None or timing.empty:
        return ""
    load = pd.concat([timing[LOAD_BEFORE], timing[LOAD_AFTER]])
    return (
        f"Quiet seconds for {folder} are optimizer steps x the best of {int(timing[REPEATS].min())} "
        f"alternating one-epoch timings per configuration (`sweep time`, {folder / vocab.TIMING_CSV}; "
        f"{int(timing[THREADS].iloc[0])} thread(s), {timing[CPU].iloc[0]}, measured "
        f"{str(timing[MEASURED].min())[:10]}, 1-minute load average {load.min():.1f}-{load.max():.1f}); "
        "training only, without the evaluations at records."
    )
