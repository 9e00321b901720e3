"""C6, "large batches: faster": the time the largest batch takes to a target fixed in advance against the
smallest's (`reach.TIME_TARGET`), paired by seed, from the quiet `sweep time` seconds per step where every compared
run has them, else from the runs' own elapsed seconds on a shared machine; the epoch times (equal epochs) beside
it, with notes on packed runs, runs timed in several folders and the spread of every timed epoch.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, PACK_SIZE, QUIET_EPOCH_SECONDS, TIMED_COPIES, reach
from sweep.analysis.estimates import Bound, Check, Estimate, Key, estimate
from sweep.analysis.selection import (
    Selection,
    fmt_value,
    matches,
    pair_keys,
    paired_relative,
    seed_count,
    sorted_values,
    where,
)
from sweep.claims.checks import across_batch_sizes, estimate_at, finding_from
from sweep.claims.findings import SPEEDUP, Finding, ReadFrom
from sweep.config.timing_schema import QUIET_REPEATS, QUIET_STEP_SECONDS


@across_batch_sizes
def check_large_batch_faster(sel: Selection, small: Any, large: Any) -> Finding | None:
    """Seconds to C6's target, largest vs smallest batch, paired by seed (`_to_target`): quiet seconds where every
    compared run has timing.csv's, else the runs' own. Epoch times (equal epochs) are evidence beside it.
    """
    rows = sel.rows
    metric = _target_metric(rows)
    if reach.column_for(reach.STEPS_TO_TARGET, metric) not in rows:  # a summary without the readings to target
        return None
    quiet = QUIET_STEP_SECONDS in rows and bool(rows[QUIET_STEP_SECONDS].notna().all())
    times = _to_target(rows, small, large, metric, quiet)
    kind = "quiet seconds" if quiet else "in-run seconds"
    label = (
        f"{kind} to {metric} {reach.TIME_TARGET:g} at batch {fmt_value(large)} relative to batch {fmt_value(small)} "
        "(paired by seed; -0.5 = half)"
    )
    key = Key(
        reach.column_for(reach.SECONDS_TO_TARGET, metric),
        ((BATCH_SIZE, f"{fmt_value(large)} / {fmt_value(small)}"), ("target", f"{reach.TIME_TARGET:g}")),
    )
    short = f"seconds to {metric} {reach.TIME_TARGET:g}, batch {fmt_value(large)} vs {fmt_value(small)}"
    check = Check(label, estimate(times.change), high=-SPEEDUP.value, key=key, short=short, bound=times.bound)
    notes = _notes(rows, small, large, metric, times, quiet)
    finding = finding_from((check,), sel, _evidence(rows, small, large), notes)
    return dataclasses.replace(finding, read_from=ReadFrom.QUIET if quiet else ReadFrom.TIME)


def _target_metric(rows: pd.DataFrame) -> str:
    """val_acc_recal where every compared run recorded it throughout, else val_acc: one reading for both arms."""
    has, last = reach.column_for(reach.STEPS_TO_TARGET, vocab.VAL_ACC_RECAL), f"{vocab.VAL_ACC_RECAL}_last"
    return vocab.VAL_ACC_RECAL if has in rows and last in rows and rows[last].notna().all() else vocab.VAL_ACC


class _Times(NamedTuple):
    """Per seed, the largest batch's time to the target relative to the smallest's, and what the values are."""

    change: pd.Series  # large / small - 1, one value per seed where at least one arm reached the target
    bound: Bound  # EXACT, or bounds where an arm missed the target and counts its whole training
    missed: dict[Any, int]  # batch size -> seeds that did not reach the target
    seeds: dict[Any, int]  # batch size -> seeds read
    neither: int  # seeds where neither arm reached it: nothing to read, left out


def _to_target(rows: pd.DataFrame, small: Any, large: Any, metric: str, quiet: bool) -> _Times:
    """Each arm's seconds to the target per seed; a run that missed it counts all the time it trained (a lower
    bound of its time), so the change is a lower bound where the large batch missed and an upper one where the
    small batch did.
    """
    steps = rows[reach.column_for(reach.STEPS_TO_TARGET, metric)]
    missed = steps.isna()
    if quiet:  # optimizer steps x the configuration's quiet seconds per step
        time = steps.fillna(rows[reach.TRAINED_STEPS]) * rows[QUIET_STEP_SECONDS]
    else:
        time = rows[reach.column_for(reach.SECONDS_TO_TARGET, metric)].fillna(rows[reach.TRAINED_SECONDS])
    keys = pair_keys(rows, BATCH_SIZE)
    arms = {}
    for bs in (small, large):
        at = matches(rows[BATCH_SIZE], bs)
        arms[bs] = pd.DataFrame({"time": time[at], "missed": missed[at]}).groupby(keys[at]).first()
    both = arms[small].add_suffix("_small").join(arms[large].add_suffix("_large"), how="inner")
    neither = both["missed_small"] & both["missed_large"]
    both = both[~neither]
    lower, upper = bool(both["missed_large"].any()), bool(both["missed_small"].any())
    bound = {(False, False): Bound.EXACT, (True, False): Bound.LOWER, (False, True): Bound.UPPER}.get(
        (lower, upper), Bound.MIXED
    )
    return _Times(
        change=both["time_large"] / both["time_small"] - 1.0,
        bound=bound,
        missed={bs: int(arm["missed"].sum()) for bs, arm in arms.items()},
        seeds={bs: len(arm) for bs, arm in arms.items()},
        neither=int(neither.sum()),
    )


def _evidence(rows: pd.DataFrame, small: Any, large: Any) -> tuple[tuple[str, Estimate], ...]:
    """Equal epochs beside it: the epoch time of the two batch sizes (quiet where timed), and each one's times."""
    median = f"{vocab.EPOCH_SECONDS}_median"
    reading = median if median in rows else vocab.EPOCH_SECONDS  # summaries written before the spread existed
    pair = f"batch {fmt_value(large)} relative to batch {fmt_value(small)}"
    found = [
        (
            f"equal epochs: in-run median epoch time at {pair} (paired by seed)",
            paired_relative(rows, BATCH_SIZE, small, large, reading),
        )
    ]
    quiet = _quiet_change(rows, small, large)
    if quiet is not None:
        found.insert(0, (f"equal epochs: quiet epoch time at {pair} (`sweep time`, paired by repeat)", quiet))
    return tuple(found) + tuple(
        (f"{metric} at batch {fmt_value(bs)}", estimate_at(rows, BATCH_SIZE, bs, metric))
        for metric in (vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND)
        for bs in sorted_values(rows[BATCH_SIZE])
    )


def _notes(rows: pd.DataFrame, small: Any, large: Any, metric: str, times: _Times, quiet: bool) -> tuple[str, ...]:
    reached = "; ".join(
        f"batch {fmt_value(bs)}: {times.seeds[bs] - times.missed[bs]} of {seed_count(times.seeds[bs])}"
        for bs in (small, large)
    )
    bounds = (
        f" A run that did not reach it counts all the time it trained, a lower bound of its time to the target: "
        f"the change is read as {times.bound.value}, which decide only the side they make safe."
        if times.bound is not Bound.EXACT
        else ""
    )
    neither = (
        f" Left out, with nothing to read: {seed_count(times.neither)} where neither batch size reached it."
        if times.neither
        else ""
    )
    seconds = (
        " Quiet seconds are optimizer steps to the target x the configuration's seconds per step from timing.csv "
        "(the best of its repeats, taken as exact: the interval is over seeds)."
        if quiet
        else " Seconds are each run's own training time to the target (graph tracing included)."
    )
    return (
        f"Time to {metric} {reach.TIME_TARGET:g}, a target fixed in advance (docs/report.md, C6), reached by "
        f"{reached}.{bounds}{neither}{seconds}",
        "In-run epoch time is each run's median over epochs 2 onwards (epoch 1 includes graph tracing and is left "
        "out), measured while the runs trained on a shared machine, not in a benchmark: other work on the machine "
        "slows some epochs. The spread of every timed epoch per batch size, fastest / median of the runs' "
        f"medians / slowest (seconds): {_spread(rows)}.",
        *_copies_note(rows),
        *_packed_note(rows),
        *_quiet_note(rows, small, large),
    )


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
