"""Attribution of C1's gap at batch 64: which mechanism makes it, one control arm at a time.

An arm is a `Mechanism` (data: the control keys that switch it on, the gap it
reads, where it is read). `attribution(epochs)` takes the runs at batch 8 and 64
that differ from the default arm in one mechanism's keys, within one group of
otherwise equal settings (the group with the most arms), and gives per arm the
epoch-2 gap at batch 64 with its t-interval over seeds, its per-seed paired change
against the default arm, the gap at batch 8, and C7's val_acc difference
(batch 64 - 8, last record, paired). docs/internals.md, "Controls", says why.
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
from sweep.analysis.estimates import Check, Estimate, estimate, fmt_estimate
from sweep.analysis.outcome import Outcome
from sweep.analysis.selection import at_post, fmt_value, is_default, matches, seed_count, where
from sweep.claims.findings import FAR_GAP
from sweep.config import declared

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
    family: str = ""  # the effect it measures; arms of one family measure the same thing


# The effects the arms measure. Arms of one family are reported together: their changes are
# several measurements of one effect, not rivals to be ranked.
BATCHNORM = "BatchNorm's training-mode vs inference-mode statistics"
STEPS = "optimizer steps (read at 8x the epochs at batch 64, where real overfitting also enters)"
LEARNING_RATE = "learning rate per batch size"
FAMILIES = (BATCHNORM, STEPS, LEARNING_RATE)

DEFAULT = Mechanism("default (the post's setting)")
INFERENCE = Mechanism(
    "(a) train accuracy in inference mode (eval_gap)", gap=vocab.EVAL_GAP, own_runs=False, family=BATCHNORM
)
RECALIBRATED = Mechanism(
    "(a) inference mode with BatchNorm recalibrated (eval_gap_recal)",
    gap=vocab.EVAL_GAP_RECAL,
    own_runs=False,
    family=BATCHNORM,
)
READINGS = (INFERENCE, RECALIBRATED)  # other readings of the default runs; RECALIBRATED where measured
CONTROLS: tuple[Mechanism, ...] = (
    Mechanism("(b) BatchNorm momentum", ("model.bn_momentum",), family=BATCHNORM),
    Mechanism("(b) no BatchNorm", ("model.batchnorm",), family=BATCHNORM),
    Mechanism("(b) ghost batch norm", ("model.ghost_batch_size",), family=BATCHNORM),
    # epoch 2 at batch 64 would be the same training as the default arm's: read it where it matches batch 8's steps
    Mechanism("(c) equal optimizer steps", ("train.budget",), at_equal_steps=True, family=STEPS),
    Mechanism(
        "(d) learning rate scaled per batch size", ("train.lr_scaling", "train.warmup_epochs"), family=LEARNING_RATE
    ),
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
    eval_gap64: Estimate  # eval_gap at batch 64 at the same reading: overfitting, whatever the arm's gap reads

    @property
    def survives(self) -> Outcome:
        """Is batch 64's gap still far above (C1's threshold) with this arm: its interval wholly above it."""
        return Check("gap at batch 64", self.gap64, low=FAR_GAP.value).outcome()


@dataclass(frozen=True)
class Attribution:
    selection: str
    arms: tuple[Arm, ...]  # the default arm first, then (a) and its recalibrated form, then CONTROLS in order
    missing: tuple[Mechanism, ...]  # control mechanisms with no runs here

    def conclusion(self) -> str:
        return " ".join(self.sentences())

    def sentences(self) -> list[str]:
        """What the arms support: the default gap, one passage per effect, and whether any arm is the largest
        (only when its interval is clear of every other arm's).
        """
        effects = [a for a in self.arms if a.change is not None and a.change.n > 0]
        if not effects:
            return [f"No control arm in these results: run {EXPERIMENTS} to attribute the gap."]
        sentences = [f"The default gap at batch 64 is {fmt_estimate(self.arms[0].gap64)}."]
        for family in FAMILIES:
            members = [a for a in effects if a.mechanism.family == family]
            if members:
                sentences.append(_family_sentence(family, members, self.arms[0].gap64))
        sentences.append(_ranking_sentence(effects))
        return sentences


def _family_sentence(family: str, members: list[Arm], default: Estimate) -> str:
    changes = "; ".join(f"{a.label} {fmt_estimate(a.change)}" for a in members if a.change is not None)
    decided = [a for a in members if a.change is not None and not a.change.low <= 0 <= a.change.high]
    shares = [-a.change.mean / default.mean for a in members if a.change is not None and default.mean]
    jointly = (
        f"; their changes amount to {min(shares):.0%} to {max(shares):.0%} of the default gap"
        if len(members) > 1 and shares
        else (f"; it changes the default gap by {-shares[0]:+.0%} of itself" if shares else "")
    )
    overlap = " Their intervals overlap: they do not rank against each other." if _overlap(members) else ""
    sure = (
        f" {len(decided)} of {len(members)} exclude 0." if decided else " Every interval includes 0: more seeds needed."
    )
    return f"{family[0].upper()}{family[1:]}: {changes}{jointly}.{overlap}{sure}"


def _overlap(arms: list[Arm]) -> bool:
    """Whether every pair of the arms' change intervals overlaps (a common reading of one effect)."""
    changes = [a.change for a in arms if a.change is not None]
    return len(changes) > 1 and max(c.low for c in changes) <= min(c.high for c in changes)


def _ranking_sentence(effects: list[Arm]) -> str:
    """The arm with the largest change, only if its interval lies clear of every other arm's."""
    top = max(effects, key=lambda a: abs(a.change.mean))  # type: ignore[union-attr]
    others = [a for a in effects if a is not top]
    change: Estimate = top.change  # type: ignore[assignment]
    clear = all(change.low > o.change.high or change.high < o.change.low for o in others if o.change is not None)
    if others and clear:
        return f"{top.label} changes the gap the most ({fmt_estimate(change)}): its interval lies clear of the others'."
    return (
        f"The largest mean change is {top.label}'s ({fmt_estimate(change)}), but its interval overlaps "
        "another arm's, so no arm is the largest on these seeds."
        if others
        else f"Only {top.label} is in these results ({fmt_estimate(change)})."
    )


def family_rank(mechanism: Mechanism) -> int:
    """Table order: the default first, then the families in FAMILIES order (stable within one)."""
    return FAMILIES.index(mechanism.family) + 1 if mechanism.family in FAMILIES else 0


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
    measured = epochs[epochs[vocab.RUN_ID].isin(default[vocab.RUN_ID])]
    readings = [m for m in READINGS if m.gap in measured and measured[m.gap].notna().all()]
    arms = [_arm(epochs, m, m.label, default, base, steps8) for m in (DEFAULT, *readings)]
    controls = group[group["_arm"] != DEFAULT.label]
    order = sorted(controls.groupby("_arm"), key=lambda item: (CONTROLS.index(item[1]["_mechanism"].iloc[0]), item[0]))
    arms += [_arm(epochs, rows["_mechanism"].iloc[0], label, rows, base, steps8) for label, rows in order]
    present = {a.mechanism for a in arms}
    return Attribution(_describe(group), tuple(arms), tuple(m for m in CONTROLS if m not in present))


def _describe(group: pd.DataFrame) -> str:
    facts = ", ".join(
        f"{k}={fmt_value(group[k].iloc[0])}" for k in GROUP_FACTS if k in group and not pd.isna(group[k].iloc[0])
    )
    return f"{len(group)} runs, {seed_count(group[vocab.SEED].nunique())}, batch {SMALL} and {LARGE}; {facts}"


def _arm_of(row: pd.Series, off: list[str]) -> tuple[Mechanism, str] | None:
    """The mechanism of a run whose controls `off` are not at their defaults, with its label (the
    mechanism and the run's control values); DEFAULT when none is off; None when several mechanisms are.
    """
    if not off:
        return DEFAULT, DEFAULT.label
    for mechanism in CONTROLS:
        if set(off) <= set(mechanism.keys):
            extra = [k for k in CONTROL_COMPANIONS if k in row and pd.notna(row[k]) and _accompanies(k, off)]
            return mechanism, f"{mechanism.label}: " + ", ".join(f"{k}={fmt_value(row[k])}" for k in [*off, *extra])
    return None


def _accompanies(companion: str, off: list[str]) -> bool:
    """Whether a companion setting belongs to one of these controls (train.steps to train.budget); one that
    only adds records (train.eval_every_steps) is the same in every arm and does not name one.
    """
    only = declared.declaration(companion).only
    return only is not None and only.on in off


def _arm_runs(epochs: pd.DataFrame) -> pd.DataFrame:
    """One row per done run at the post's toggles: settings, seed, its mechanism and arm label, and a
    context key (every other setting) that groups runs comparable with each other.
    """
    runs = at_epoch(epochs, None)
    for key in POST_DEFAULTS:
        if key in runs:
            runs = runs[at_post(runs[key], key)]
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
        estimate(_per_seed(epochs, rows, LARGE, vocab.EVAL_GAP, step)),
    )
