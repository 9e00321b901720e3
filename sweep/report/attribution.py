"""Attribution of C1's gap at batch 64: which mechanism makes it, one control arm at a time.

An arm is a `Mechanism` (data: the control keys that switch it on, the gap it
reads, where it is read). `attribution(epochs)` takes the runs at batch 8 and 64
that differ from the default arm in one mechanism's keys, within one group of
otherwise equal settings (the group with the most arms), and gives per arm the
epoch-2 gap at batch 64 with its t-interval over seeds, its per-seed paired change
against the default arm, the gap at batch 8, and C7's val_acc difference
(batch 64 - 8, last record, paired). docs/design.md, "Controls", says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from sweep import vocab
from sweep.analysis import (
    BATCH_SIZE,
    CONTROL_COMPANIONS,
    CONTROL_DEFAULTS,
    EPOCH_TWO,
    POST_DEFAULTS,
    at_epoch,
    row_key,
    setting_columns,
)
from sweep.estimates import Estimate, estimate, fmt_estimate
from sweep.selection import fmt_value, is_default, matches, where

EXPERIMENTS = "experiments/controls.yaml"  # the sweep that runs every arm
SMALL, LARGE = 8, 64  # C1's batch sizes
GROUP_FACTS = ("data.samples_per_class", "data.classes", "train.epochs", "train.optimizer", "train.lr")


@dataclass(frozen=True)
class Mechanism:
    """One arm: what it changes against the post's setting, and how its gap is read."""

    label: str
    keys: tuple[str, ...] = ()  # the control keys whose non-default runs form the arm; () = the default runs
    gap: str = vocab.GAP  # the gap it reads
    at_equal_steps: bool = False  # read batch 64 after batch 8's epoch-2 step count, not at epoch 2
    own_runs: bool = True  # False: a different reading of the default runs (their C7 is the default's)


DEFAULT = Mechanism("default (the post's setting)")
INFERENCE = Mechanism("(a) train accuracy in inference mode (eval_gap)", gap=vocab.EVAL_GAP, own_runs=False)
CONTROLS: tuple[Mechanism, ...] = (
    Mechanism("(b) BatchNorm momentum", ("model.bn_momentum",)),
    Mechanism("(b) no BatchNorm", ("model.batchnorm",)),
    Mechanism("(b) ghost batch norm", ("model.ghost_batch_size",)),
    # epoch 2 at batch 64 would be the same training as the default arm's: read it where it matches batch 8's steps
    Mechanism("(c) equal optimizer steps", ("train.budget",), at_equal_steps=True),
    Mechanism("(d) learning rate scaled per batch size", ("train.lr_scaling", "train.warmup_epochs")),
)


@dataclass(frozen=True)
class Arm:
    mechanism: Mechanism
    label: str  # the mechanism and the control values of its runs
    gap64: Estimate  # at batch 64, epoch 2 (or at batch 8's epoch-2 step count, for equal steps)
    change: Estimate | None  # paired vs the default arm, per seed; None for the default itself
    gap8: Estimate
    val_last: Estimate  # C7: val_acc at batch 64 - batch 8, last record, paired per seed; empty: as default
    read_at: str


@dataclass(frozen=True)
class Attribution:
    selection: str
    arms: tuple[Arm, ...]  # the default arm first, then (a), then the control arms in CONTROLS order
    missing: tuple[Mechanism, ...]  # control mechanisms with no runs here

    def conclusion(self) -> str:
        effects = [a for a in self.arms if a.change is not None and a.change.n > 0]
        if not effects:
            return f"No control arm in these results: run {EXPERIMENTS} to attribute the gap."
        top = max(effects, key=lambda a: abs(a.change.mean))  # type: ignore[union-attr]
        change: Estimate = top.change  # type: ignore[assignment]
        unsure = change.low <= 0 <= change.high
        return (
            f"Of the controls in these results, {top.label} changes the epoch-2 gap at batch 64 the most: "
            f"by {fmt_estimate(change)} (paired over seeds), from {fmt_estimate(self.arms[0].gap64)} to "
            f"{fmt_estimate(top.gap64)}"
            + ("; its interval includes 0, so more seeds are needed to be sure." if unsure else ".")
        )


def attribution(epochs: pd.DataFrame) -> Attribution | None:
    """C1's gap at batch 64 under each control, paired by seed with the default arm (None: no such runs)."""
    needed = {BATCH_SIZE, vocab.RUN_ID, vocab.GAP, vocab.STEP}
    runs = _arm_runs(epochs) if not epochs.empty and needed <= set(epochs.columns) else pd.DataFrame()
    if runs.empty:
        return None
    groups = [
        g
        for _, g in runs.groupby("_ctx", sort=True)
        if (g["_arm"] == DEFAULT.label).any() and all(matches(g[BATCH_SIZE], b).any() for b in (SMALL, LARGE))
    ]
    if not groups:
        return None
    group = max(groups, key=lambda g: (g["_arm"].nunique(), g[vocab.SEED].nunique()))  # first on ties
    default = group[group["_arm"] == DEFAULT.label]
    steps8 = _per_seed(epochs, default, SMALL, vocab.STEP, None).mean()  # batch 8's steps by epoch 2
    base = _per_seed(epochs, default, LARGE, vocab.GAP, None)
    arms = [
        _arm(epochs, DEFAULT, DEFAULT.label, default, base, steps8),
        _arm(epochs, INFERENCE, INFERENCE.label, default, base, steps8),
    ]
    controls = group[group["_arm"] != DEFAULT.label]
    order = sorted(controls.groupby("_arm"), key=lambda item: (CONTROLS.index(item[1]["_mechanism"].iloc[0]), item[0]))
    arms += [_arm(epochs, rows["_mechanism"].iloc[0], label, rows, base, steps8) for label, rows in order]
    present = {a.mechanism for a in arms}
    return Attribution(_describe(group), tuple(arms), tuple(m for m in CONTROLS if m not in present))


def _describe(group: pd.DataFrame) -> str:
    facts = ", ".join(
        f"{k}={fmt_value(group[k].iloc[0])}" for k in GROUP_FACTS if k in group and not pd.isna(group[k].iloc[0])
    )
    return f"{len(group)} runs, {group[vocab.SEED].nunique()} seeds, batch {SMALL} and {LARGE}; {facts}"


def _arm_of(row: pd.Series, off: list[str]) -> tuple[Mechanism, str] | None:
    """The mechanism of a run whose controls `off` are not at their defaults, with its label (the
    mechanism and the run's control values); DEFAULT when none is off; None when several mechanisms are."""
    if not off:
        return DEFAULT, DEFAULT.label
    for mechanism in CONTROLS:
        if set(off) <= set(mechanism.keys):
            extra = [k for k in CONTROL_COMPANIONS if k in row and pd.notna(row[k])]
            return mechanism, f"{mechanism.label}: " + ", ".join(f"{k}={fmt_value(row[k])}" for k in [*off, *extra])
    return None


def _arm_runs(epochs: pd.DataFrame) -> pd.DataFrame:
    """One row per done run at the post's toggles: settings, seed, its mechanism and arm label, and a
    context key (every other setting) that groups runs comparable with each other."""
    runs = at_epoch(epochs, None)
    for key, value in POST_DEFAULTS.items():
        if key in runs:
            runs = runs[matches(runs[key], value)]
    if runs.empty:
        return runs
    changed = {k: ~is_default(runs[k], d) for k, d in CONTROL_DEFAULTS.items() if k in runs}
    found = [_arm_of(row, [k for k, off in changed.items() if off[i]]) for i, row in runs.iterrows()]
    runs = runs.assign(_mechanism=[f[0] if f else None for f in found], _arm=[f[1] if f else None for f in found])
    runs = runs.dropna(subset=["_arm"])
    skip = {BATCH_SIZE, *CONTROL_DEFAULTS, *CONTROL_COMPANIONS}
    return runs.assign(_ctx=row_key(runs, [c for c in setting_columns(runs) if c not in skip]))


def _reading(rows: pd.DataFrame, step: float | None) -> pd.Series | None:
    """A run's record (rows: its records) at epoch 2, or its last record at or before `step` optimizer steps."""
    if step is None:
        at_two = rows[rows[vocab.EPOCH] == EPOCH_TWO]
        return at_two.iloc[0] if len(at_two) else None
    rows = rows[rows[vocab.STEP] <= step]
    return rows.loc[rows[vocab.STEP].idxmax()] if len(rows) else None


def _per_seed(epochs: pd.DataFrame, runs: pd.DataFrame, batch: int, metric: str, step: float | None) -> pd.Series:
    at = where(runs, BATCH_SIZE, batch)
    records = dict(tuple(epochs[epochs[vocab.RUN_ID].isin(at[vocab.RUN_ID])].groupby(vocab.RUN_ID)))
    values = {}
    for _, run in at.iterrows():
        record = _reading(records[run[vocab.RUN_ID]], step) if run[vocab.RUN_ID] in records else None
        if record is not None:
            values[run[vocab.SEED]] = float(record[metric])
    return pd.Series(values, dtype=float)


def _arm(
    epochs: pd.DataFrame, mechanism: Mechanism, label: str, rows: pd.DataFrame, base: pd.Series, steps8: float
) -> Arm:
    step = steps8 if mechanism.at_equal_steps else None
    gap64 = _per_seed(epochs, rows, LARGE, mechanism.gap, step)
    change = None if mechanism == DEFAULT else estimate((gap64 - base).dropna())
    last = math.inf  # each run's last record
    val = (
        _per_seed(epochs, rows, LARGE, vocab.VAL_ACC, last) - _per_seed(epochs, rows, SMALL, vocab.VAL_ACC, last)
        if mechanism.own_runs
        else pd.Series(dtype=float)
    )
    read_at = f"step {step:.0f} (batch {SMALL}'s epoch 2)" if step is not None else "epoch 2"
    return Arm(
        mechanism,
        label,
        estimate(gap64),
        change,
        estimate(_per_seed(epochs, rows, SMALL, mechanism.gap, None)),
        estimate(val.dropna()),
        read_at,
    )
