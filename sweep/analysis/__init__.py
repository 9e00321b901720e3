"""Results folders -> one table per question: runs, per-epoch rows, per-run snapshots, curves over seeds.

Reads only ``runs.csv`` and ``epochs.csv`` (written by `sweep.store.export_csv`);
never the training code, never TensorFlow (pandas, numpy, scipy only). The
statistics are in `sweep.analysis.estimates`, the choice of runs that answer a question
in `sweep.analysis.selection`; docs/report.md explains both to readers of the report.

A group is every run with the same settings; its n is its number of seeds.

The package: `results` (results folders loaded into tables, each run once); `settings` (a table's setting
columns, and where each key stands for the claims); `summary` (one row per run: snapshots, speed, its
copies' timings); `curves` (curves over seeds, the gaps); `tables` (curves.csv, gaps.csv, run_summary.csv);
`health` (runs with a problem: diverged, failed, at chance, stuck); `chance` (an arm over seeds against
chance: did it learn); `selection` (the runs that answer a question, paired by seed); `estimates`, `outcome`,
`power`, `sequential` (intervals, what a check came to, seeds for 80% power, seeds until decided);
`readings` (equal epochs, steps, fit or time); `reach` (where a run first reaches a target, C6's time to its
target); `scaling`, `scaling_fit`, `critical` (steps to target, the critical batch size); `tuning` (batch
sizes at their own best lr); `runner_up` (how much the choice of lr moves a tuned result); `decisions`
(decisions.csv); `timing` (timing.csv read back); `study`, `study_advice`, `study_decision` (a batch-size
study of the user's model read back, what it recommends, and the decision rule on intervals that picks it).
This module only re-exports the first five's names, as `sweep.analysis.<name>`.
"""

from __future__ import annotations

from sweep.analysis import timing
from sweep.analysis.curves import CURVE_METRICS, gap_table, summarize
from sweep.analysis.results import (
    BACKEND_DEFAULT,
    SOURCE,
    SOURCE_RANK,
    Results,
    ResultsError,
    load,
    spec_hash,
    with_run_column,
)
from sweep.analysis.settings import (
    BATCH_SIZE,
    CONTROL_COMPANIONS,
    CONTROL_DEFAULTS,
    GPUS,
    POST_DEFAULTS,
    SETTING_PREFIXES,
    TOGGLE_REFERENCE,
    TOGGLES,
    row_key,
    setting_columns,
    varying,
)
from sweep.analysis.summary import (
    EPOCH_TWO,
    PACK_SIZE,
    QUIET_EPOCH_SECONDS,
    SNAPSHOT_METRICS,
    SNAPSHOT_WHERE_MEASURED,
    TIMED_COPIES,
    at_epoch,
    column,
    run_summary,
    timing_copies,
    with_timing_copies,
)
from sweep.analysis.tables import write_tables

__all__ = [
    "BACKEND_DEFAULT",
    "BATCH_SIZE",
    "CONTROL_COMPANIONS",
    "CONTROL_DEFAULTS",
    "CURVE_METRICS",
    "EPOCH_TWO",
    "GPUS",
    "PACK_SIZE",
    "POST_DEFAULTS",
    "QUIET_EPOCH_SECONDS",
    "SETTING_PREFIXES",
    "SNAPSHOT_METRICS",
    "SNAPSHOT_WHERE_MEASURED",
    "SOURCE",
    "SOURCE_RANK",
    "TIMED_COPIES",
    "TOGGLES",
    "TOGGLE_REFERENCE",
    "Results",
    "ResultsError",
    "at_epoch",
    "column",
    "gap_table",
    "load",
    "row_key",
    "run_summary",
    "setting_columns",
    "spec_hash",
    "summarize",
    "timing",
    "timing_copies",
    "varying",
    "with_run_column",
    "with_timing_copies",
    "write_tables",
]
