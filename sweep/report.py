"""The claims report: the post's claims C1-C9, their checks, and report.md / report.html.

`build(folders, out)` reads results folders (runs.csv, epochs.csv only), writes
tables (`sweep.analysis`), figures (`sweep.plots`), ``tables/claims.csv``,
``report.md`` and a self-contained ``report.html`` (figures as data URIs, no
scripts, no network). No TensorFlow.

A claim's verdict comes from checks: numbers with 95% t-intervals over seeds and
a region where the claim needs them to lie (thresholds below, printed in the
report). See `sweep.analysis` and docs/report.md for the statistics.
"""

from __future__ import annotations

import base64
import html
import importlib.metadata
import math
import os
import platform
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import pandas as pd

from sweep import analysis as an
from sweep import plots, tuning, vocab
from sweep.analysis import Check, Estimate, Selection

# --- thresholds (fractions of images; 0.20 = 20 percentage points)

FAR_GAP = 0.20  # C1-C3: "train_acc far above val_acc" means a gap above this
CLOSE_GAP = 0.10  # C1: "the two are close" means |gap| below this
CAUSE_RAISES_GAP = 0.05  # C2, C3: the toggle must raise the gap by more than this, paired
VAL_DROP = 0.10  # C4: a mismatch must lower final val_acc by more than this, paired
SPEEDUP = 0.10  # C6: the largest batch's epoch must take at least 10% less time than the smallest's
SAME_VAL = 0.02  # C9: "learn the same" means final val_acc within +-0.02, paired
SMALL_BATCH = 32  # C8: "batch_size 32 or less"

FILES = {"article": "experiments/article.yaml", "batch_sizes": "experiments/batch_sizes.yaml",
         "causes": "experiments/causes.yaml", "gpus": "experiments/gpus.yaml",
         "controls": "experiments/controls.yaml", "lr_search": "experiments/lr_search.yaml"}


@dataclass(frozen=True)
class Finding:
    """What the data says about one claim."""

    checks: tuple[Check, ...]
    outcome: bool | None
    selection: str
    evidence: tuple[tuple[str, Estimate], ...] = ()  # informative numbers that do not decide
    notes: tuple[str, ...] = ()

    @property
    def verdict(self) -> str:
        return an.verdict(self.outcome)

    def seeds_needed(self) -> int | None:
        """Seeds per setting that would decide every undecided check (None: unknown or > 1000)."""
        needed = [c.seeds_needed() for c in self.checks if c.outcome() is None]
        return None if not needed or None in needed else max(needed)  # type: ignore[type-var]


@dataclass(frozen=True)
class Claim:
    id: str
    quote: str  # the post's words
    test: str  # what is checked, with thresholds
    experiments: str  # the experiments file that tests it
    evaluate: Callable[[pd.DataFrame], Finding | None]  # None: this sweep cannot test it


# --- helpers for the evaluators


def _col(metric: str, when: str) -> str:
    return an.column(metric, when)


def _est(rows: pd.DataFrame, axis: str, value: Any, metric: str) -> Estimate:
    return an.estimate(an.where(rows, axis, value)[metric])


def _v(value: Any) -> str:
    return an.fmt_value(value)


# --- C1


def check_c1(table: pd.DataFrame) -> Finding | None:
    gap2 = _col(vocab.GAP, "epoch2")
    sel = an.choose_context(table.dropna(subset=[gap2]) if gap2 in table else table, an.BATCH_SIZE, (8, 64))
    if sel is None:
        return None
    rows = sel.rows
    checks = (Check("gap at batch 64, epoch 2", _est(rows, an.BATCH_SIZE, 64, gap2), low=FAR_GAP),
              Check("gap at batch 8, epoch 2", _est(rows, an.BATCH_SIZE, 8, gap2), low=-CLOSE_GAP, high=CLOSE_GAP))
    evidence = tuple((f"{metric} at batch {bs}, epoch 2", _est(rows, an.BATCH_SIZE, bs, _col(metric, "epoch2")))
                     for bs in (64, 8) for metric in (vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.VAL_ACC, vocab.EVAL_GAP))
    return Finding(checks, an.all_of(c.outcome() for c in checks), sel.describe(), evidence, (_c1_nuance(rows),))


def _c1_nuance(rows: pd.DataFrame) -> str:
    """gap vs eval_gap at batch 64: how much of the post's picture is measurement."""
    at64 = an.where(rows, an.BATCH_SIZE, 64)
    gap = an.estimate(at64[_col(vocab.GAP, "epoch2")])
    eval_gap = an.estimate(at64[_col(vocab.EVAL_GAP, "epoch2")])
    artefact = an.estimate(at64[_col(vocab.TRAIN_ACC, "epoch2")] - at64[_col(vocab.TRAIN_EVAL_ACC, "epoch2")])
    steps = {bs: an.where(rows, an.BATCH_SIZE, bs)[_col(vocab.STEP, "epoch2")].mean() for bs in (8, 64)}
    momentum = float(rows["model.bn_momentum"].iloc[0]) if "model.bn_momentum" in rows else 0.99
    weight = momentum ** steps[64] if math.isfinite(steps[64]) else math.nan
    return (f"At batch 64, epoch 2, the post's gap (train_acc - val_acc) is {fmt(gap)}, but the eval_gap "
            f"(train_eval_acc - val_acc: the same end-of-epoch model, inference mode, on training and on "
            f"validation images) is {fmt(eval_gap)}. train_acc - train_eval_acc = {fmt(artefact)} of the gap is "
            f"measurement: Keras's train_acc is a running mean in training mode (batch statistics), while "
            f"val_acc uses BatchNorm's moving statistics. By epoch 2 batch 64 has taken {steps[64]:.0f} optimizer "
            f"steps and batch 8 {steps[8]:.0f}; with momentum {momentum:g} the moving statistics still give "
            f"their initial values a weight of {momentum:g}^{steps[64]:.0f} = {weight:.2f} at batch 64 "
            f"(a lag that fewer steps per epoch makes worse).")


# --- C2, C3: a toggle gives high train_acc and low val_acc early in training


def _cause(table: pd.DataFrame, axis: str, reference: Any, pick: Callable[[list[Any]], Any]) -> Finding | None:
    table = table.dropna(subset=[_col(vocab.GAP, "epoch2")])  # runs of one epoch cannot show epoch 2
    others = an.toggle_values(table, axis)[1:] if axis in table else []
    if not others or not an.matches(table[axis], reference).any():
        return None
    value = pick(others)
    sel = an.choose_context(table, axis, (reference, value))
    if sel is None:
        return None
    gap2 = _col(vocab.GAP, "epoch2")
    checks = (Check(f"gap at {axis}={_v(value)}, epoch 2", _est(sel.rows, axis, value, gap2), low=FAR_GAP),
              Check(f"gap increase vs {axis}={_v(reference)}, epoch 2 (paired)",
                    an.paired(sel.rows, axis, reference, value, gap2), low=CAUSE_RAISES_GAP))
    evidence = ((f"train_acc at {axis}={_v(value)}, epoch 2", _est(sel.rows, axis, value, _col(vocab.TRAIN_ACC, "epoch2"))),
                (f"val_acc at {axis}={_v(value)}, epoch 2", _est(sel.rows, axis, value, _col(vocab.VAL_ACC, "epoch2"))),
                (f"eval_gap at {axis}={_v(value)}, epoch 2", _est(sel.rows, axis, value, _col(vocab.EVAL_GAP, "epoch2"))),
                ("gap increase at the last epoch (paired)", an.paired(sel.rows, axis, reference, value, _col(vocab.GAP, "last"))))
    return Finding(checks, an.all_of(c.outcome() for c in checks), sel.describe(), evidence)


def check_c2(table: pd.DataFrame) -> Finding | None:
    return _cause(table, "data.imbalance", 0.0, max)


def check_c3(table: pd.DataFrame) -> Finding | None:
    return _cause(table, "data.shuffle", True, lambda values: values[0])


# --- C4: preprocessing validation differently lowers val_acc


def check_c4(table: pd.DataFrame) -> Finding | None:
    axis, reference, metric = "data.preprocess_mismatch", "none", _col(vocab.VAL_ACC, "last")
    kinds = an.toggle_values(table, axis)[1:] if axis in table else []
    checks, selections = [], []
    for kind in kinds:
        sel = an.choose_context(table, axis, (reference, kind))
        if sel is not None:
            checks.append(Check(f"val_acc change with mismatch {kind}, last epoch (paired)",
                                an.paired(sel.rows, axis, reference, kind, metric), high=-VAL_DROP))
            selections.append(sel.describe())
    if not checks:
        return None
    notes = ("Supported when at least one kind of mismatch lowers val_acc by more than the threshold; "
             "each kind is listed.",)
    return Finding(tuple(checks), an.any_of(c.outcome() for c in checks), "; ".join(dict.fromkeys(selections)), (), notes)


# --- C5: a model too large for the data overfits


def check_c5(table: pd.DataFrame) -> Finding | None:
    metric = _col(vocab.EVAL_GAP, "last")
    checks, selections = [], []
    for axis, bigger_is_larger_model in (("model.width", True), ("data.samples_per_class", False)):
        sel = an.choose_context(table, axis) if axis in table else None
        if sel is None:
            continue
        values = an.toggle_values(sel.rows, axis)
        for value in values[1:]:
            grows = (value > values[0]) == bigger_is_larger_model  # the run with more capacity per image
            diff = an.paired(sel.rows, axis, values[0], value, metric)
            checks.append(Check(f"eval_gap change {axis} {_v(values[0])} -> {_v(value)}, last epoch (paired)",
                                diff, **({"low": 0.0} if grows else {"high": 0.0})))
        selections.append(sel.describe())
    if not checks:
        return None
    notes = ("Overfitting is judged on eval_gap (train and validation measured the same way, end-of-training "
             "model), not on the running train_acc. Expected sign: wider model or fewer images per class -> "
             "larger eval_gap.",)
    return Finding(tuple(checks), an.all_of(c.outcome() for c in checks), "; ".join(selections), (), notes)


# --- C6-C8: batch size, smallest vs largest, at the last epoch


def _batch_extremes(table: pd.DataFrame) -> tuple[Selection, Any, Any] | None:
    sel = an.choose_context(table, an.BATCH_SIZE)
    if sel is None:
        return None
    sizes = an.sorted_values(sel.rows[an.BATCH_SIZE])
    return sel, sizes[0], sizes[-1]


def check_c6(table: pd.DataFrame) -> Finding | None:
    found = _batch_extremes(table)
    if found is None:
        return None
    sel, small, large = found
    change = an.paired_relative(sel.rows, an.BATCH_SIZE, small, large, vocab.EPOCH_SECONDS)
    checks = (Check(f"epoch time at batch {_v(large)} relative to batch {_v(small)} (paired; -0.5 = half)",
                    change, high=-SPEEDUP),)
    evidence = tuple((f"{metric} at batch {_v(bs)}", _est(sel.rows, an.BATCH_SIZE, bs, metric))
                     for metric in (vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND)
                     for bs in an.sorted_values(sel.rows[an.BATCH_SIZE]))
    notes = ("Epoch time averages epochs 2 onwards (epoch 1 includes graph tracing). Timings depend on the "
             "machine and on what else ran on it.",)
    return Finding(checks, checks[0].outcome(), sel.describe(), evidence, notes)


def check_c7(table: pd.DataFrame) -> Finding | None:
    found = _batch_extremes(table)
    if found is None:
        return None
    sel, small, large = found

    def diff(metric: str) -> Estimate:
        return an.paired(sel.rows, an.BATCH_SIZE, small, large, _col(metric, "last"))

    checks = (Check(f"train_eval_acc, batch {_v(large)} - batch {_v(small)}, last epoch (paired)",
                    diff(vocab.TRAIN_EVAL_ACC), low=0.0),
              Check(f"val_acc, batch {_v(large)} - batch {_v(small)}, last epoch (paired)", diff(vocab.VAL_ACC), high=0.0))
    evidence = ((f"train_acc, batch {_v(large)} - batch {_v(small)}, last epoch (paired)", diff(vocab.TRAIN_ACC)),
                (f"train_eval_loss, batch {_v(large)} - batch {_v(small)}, last epoch (paired)", diff(vocab.TRAIN_EVAL_LOSS)),
                (f"optimizer steps, batch {_v(large)} - batch {_v(small)}", diff(vocab.STEP)))
    notes = ("Training error is judged on train_eval_acc (the final model in inference mode). Equal epochs mean "
             "fewer optimizer steps at the larger batch, and the learning rate was not re-tuned per batch size.",)
    return Finding(checks, an.all_of(c.outcome() for c in checks), sel.describe(), evidence, notes)


def check_c8(table: pd.DataFrame) -> Finding | None:
    found = _batch_extremes(table)
    if found is None:
        return None
    sel, _, _ = found
    metric = _col(vocab.VAL_ACC, "last")
    means = {bs: _est(sel.rows, an.BATCH_SIZE, bs, metric) for bs in an.sorted_values(sel.rows[an.BATCH_SIZE])}
    small = {bs: e for bs, e in means.items() if bs <= SMALL_BATCH}
    large = {bs: e for bs, e in means.items() if bs > SMALL_BATCH}
    if not small or not large:
        return None
    best_small = max(small, key=lambda bs: small[bs].mean)
    best_large = max(large, key=lambda bs: large[bs].mean)
    checks = (Check(f"val_acc, best batch <= {SMALL_BATCH} ({_v(best_small)}) - best batch > {SMALL_BATCH} "
                    f"({_v(best_large)}), last epoch (paired)",
                    an.paired(sel.rows, an.BATCH_SIZE, best_large, best_small, metric), low=0.0),)
    evidence = tuple((f"val_acc at batch {_v(bs)}, last epoch", e) for bs, e in means.items())
    notes = ("The best batch size on each side of 32 is picked by its mean, then the two are compared paired by seed "
             "(picking by the mean favours the winner slightly).",)
    return Finding(checks, checks[0].outcome(), sel.describe(), evidence, notes)


# --- C9: replicas


def check_c9(table: pd.DataFrame) -> Finding | None:
    sel = an.choose_context(table, an.GPUS)
    if sel is None or not an.matches(sel.rows[an.GPUS], 1).any():
        return None
    metric = _col(vocab.VAL_ACC, "last")
    replicas = [g for g in an.sorted_values(sel.rows[an.GPUS]) if g != 1]
    checks = tuple(Check(f"val_acc, {_v(g)} replicas - 1 device, last epoch (paired)",
                         an.paired(sel.rows, an.GPUS, 1, g, metric), low=-SAME_VAL, high=SAME_VAL) for g in replicas)
    evidence = tuple((f"train_eval_acc, {_v(g)} replicas - 1 device, last epoch (paired)",
                      an.paired(sel.rows, an.GPUS, 1, g, _col(vocab.TRAIN_EVAL_ACC, "last"))) for g in replicas)
    notes = ("Each replica normalises its own share of the batch (Keras BatchNormalization is not synchronised "
             "across replicas), so G replicas see batch statistics over batch/G images.",)
    return Finding(checks, an.all_of(c.outcome() for c in checks), sel.describe(), evidence, notes)


CLAIMS: tuple[Claim, ...] = (
    Claim("C1", "at batch_size=64, epoch 2, train_acc 80% but val_acc 6%; at batch_size=8 both 60% and rising",
          f"at epoch 2, gap = train_acc - val_acc above {FAR_GAP:g} at batch 64 and within +-{CLOSE_GAP:g} at batch 8",
          FILES["article"], check_c1),
    Claim("C2", "imbalanced training classes (95% of the images in one class; validation balanced) "
                "give high train_acc and low val_acc",
          f"at epoch 2 the imbalanced runs' gap is above {FAR_GAP:g} and exceeds the balanced runs' gap by more "
          f"than {CAUSE_RAISES_GAP:g} (paired by seed)", FILES["causes"], check_c2),
    Claim("C3", "training data not shuffled (a whole batch is one class) gives high train_acc and low val_acc",
          f"at epoch 2 the unshuffled runs' gap is above {FAR_GAP:g} and exceeds the shuffled runs' gap by more "
          f"than {CAUSE_RAISES_GAP:g} (paired by seed)", FILES["causes"], check_c3),
    Claim("C4", "train and validation preprocessed differently give low val_acc",
          f"at the last epoch at least one kind of mismatch lowers val_acc by more than {VAL_DROP:g} (paired by seed)",
          FILES["causes"], check_c4),
    Claim("C5", "a model too complex for the amount of data overfits",
          "at the last epoch eval_gap is larger for the wider model and for fewer samples per class "
          "(paired differences above 0 for every value tested)", FILES["causes"], check_c5),
    Claim("C6", "large batches: faster",
          f"an epoch at the largest batch takes at least {SPEEDUP:.0%} less time than at the smallest (paired)",
          FILES["batch_sizes"], check_c6),
    Claim("C7", "large batches: more stable [lower training error]; small: better generalisation",
          "at the last epoch the largest batch has higher train_eval_acc and lower val_acc than the smallest (paired)",
          FILES["batch_sizes"], check_c7),
    Claim("C8", "batch_size 32 or less",
          "at the last epoch the best batch size <= 32 has higher val_acc than the best batch size > 32 (paired)",
          FILES["batch_sizes"], check_c8),
    Claim("C9", "with multi_gpu_model a model is copied onto G GPUs and each batch is split between them",
          f"at one global batch, final val_acc with G replicas is within +-{SAME_VAL:g} of one device (paired) "
          "for every G tested", FILES["gpus"], check_c9),
)


def evaluate(table: pd.DataFrame) -> list[tuple[Claim, Finding | None]]:
    """Every claim against a run summary table (`analysis.run_summary`)."""
    if table.empty:
        return [(claim, None) for claim in CLAIMS]
    return [(claim, claim.evaluate(table)) for claim in CLAIMS]


# --- attribution: which mechanism makes C1's gap at batch 64?

# (mechanism, the control keys that switch it on); a run belongs to an arm when one of
# its keys is off its default and every other control is at its default.
ARMS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("(b) BatchNorm momentum", ("model.bn_momentum",)),
    ("(b) no BatchNorm", ("model.batchnorm",)),
    ("(b) ghost batch norm", ("model.ghost_batch_size",)),
    ("(c) equal optimizer steps", ("train.budget",)),
    ("(d) learning rate scaled per batch size", ("train.lr_scaling", "train.warmup_epochs")),
)
INFERENCE_ARM = "(a) train accuracy in inference mode (eval_gap)"
DEFAULT_ARM = "default (the post's setting)"


@dataclass(frozen=True)
class Arm:
    label: str
    gap64: Estimate  # at batch 64, epoch 2 (or at batch 8's epoch-2 step count, for equal steps)
    change: Estimate | None  # paired vs the default arm, per seed; None for the default itself
    gap8: Estimate
    val_last: Estimate  # C7: val_acc at batch 64 - batch 8, last record, paired per seed
    read_at: str


@dataclass(frozen=True)
class Attribution:
    selection: str
    arms: tuple[Arm, ...]
    missing: tuple[str, ...]  # mechanisms with no runs here

    def conclusion(self) -> str:
        effects = [a for a in self.arms if a.change is not None and a.change.n > 0]
        if not effects:
            return "No control arm in these results: run experiments/controls.yaml to attribute the gap."
        top = max(effects, key=lambda a: abs(a.change.mean))  # type: ignore[union-attr]
        return (f"Of the controls in these results, {top.label} changes the epoch-2 gap at batch 64 the most: "
                f"by {fmt(top.change)} (paired over seeds), from {fmt(self.arms[0].gap64)} to "
                f"{fmt(top.gap64)}" + ("; its interval includes 0, so more seeds are needed to be sure."
                                        if top.change.low <= 0 <= top.change.high else "."))  # type: ignore[union-attr]


def _arm_of(row: pd.Series, off: list[str]) -> str | None:
    """The arm label of a run whose controls `off` are not at their defaults (with their values),
    DEFAULT_ARM, or None (several controls at once)."""
    if not off:
        return DEFAULT_ARM
    for label, keys in ARMS:
        if set(off) <= set(keys):
            extra = [k for k in an.CONTROL_COMPANIONS if k in row and pd.notna(row[k])]
            return f"{label}: " + ", ".join(f"{k}={_v(row[k])}" for k in [*off, *extra])
    return None


def _attribution_runs(epochs: pd.DataFrame) -> pd.DataFrame:
    """One row per done run at the post's toggles: settings, seed, arm, and a context key (everything else)."""
    runs = an.at_epoch(epochs, None)
    for key, value in an.POST_DEFAULTS.items():
        if key in runs:
            runs = runs[an.matches(runs[key], value)]
    if runs.empty:
        return runs
    changed = {k: ~an.is_default(runs[k], d) for k, d in an.CONTROL_DEFAULTS.items() if k in runs}
    arms = [_arm_of(row, [k for k, off in changed.items() if off[i]]) for i, row in runs.iterrows()]
    runs = runs.assign(_arm=arms).dropna(subset=["_arm"])
    skip = {an.BATCH_SIZE, *an.CONTROL_DEFAULTS, *an.CONTROL_COMPANIONS}
    return runs.assign(_ctx=an._key(runs, [c for c in an.setting_columns(runs) if c not in skip]))


def _reading(rows: pd.DataFrame, step: float | None) -> pd.Series | None:
    """A run's record (rows: its records) at epoch 2, or its last record at or before `step` optimizer steps."""
    if step is None:
        return rows[rows[vocab.EPOCH] == an.EPOCH_TWO].iloc[0] if (rows[vocab.EPOCH] == an.EPOCH_TWO).any() else None
    rows = rows[rows[vocab.STEP] <= step]
    return rows.loc[rows[vocab.STEP].idxmax()] if len(rows) else None


def _per_seed(epochs: pd.DataFrame, runs: pd.DataFrame, batch: int, metric: str, step: float | None) -> pd.Series:
    at = an.where(runs, an.BATCH_SIZE, batch)
    records = {run_id: rows for run_id, rows in epochs[epochs[an.RUN_ID].isin(at[an.RUN_ID])].groupby(an.RUN_ID)}
    values = {}
    for _, run in at.iterrows():
        record = _reading(records[run[an.RUN_ID]], step) if run[an.RUN_ID] in records else None
        if record is not None:
            values[run[an.SEED]] = float(record[metric])
    return pd.Series(values, dtype=float)


def attribution(epochs: pd.DataFrame) -> Attribution | None:
    """C1's gap at batch 64 under each control, paired by seed with the default arm (None: no such runs)."""
    needed = {an.BATCH_SIZE, an.RUN_ID, vocab.GAP, vocab.STEP}
    runs = _attribution_runs(epochs) if not epochs.empty and needed <= set(epochs.columns) else pd.DataFrame()
    if runs.empty:
        return None
    groups = [g for _, g in runs.groupby("_ctx", sort=True)
              if (g["_arm"] == DEFAULT_ARM).any() and all(an.matches(g[an.BATCH_SIZE], b).any() for b in (8, 64))]
    if not groups:
        return None
    group = max(groups, key=lambda g: (g["_arm"].nunique(), g[an.SEED].nunique()))  # first on ties
    default = group[group["_arm"] == DEFAULT_ARM]
    steps8 = _per_seed(epochs, default, 8, vocab.STEP, None).mean()  # batch 8's steps by epoch 2
    base = _per_seed(epochs, default, 64, vocab.GAP, None)
    arms = [_arm(epochs, default, DEFAULT_ARM, base, None), _inference_arm(epochs, default, base)]
    for label in sorted(set(group["_arm"]) - {DEFAULT_ARM}, key=lambda a: ([m for m, _ in ARMS].index(a.split(":")[0]), a)):
        rows = group[group["_arm"] == label]
        equal_steps = label.startswith("(c)")
        arms.append(_arm(epochs, rows, label, base, steps8 if equal_steps else None))
    present = {a.label.split(":")[0] for a in arms}
    missing = tuple(m for m, _ in ARMS if m not in present)
    seeds = group[an.SEED].nunique()
    selection = f"{len(group)} runs, {seeds} seeds, batch 8 and 64; " + (
        ", ".join(f"{k}={_v(group[k].iloc[0])}" for k in ("data.samples_per_class", "data.classes", "train.epochs",
                                                           "train.optimizer", "train.lr")
                  if k in group and not pd.isna(group[k].iloc[0])) or "")
    return Attribution(selection, tuple(arms), missing)


def _arm(epochs: pd.DataFrame, rows: pd.DataFrame, label: str, base: pd.Series, step: float | None) -> Arm:
    gap64 = _per_seed(epochs, rows, 64, vocab.GAP, step)
    change = None if label == DEFAULT_ARM else an.estimate((gap64 - base).dropna())
    val = _per_seed(epochs, rows, 64, vocab.VAL_ACC, math.inf) - _per_seed(epochs, rows, 8, vocab.VAL_ACC, math.inf)
    read_at = "epoch 2" if step is None else f"step {step:.0f} (batch 8's epoch 2)"
    return Arm(label, an.estimate(gap64), change, an.estimate(_per_seed(epochs, rows, 8, vocab.GAP, None)),
               an.estimate(val.dropna()), read_at)


def _inference_arm(epochs: pd.DataFrame, default: pd.DataFrame, base: pd.Series) -> Arm:
    """The default runs, with train accuracy measured like val_acc: eval_gap instead of gap."""
    eval_gap = _per_seed(epochs, default, 64, vocab.EVAL_GAP, None)
    return Arm(INFERENCE_ARM, an.estimate(eval_gap), an.estimate((eval_gap - base).dropna()),
               an.estimate(_per_seed(epochs, default, 8, vocab.EVAL_GAP, None)), an.estimate([]), "epoch 2")


def _survives(e: Estimate) -> str:
    outcome = Check("", e, low=FAR_GAP).outcome()
    return {True: "yes", False: "no", None: "undecided"}[outcome]


def _attribution_section(doc: Doc, att: Attribution | None) -> None:
    doc.h(2, "Attribution: what makes C1's gap at batch 64?")
    if att is None:
        doc.p(f"These results have no runs at batch 8 and 64 with the controls at their defaults; "
              f"`{FILES['controls']}` runs the attribution grid.")
        return
    doc.p("Each arm changes one thing against the default arm (same seeds, so changes are paired per seed). "
          f"The gap \"survives\" when its whole 95% interval lies above {FAR_GAP:g}. The equal-steps arm is read "
          "at batch 64's record after as many optimizer steps as batch 8 takes by epoch 2. The last column is C7's "
          "val_acc at batch 64 minus batch 8 at each run's last record (for equal steps: after the same steps).")
    doc.p(f"Runs used: {att.selection}.")
    doc.table(("arm", "read at", "gap at batch 64 [95% CI] (n)", f"survives (> {FAR_GAP:g})?",
               "change vs default (paired)", "gap at batch 8", "C7: val_acc 64 - 8, last (paired)"),
              [(a.label, a.read_at, fmt(a.gap64), _survives(a.gap64), fmt(a.change) if a.change else "(reference)",
                fmt(a.gap8), fmt(a.val_last) if a.val_last.n else "as default") for a in att.arms])
    for mechanism in att.missing:
        doc.p(f"{mechanism}: not in these results ({FILES['controls']}).")
    doc.p(f"Conclusion: {att.conclusion()}")


def _tuning_section(doc: Doc, tun: tuning.Tuning | None) -> None:
    doc.h(2, "Batch sizes at their own best learning rate")
    if tun is None:
        doc.p(f"No learning-rate search in these results; `{FILES['lr_search']}` runs one per batch size "
              "(a `search:` block in a grid file).")
        return
    doc.p("Shallue et al. (2019) compare batch sizes each at a learning rate tuned for it. Each search below drew "
          "learning rates with TPE at one seed, pruned trials whose val_acc curve fell below the median, and re-ran "
          "the best lr at every seed of the grid; the fixed lr is the grid's own runs of the same point. Changes are "
          "paired by seed.")
    doc.table(("batch size", "context", "best lr", "fixed lr", "val_acc at best lr, last epoch",
               "val_acc at fixed lr", "tuned - fixed (paired)", "gap at epoch 2: best lr / fixed lr"),
              [(str(p.batch_size), p.context or "-", tuning.describe(p.best_lr), tuning.describe(p.fixed_lr),
                fmt(p.tuned_val), fmt(p.fixed_val), fmt(p.change), f"{fmt(p.tuned_gap2)} / {fmt(p.fixed_gap2)}")
               for p in tun.points])
    doc.table(("batch size", "search trials: lr -> final val_acc (status)"),
              [(str(p.batch_size), "; ".join(f"{lr:.3g} -> {v:.3f}{'' if s == vocab.DONE else f' ({s})'}"
                                             for lr, v, s in p.trials)) for p in tun.points])
    doc.p(f"Conclusion: {tun.conclusion()}")


def _noise_section(doc: Doc, rows: tuple[tuning.NoiseRow, ...]) -> None:
    if not rows:
        return
    doc.h(2, "Gradient noise scale")
    doc.p("B_simple = tr(Sigma) / |G|^2 (McCandlish et al. 2018), estimated at every epoch from gradient norms at "
          "the run's batch size and at 4 times it (their appendix A.1), the two terms averaged separately over "
          "1,024 training images before the ratio. Mean [95% CI] over seeds, at the grid's fixed lr.")
    epochs = sorted({r.epoch for r in rows})
    keys = sorted({(r.batch_size, r.lr) for r in rows})
    cells = {(r.batch_size, r.lr, r.epoch): r.b_simple for r in rows}
    doc.table(("batch size", "lr", *(f"epoch {e}" for e in epochs)),
              [(str(b), f"{lr:g}", *(fmt(cells[(b, lr, e)]) if (b, lr, e) in cells else "-" for e in epochs))
               for b, lr in keys])
    doc.p(tuning.noise_conclusion(rows))


# --- formatting numbers


fmt = an.fmt_estimate


def verdict_text(claim: Claim, finding: Finding | None) -> str:
    if finding is None:
        return f"{an.NOT_TESTED} (see {claim.experiments})"
    if finding.outcome is None:
        undecided = [c for c in finding.checks if c.outcome() is None]
        n = finding.seeds_needed()
        if any(c.estimate.n < 2 for c in undecided):
            return f"{an.INCONCLUSIVE}: fewer than 2 seeds (or pairs) give no interval; run 3 or more seeds"
        more = f"about {n} seeds per setting would settle it" if n else "more than 1000 seeds would be needed"
        return f"{an.INCONCLUSIVE}: CI too wide; {more}"
    return finding.verdict


def outcome_text(check: Check) -> str:
    outcome = check.outcome()
    if outcome is None:
        n = check.seeds_needed()
        return f"undecided (~{n} seeds)" if n else "undecided"
    return "holds" if outcome else "fails"


def claims_table(findings: list[tuple[Claim, Finding | None]]) -> pd.DataFrame:
    """One row per check (or one per untested claim): for tables/claims.csv."""
    rows = []
    for claim, finding in findings:
        head = {"claim": claim.id, "verdict": finding.verdict if finding else an.NOT_TESTED,
                "experiments": claim.experiments}
        if finding is None:
            rows.append(head)
        for check in finding.checks if finding else ():
            e = check.estimate
            rows.append({**head, "check": check.label, "mean": e.mean, "ci_low": e.low, "ci_high": e.high,
                         "n": e.n, "sd": e.sd, "holds_when": check.region(), "outcome": outcome_text(check),
                         "seeds_needed": check.seeds_needed()})
    return pd.DataFrame(rows)


# --- header facts


def header(results: an.Results) -> list[tuple[str, str]]:
    runs = results.runs
    statuses = runs["status"].value_counts().to_dict() if "status" in runs else {}
    names = sorted(runs["sweep"].dropna().unique().tolist()) if "sweep" in runs else []
    return [
        ("results folders", ", ".join(str(f) for f in results.folders)),
        ("grids (name:)", ", ".join(f"{n} ({_grid_file(n)})" for n in names) or "none"),
        ("settings that vary", ", ".join(an.varying(results.epochs)) or "none"),
        ("runs", f"{len(runs)} ({', '.join(f'{v} {k}' for k, v in sorted(statuses.items()))})" if len(runs) else "0"),
        ("training wall time", _wall_time(runs)),
        ("training devices (runs.csv)", _devices(runs)),
        ("git commit", _git_commit()),
        ("package versions", _versions()),
        ("report written on", f"{platform.platform()}, {platform.machine()}, {os.cpu_count()} CPU cores"),
    ]


def _grid_file(name: str) -> str:
    path = Path(__file__).resolve().parent.parent / "experiments" / f"{name}.yaml"
    return f"experiments/{name}.yaml" if path.is_file() else "grid file not in experiments/"


def _wall_time(runs: pd.DataFrame) -> str:
    if "duration_seconds" not in runs or runs["duration_seconds"].dropna().empty:
        return "unknown"
    total = runs["duration_seconds"].sum()
    started = pd.to_datetime(runs["started"], errors="coerce", format="ISO8601").min()
    finished = pd.to_datetime(runs["finished"], errors="coerce", format="ISO8601").max()
    span = (finished - started).total_seconds() if pd.notna(started) and pd.notna(finished) else math.nan
    return f"{total / 60:.1f} min summed over runs; first start to last finish {span / 60:.1f} min"


def _devices(runs: pd.DataFrame) -> str:
    if "devices" not in runs:
        return "unknown"
    parts = []
    for (devices, virtual), group in runs.groupby(["devices", "virtual_devices"], dropna=False):
        kind = "logical CPU devices" if str(virtual) == "True" else "physical"
        parts.append(f"{devices} ({kind}; {len(group)} runs)")
    return "; ".join(parts) or "unknown"


def _git_commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent,
                              capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else "unknown"


VERSIONED = ("batchsweep", "tensorflow-cpu", "tensorflow", "keras", "optuna", "numpy", "pandas", "scipy", "matplotlib")


def _versions() -> str:
    found = []
    for name in VERSIONED:
        try:
            found.append(f"{name} {importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            continue
    return ", ".join([f"python {platform.python_version()}", *found])


# --- the document: a list of blocks, rendered to Markdown and to HTML


@dataclass
class Doc:
    blocks: list[tuple[str, Any]] = field(default_factory=list)

    def h(self, level: int, text: str) -> None:
        self.blocks.append(("h", (level, text)))

    def p(self, text: str) -> None:
        self.blocks.append(("p", text))

    def table(self, head: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.blocks.append(("table", (list(head), [list(r) for r in rows])))

    def figure(self, fig: plots.FigureFile) -> None:
        self.blocks.append(("figure", fig))


def document(results: an.Results, findings: list[tuple[Claim, Finding | None]],
             figures: list[plots.FigureFile], att: Attribution | None = None,
             health: pd.DataFrame | None = None) -> Doc:
    """The report's blocks: header, verdicts, one section per claim, attribution, tuning, figures."""
    doc = Doc()
    doc.h(1, "Batch-size claims report")
    doc.p("Does the blog post about Keras batch sizes hold? Each claim below is checked on the runs of this "
          "sweep, with 95% Student-t intervals over seeds. Reproduce with `python -m sweep report "
          + " ".join(str(f) for f in results.folders) + "`.")
    doc.table(("recorded", "value"), header(results))
    doc.h(2, "Verdicts")
    doc.table(("claim", "the post", "verdict", "deciding numbers"),
              [(c.id, c.quote, verdict_text(c, f), "; ".join(f"{k.label}: {fmt(k.estimate)}" for k in f.checks) if f else "")
               for c, f in findings])
    _health_section(doc, health if health is not None else pd.DataFrame())
    _statistics_section(doc)
    for claim, finding in findings:
        _claim_section(doc, claim, finding)
    _attribution_section(doc, att)
    _tuning_section(doc, tuning.tuning(results))
    _noise_section(doc, tuning.noise_scales(results))
    if figures:
        doc.h(2, "Figures")
        for fig in figures:
            doc.figure(fig)
    doc.h(2, "Tables")
    doc.p("CSV files next to this report: `tables/curves.csv` (every metric at every epoch, mean and 95% CI per "
          "group of seeds), `tables/gaps.csv` (gap and eval_gap at epoch 2 and at the last epoch), "
          "`tables/run_summary.csv` (one row per run), `tables/claims.csv` (every check above).")
    return doc


def _health_section(doc: Doc, health: pd.DataFrame) -> None:
    """Runs left out of every claim, and why: a degenerate run must not decide a verdict."""
    if health.empty:
        return
    doc.h(2, "Runs left out of the claims")
    doc.p(f"{len(health)} run(s) cannot answer a claim and are left out of every verdict and of the attribution "
          "(the figures still show the stuck ones). A setting whose seeds are all here is then 'not tested', "
          "and one that lost some seeds has a wider interval.")
    doc.table(("run", "status", "problem"), [(r["run_id"], r["status"], r["problem"]) for _, r in health.iterrows()])


def _statistics_section(doc: Doc) -> None:
    doc.h(2, "How to read the numbers")
    doc.p("A number in brackets is a 95% confidence interval over seeds: mean +- t(0.975, n-1) x sd / sqrt(n), "
          "with n the number of seeds (t = 4.30 for 3 seeds, so intervals are wide). It assumes the seed-to-seed "
          "values are roughly normal; with 3 seeds it cannot check that (a bootstrap over 3 seeds has only 10 distinct "
          "resamples and would give intervals that are too narrow). Comparisons between two settings pair runs "
          "with the same seed (same initial weights and data order), which removes the seed-to-seed spread they share.")
    doc.p("A check holds when its whole interval lies in the region the claim needs, fails when the whole interval "
          "lies outside, and is undecided otherwise. A claim is supported when all its checks hold, contradicted "
          "when one fails, inconclusive otherwise; the number of seeds that would decide it is the smallest n with "
          "t(n-1) x sd / sqrt(n) below the distance from the mean to the threshold, using the observed sd.")
    doc.p("gap = train_acc - val_acc is what the post read: train_acc is Keras's running mean over the epoch in "
          "training mode. eval_gap = train_eval_acc - val_acc compares the same end-of-epoch model on training and "
          "validation images, both in inference mode. A large gap with a small eval_gap is a measurement effect "
          "(running mean, BatchNorm batch statistics vs moving statistics), not a failure to generalise.")
    doc.p(f"Thresholds (accuracies as fractions): far above = gap > {FAR_GAP:g}; close = |gap| < {CLOSE_GAP:g}; "
          f"a cause must raise the gap by > {CAUSE_RAISES_GAP:g}; a mismatch must lower val_acc by > {VAL_DROP:g}; "
          f"faster = at least {SPEEDUP:.0%} less time per epoch; the same = within +-{SAME_VAL:g} val_acc. "
          f"Where several groups of runs could answer a claim, the runs at the post's defaults (shuffled, balanced, "
          f"same preprocessing, width 1, 1 device) are used, then the group with the most values of the compared "
          f"setting, the most seeds, and the earliest results folder on the command line.")


def _claim_section(doc: Doc, claim: Claim, finding: Finding | None) -> None:
    doc.h(2, f"{claim.id}: {verdict_text(claim, finding)}")
    doc.p(f"The post: \"{claim.quote}\".")
    doc.p(f"Checked: {claim.test}.")
    if finding is None:
        doc.p(f"This sweep has no runs that compare what the claim needs; `{claim.experiments}` tests it.")
        return
    doc.p(f"Runs used: {finding.selection}.")
    doc.table(("check", "mean [95% CI] (n)", "holds when", "outcome"),
              [(c.label, fmt(c.estimate), c.region(), outcome_text(c)) for c in finding.checks])
    if finding.evidence:
        doc.table(("more evidence (does not decide)", "mean [95% CI] (n)"),
                  [(label, fmt(e)) for label, e in finding.evidence])
    for note in finding.notes:
        doc.p(note)


def to_markdown(doc: Doc, out: Path) -> str:
    lines: list[str] = []
    for kind, body in doc.blocks:
        if kind == "h":
            lines += [f"{'#' * body[0]} {body[1]}", ""]
        elif kind == "p":
            lines += [body, ""]
        elif kind == "table":
            head, rows = body
            cell = lambda text: str(text).replace("|", "\\|").replace("\n", " ")  # noqa: E731
            lines += ["| " + " | ".join(map(cell, head)) + " |", "|" + "---|" * len(head)]
            lines += ["| " + " | ".join(map(cell, r)) + " |" for r in rows] + [""]
        elif kind == "figure":
            lines += [f"![{body.title}]({body.png.relative_to(out).as_posix()})", "", f"*{body.title}* {body.caption}", ""]
    return "\n".join(lines)


CSS = """
body { font-family: system-ui, sans-serif; max-width: 70rem; margin: 2rem auto; padding: 0 1rem; color: #222;
       line-height: 1.45; }
table { border-collapse: collapse; margin: 1rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
code { background: #f3f3f3; padding: 0 0.2rem; }
img { max-width: 100%; border: 1px solid #eee; }
figure { margin: 1.5rem 0; }
.supported { color: #176317; font-weight: 600; } .contradicted { color: #a11; font-weight: 600; }
.inconclusive { color: #8a5a00; font-weight: 600; } .not-tested { color: #666; font-weight: 600; }
"""


def _inline(text: str) -> str:
    """Escape, then `code` -> <code>, and colour verdict words."""
    escaped = re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(str(text)))
    for word, css in ((an.SUPPORTED, "supported"), (an.CONTRADICTED, "contradicted"),
                      (an.INCONCLUSIVE, "inconclusive"), (an.NOT_TESTED, "not-tested")):
        escaped = re.sub(rf"^(C\d: )?{word}", rf'\1<span class="{css}">{word}</span>', escaped)
    return escaped


def to_html(doc: Doc) -> str:
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             "<title>Batch-size claims report</title>", f"<style>{CSS}</style></head><body>"]
    for kind, body in doc.blocks:
        if kind == "h":
            parts.append(f"<h{body[0]}>{_inline(body[1])}</h{body[0]}>")
        elif kind == "p":
            parts.append(f"<p>{_inline(body)}</p>")
        elif kind == "table":
            head, rows = body
            parts.append("<table><tr>" + "".join(f"<th>{_inline(h)}</th>" for h in head) + "</tr>")
            parts += ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows]
            parts.append("</table>")
        elif kind == "figure":
            data = base64.b64encode(body.png.read_bytes()).decode("ascii")
            parts.append(f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(body.title)}">'
                         f"<figcaption><em>{_inline(body.title)}</em> {_inline(body.caption)}</figcaption></figure>")
    parts.append("</body></html>")
    return "\n".join(parts)


# --- the entry point


@dataclass(frozen=True)
class Written:
    markdown: Path
    html: Path
    findings: list[tuple[Claim, Finding | None]]


def build(folders: Sequence[str | Path], out: str | Path | None = None, svg: bool = False) -> Written:
    """Tables, figures (SVG too on request) and the report for results folders, into out (default: the only folder)."""
    results = an.load(folders)
    target = Path(out) if out is not None else Path(folders[0])
    target.mkdir(parents=True, exist_ok=True)
    an.write_tables(results, target)
    health = an.run_health(results)
    healthy = an.without(results.epochs, health)
    findings = evaluate(an.run_summary(healthy))
    claims_table(findings).to_csv(target / "tables" / "claims.csv", index=False)
    figures = plots.draw_all(results, target, svg=svg)
    doc = document(results, findings, figures, attribution(healthy), health)
    md, page = target / "report.md", target / "report.html"
    md.write_text(to_markdown(doc, target), encoding="utf-8")
    page.write_text(to_html(doc), encoding="utf-8")
    return Written(md, page, findings)
