"""C6, "large batches: faster": the epoch time of the largest batch against the smallest's, from the quiet
`sweep time` repeats where every compared run has them, else from the runs' own epoch times on a shared
machine, with notes on packed runs, runs timed in several folders and the spread of every timed epoch.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, PACK_SIZE, QUIET_EPOCH_SECONDS, TIMED_COPIES
from sweep.analysis.estimates import Check, Estimate, Key, estimate
from sweep.analysis.selection import Selection, fmt_value, paired_relative, sorted_values, where
from sweep.claims.checks import across_batch_sizes, estimate_at, finding_from
from sweep.claims.findings import SPEEDUP, Finding, ReadFrom
from sweep.config.timing_schema import QUIET_REPEATS


@across_batch_sizes
def check_large_batch_faster(sel: Selection, small: Any, large: Any) -> Finding | None:
    """Epoch time, largest vs smallest batch: from the quiet `sweep time` repeats where every run has them
    (paired by repeat), else each run's median epoch time (epochs 2 onwards), paired by seed.
    """
    median = f"{vocab.EPOCH_SECONDS}_median"
    reading = median if median in sel.rows else vocab.EPOCH_SECONDS  # summaries written before the spread existed
    in_run = paired_relative(sel.rows, BATCH_SIZE, small, large, reading)
    in_run_label = (
        f"median epoch time at batch {fmt_value(large)} relative to batch {fmt_value(small)} (paired; -0.5 = half)"
    )
    quiet = _quiet_change(sel.rows, small, large)
    first: tuple[tuple[str, Estimate], ...] = ()
    if quiet is not None:
        label = (
            f"quiet epoch time at batch {fmt_value(large)} relative to batch {fmt_value(small)} "
            "(`sweep time`, paired by repeat; -0.5 = half)"
        )
        quiet_key = Key(QUIET_EPOCH_SECONDS, ((BATCH_SIZE, f"{fmt_value(large)} / {fmt_value(small)}"),))
        short = f"quiet epoch time at batch {fmt_value(large)} relative to batch {fmt_value(small)}"
        checks = (Check(label, quiet, high=-SPEEDUP.value, key=quiet_key, short=short),)
        first = ((f"in-run {in_run_label}", in_run),)
    else:
        in_run_key = Key(reading, ((BATCH_SIZE, f"{fmt_value(large)} / {fmt_value(small)}"),))
        short = f"median epoch time at batch {fmt_value(large)} relative to batch {fmt_value(small)}"
        checks = (Check(in_run_label, in_run, high=-SPEEDUP.value, key=in_run_key, short=short),)
    evidence = first + tuple(
        (f"{metric} at batch {fmt_value(bs)}", estimate_at(sel.rows, BATCH_SIZE, bs, metric))
        for metric in (vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND)
        for bs in sorted_values(sel.rows[BATCH_SIZE])
    )
    notes = (
        "In-run epoch time is each run's median over epochs 2 onwards (epoch 1 includes graph tracing and is left "
        "out), measured while the runs trained on a shared machine, not in a benchmark: other work on the machine "
        "slows some epochs. The spread of every timed epoch per batch size, fastest / median of the runs' "
        f"medians / slowest (seconds): {_spread(sel.rows)}.",
        *_copies_note(sel.rows),
        *_packed_note(sel.rows),
        *_quiet_note(sel.rows, small, large),
    )
    finding = finding_from(checks, sel, evidence, notes)
    return dataclasses.replace(finding, read_from=ReadFrom.QUIET if quiet is not None else ReadFrom.TIME)


def _quiet_change(rows: pd.DataFrame, small: Any, large: Any) -> Estimate | None:
    """Relative change of the quiet epoch time per repeat (repeat k of every batch size ran in one round of
    `sweep time`'s alternation, so they pair); None unless every run compared has its configuration's repeats.
    """
    if QUIET_REPEATS not in rows or rows[QUIET_REPEATS].isna().any():
        return None
    times = {
        bs: [float(x) for x in str(where(rows, BATCH_SIZE, bs)[QUIET_REPEATS].iloc[0]).split()] for bs in (small, large)
    }
    return estimate([b / a - 1.0 for a, b in zip(times[small], times[large], strict=False)])


def _packed_note(rows: pd.DataFrame) -> tuple[str, ...]:
    """Runs trained packed (`run --pack K`): their epoch times are shares of their pack's, not their own."""
    if PACK_SIZE not in rows or not (rows[PACK_SIZE] > 1).any():
        return ()
    packed = rows[rows[PACK_SIZE] > 1]
    per_batch = "; ".join(
        f"batch {fmt_value(bs)}: {len(at)} of {len(where(rows, BATCH_SIZE, bs))} run(s), pack size "
        + "/".join(str(int(k)) for k in sorted(at[PACK_SIZE].unique()))
        for bs, at in packed.groupby(BATCH_SIZE, sort=True)
    )
    return (
        f"{len(packed)} of the {len(rows)} runs compared trained packed ({per_batch}): each one's epoch time is "
        "its share of its pack's time, which depends on the pack's size and on packing's gain at that batch "
        "size, not the time the run takes alone. Rerun without --pack, or time with `sweep time`, to test this "
        "claim.",
    )


def _quiet_note(rows: pd.DataFrame, small: Any, large: Any) -> tuple[str, ...]:
    """The same comparison from timing.csv (`sweep time`), where every run has a quiet epoch time."""
    quiet = QUIET_EPOCH_SECONDS
    if quiet not in rows or rows[quiet].isna().any():
        return ()
    per_batch = rows.groupby(BATCH_SIZE)[quiet].median()
    change = per_batch[large] / per_batch[small] - 1.0
    listed = "; ".join(f"batch {fmt_value(b)}: {s:.2f} s" for b, s in per_batch.items())
    return (
        f"The quiet measurement (`sweep time`, timing.csv: alternating one-epoch timings per batch size, training "
        f"only, the best of them) gives {listed}, a relative change of {change:+.3f} at batch {fmt_value(large)}.",
    )


def _spread(rows: pd.DataFrame) -> str:
    cols = [f"{vocab.EPOCH_SECONDS}_{s}" for s in ("min", "median", "max")]
    if not set(cols) <= set(rows.columns):
        return "not recorded"
    parts = []
    for bs in sorted_values(rows[BATCH_SIZE]):
        at = where(rows, BATCH_SIZE, bs)
        parts.append(
            f"batch {fmt_value(bs)}: {at[cols[0]].min():.2f} / {at[cols[1]].median():.2f} / {at[cols[2]].max():.2f}"
        )
    return "; ".join(parts)


def _copies_note(rows: pd.DataFrame) -> tuple[str, ...]:
    """Runs timed in more than one results folder: every timing, and which one the check used."""
    if TIMED_COPIES not in rows or rows[TIMED_COPIES].dropna().empty:
        return ()
    timed = rows.dropna(subset=[TIMED_COPIES])
    listed = "; ".join(f"{r[vocab.RUN_ID]}: {r[TIMED_COPIES]}" for _, r in timed.iterrows())
    return (
        f"{len(timed)} of these runs were timed more than once (stored in several results folders); the check uses "
        f"the copy marked 'used' (the first folder on the command line). Median epoch time per copy: {listed}.",
    )
