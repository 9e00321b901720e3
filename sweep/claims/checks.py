"""How each claim is checked: functions from a run summary table (`sweep.analysis.run_summary`)
to a `Finding`, or None when the runs cannot answer the claim. Shared shapes are reused across
claims: `check_cause_raises_gap` takes any toggle, `across_batch_sizes` hands a check the batch-size
group with its smallest and largest batch. C6, read from timings, is `sweep.claims.speed_check`; C7 and C8,
fit, generalisation and the advice across batch sizes, are `sweep.claims.scaling_checks`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd

from sweep import vocab
from sweep.analysis import (
    BATCH_SIZE,
    CONTROL_DEFAULTS,
    GPUS,
    SOURCE,
    column,
)
from sweep.analysis.chance import Arms, arms
from sweep.analysis.estimates import Check, Estimate, Key, estimate, fmt_estimate
from sweep.analysis.selection import (
    LR,
    OPTIMIZER,
    Selection,
    choose_context,
    fmt_value,
    matches,
    paired,
    sorted_values,
    toggle_values,
    where,
)
from sweep.claims.findings import (
    CAPACITY_MARGIN,
    CLOSE_GAP,
    FAR_GAP,
    LAG_MARGIN,
    POST_GAP,
    SAME_VAL,
    VAL_DROP,
    Claim,
    Evidence,
    Finding,
    Rule,
)

BN_MOMENTUM = "model.bn_momentum"


def estimate_at(rows: pd.DataFrame, axis: str, value: Any, metric: str) -> Estimate:
    return estimate(rows[metric][matches(rows[axis], value)])  # `where` on one column: it is called ~1000 times


def finding_from(
    checks: Sequence[Check],
    read: Selection | Sequence[Selection],
    evidence: Sequence[Evidence | tuple[str, Estimate]] = (),
    notes: Sequence[str] = (),
    rule: Rule = Rule.ALL,
    size: Sequence[Check] = (),
    mechanism: Sequence[Check] = (),
    tested: Arms | None = None,
) -> Finding:
    """A finding from the selection(s) it read: their descriptions (each once) and the ids of their runs;
    `tested`: its compared arms against chance.
    """
    sels = (read,) if isinstance(read, Selection) else tuple(read)
    described = "; ".join(dict.fromkeys(s.describe() for s in sels))
    run_ids = tuple(sorted({str(r) for s in sels for r in s.rows[vocab.RUN_ID]}))
    tested_at = " | ".join(dict.fromkeys(s.tested_at() for s in sels))
    optimizer = " | ".join(dict.fromkeys(s.values_of(OPTIMIZER) for s in sels))
    lr = " | ".join(dict.fromkeys(s.values_of(LR) for s in sels))
    folders = sorted({str(f) for s in sels if SOURCE in s.rows for f in s.rows[SOURCE].dropna()})
    return Finding(
        tuple(checks),
        described,
        tuple(Evidence(*e) for e in evidence),
        tuple(notes),
        rule,
        run_ids,
        tested_at=tested_at,
        optimizer=optimizer,
        lr=lr,
        folders=" | ".join(folders),
        size=tuple(size),
        mechanism=tuple(mechanism),
        arms=tested,
    )


# --- C1: the post's picture at epoch 2


def check_gap_at_two_batch_sizes(claim: Claim, table: pd.DataFrame) -> Finding | None:
    small, large = claim.needs.values
    gap2 = column(vocab.GAP, "epoch2")
    sel = choose_context(table.dropna(subset=[gap2]) if gap2 in table else table, BATCH_SIZE, (small, large))
    return None if sel is None else gap_at_two_batch_sizes(claim, sel, large)


def gap_at_two_batch_sizes(claim: Claim, sel: Selection, large: Any) -> Finding:
    """C1 on one group of runs with batch sizes `small` (the claim's first) and `large`: its direction (the large
    batch's gap above the small one's, paired by seed) decides; whether the post's size is reproduced and whether
    BatchNorm's lag is the mechanism (the recalibrated gaps equal) are statements of their own.
    """
    small = claim.needs.values[0]
    gap2 = column(vocab.GAP, "epoch2")
    rows = sel.rows
    between = f"{fmt_value(large)} - {fmt_value(small)}"
    direction = Check(
        f"gap, batch {between}, epoch 2 (paired)",
        paired(rows, BATCH_SIZE, small, large, gap2),
        low=0.0,
        key=Key(vocab.GAP, ((BATCH_SIZE, between), (vocab.EPOCH, "2"))),
        short=f"gap, batch {between}, epoch 2",
    )
    size = (
        Check(
            f"gap at batch {large}, epoch 2",
            estimate_at(rows, BATCH_SIZE, large, gap2),
            low=POST_GAP.value,
            key=at_batch(vocab.GAP, large),
        ),
        Check(
            f"gap at batch {small}, epoch 2",
            estimate_at(rows, BATCH_SIZE, small, gap2),
            low=-CLOSE_GAP.value,
            high=CLOSE_GAP.value,
            key=at_batch(vocab.GAP, small),
        ),
    )
    recal = column(vocab.EVAL_GAP_RECAL, "epoch2")
    mechanism = (
        (
            Check(
                f"eval_gap_recal, batch {between}, epoch 2 (paired): BatchNorm's lag explains the gap when equal",
                paired(rows, BATCH_SIZE, small, large, recal),
                low=-LAG_MARGIN.value,
                high=LAG_MARGIN.value,
                key=Key(vocab.EVAL_GAP_RECAL, ((BATCH_SIZE, between), (vocab.EPOCH, "2"))),
                short=f"eval_gap_recal, batch {between}, epoch 2",
            ),
        )
        if vocab.EVAL_GAP_RECAL in _cause(rows, "epoch2")
        else ()
    )
    evidence = tuple(
        Evidence(
            f"{metric} at batch {bs}, epoch 2",
            estimate_at(rows, BATCH_SIZE, bs, column(metric, "epoch2")),
            at_batch(metric, bs),
        )
        for bs in (large, small)
        for metric in (vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.VAL_ACC, vocab.EVAL_GAP, *_cause(rows, "epoch2"))
    )
    notes = (_measurement_share(rows, small, large),)
    tested = arms(rows, BATCH_SIZE, large, small)
    return finding_from((direction,), sel, evidence, notes, size=size, mechanism=mechanism, tested=tested)


def at_batch(metric: str, batch: Any, epoch: str = "2") -> Key:
    """The key of a number read at one batch size and epoch (C1's checks and evidence)."""
    return Key(metric, ((BATCH_SIZE, fmt_value(batch)), (vocab.EPOCH, epoch)))


# The cause behind a symptom: the same weights with BatchNorm's statistics recomputed, where recorded.
CAUSE_METRICS = (vocab.TRAIN_EVAL_ACC_RECAL, vocab.VAL_ACC_RECAL, vocab.EVAL_GAP_RECAL)


def _cause(rows: pd.DataFrame, when: str) -> tuple[str, ...]:
    """CAUSE_METRICS where every run has them at `when` (none for runs recorded without recalibration)."""
    return tuple(m for m in CAUSE_METRICS if column(m, when) in rows and rows[column(m, when)].notna().all())


def bn_momentum(rows: pd.DataFrame) -> float:
    """The BatchNorm momentum of a group of runs (its first row's; an empty cell or no column: the default)."""
    recorded = rows[BN_MOMENTUM].iloc[0] if BN_MOMENTUM in rows and len(rows) else math.nan
    return float(CONTROL_DEFAULTS[BN_MOMENTUM] if pd.isna(recorded) else recorded)


def _measurement_share(rows: pd.DataFrame, small: int, large: int) -> str:
    """gap vs eval_gap at the large batch: how much of the post's picture is measurement."""
    at_large = where(rows, BATCH_SIZE, large)
    gap = estimate(at_large[column(vocab.GAP, "epoch2")])
    eval_gap = estimate(at_large[column(vocab.EVAL_GAP, "epoch2")])
    artefact = estimate(at_large[column(vocab.TRAIN_ACC, "epoch2")] - at_large[column(vocab.TRAIN_EVAL_ACC, "epoch2")])
    steps = {bs: where(rows, BATCH_SIZE, bs)[column(vocab.STEP, "epoch2")].mean() for bs in (small, large)}
    momentum = bn_momentum(rows)
    weight = momentum ** steps[large] if math.isfinite(steps[large]) else math.nan
    fmt = fmt_estimate
    return (
        f"At batch {large}, epoch 2, the post's gap (train_acc - val_acc) is {fmt(gap)}, but the eval_gap "
        f"(train_eval_acc - val_acc: the same end-of-epoch model, inference mode, on training and on "
        f"validation images) is {fmt(eval_gap)}. train_acc - train_eval_acc = {fmt(artefact)} of the gap is "
        f"measurement: Keras's train_acc is a running mean in training mode (batch statistics), while "
        f"val_acc uses BatchNorm's moving statistics. By epoch 2 batch {large} has taken {steps[large]:.0f} "
        f"optimizer steps and batch {small} {steps[small]:.0f}; with momentum {momentum:g} the moving statistics "
        f"still give their initial values a weight of {momentum:g}^{steps[large]:.0f} = {weight:.2f} at batch "
        f"{large} (a lag that fewer steps per epoch makes worse)."
    )


# --- C2, C3: a toggle gives high train_acc and low val_acc early in training


def check_cause_raises_gap(claim: Claim, table: pd.DataFrame) -> Finding | None:
    (axis,), reference = claim.needs.axes, claim.needs.reference
    table = table.dropna(subset=[column(vocab.GAP, "epoch2")])  # runs of one epoch cannot show epoch 2
    others = toggle_values(table, axis)[1:] if axis in table else []
    if not others or not matches(table[axis], reference).any():
        return None
    value = max(others)  # the strongest form of the cause present (imbalance 0.95; shuffle False)
    sel = choose_context(table, axis, (reference, value))
    return None if sel is None else cause_raises_gap(claim, sel, value)


def cause_raises_gap(claim: Claim, sel: Selection, value: Any) -> Finding:
    """C2/C3 on one group of runs with the claim's reference and the cause at `value`: the cause raising the gap
    (paired by seed) decides; the cause's gap far above (the symptom's size) is a statement of its own; and
    whether each arm learned (a cause whose runs stay at chance prevents learning; a reference at chance cannot
    answer).
    """
    (axis,), reference, gap2 = claim.needs.axes, claim.needs.reference, column(vocab.GAP, "epoch2")
    at = f"{axis}={fmt_value(value)}"
    direction = Check(
        f"gap change vs {axis}={fmt_value(reference)}, epoch 2 (paired)",
        paired(sel.rows, axis, reference, value, gap2),
        low=0.0,
        key=Key(vocab.GAP, ((axis, f"{fmt_value(value)} - {fmt_value(reference)}"), (vocab.EPOCH, "2"))),
        short=f"gap change vs {axis}={fmt_value(reference)}, epoch 2",
    )
    size = (
        Check(
            f"gap at {at}, epoch 2",
            estimate_at(sel.rows, axis, value, gap2),
            low=FAR_GAP.value,
            key=Key(vocab.GAP, ((axis, fmt_value(value)), (vocab.EPOCH, "2"))),
        ),
    )
    balanced = column(vocab.TRAIN_EVAL_BALANCED_ACC, "epoch2")
    measured = (vocab.TRAIN_EVAL_BALANCED_ACC,) if balanced in sel.rows and sel.rows[balanced].notna().any() else ()
    evidence = tuple(
        (f"{metric} at {at}, epoch 2", estimate_at(sel.rows, axis, value, column(metric, "epoch2")))
        for metric in (vocab.TRAIN_ACC, vocab.VAL_ACC, vocab.EVAL_GAP, *measured, *_cause(sel.rows, "epoch2"))
    )
    changes = (vocab.TRAIN_ACC, vocab.VAL_ACC, *(m for m in _cause(sel.rows, "epoch2") if m == vocab.VAL_ACC_RECAL))
    evidence += tuple(
        (
            f"{metric} change vs {axis}={fmt_value(reference)}, epoch 2 (paired)",
            paired(sel.rows, axis, reference, value, column(metric, "epoch2")),
        )
        for metric in changes
    )
    evidence += (
        (
            "gap change at the last epoch (paired)",
            paired(sel.rows, axis, reference, value, column(vocab.GAP, "last")),
        ),
    )
    return finding_from((direction,), sel, evidence, size=size, tested=arms(sel.rows, axis, value, reference))


# --- C4: preprocessing validation differently lowers val_acc


def check_mismatch_lowers_val(claim: Claim, table: pd.DataFrame) -> Finding | None:
    (axis,), reference, metric = claim.needs.axes, claim.needs.reference, column(vocab.VAL_ACC, "last")
    kinds = toggle_values(table, axis)[1:] if axis in table else []
    checks, sizes, selections = [], [], []
    for kind in kinds:
        sel = choose_context(table, axis, (reference, kind))
        if sel is None:
            continue
        change = paired(sel.rows, axis, reference, kind, metric)
        key = Key(vocab.VAL_ACC, ((axis, f"{kind} - {reference}"), (vocab.EPOCH, "last")))
        label = f"val_acc change with mismatch {kind}, last epoch (paired)"
        checks.append(Check(label, change, high=0.0, key=key, short=f"val_acc change with mismatch {kind}"))
        sizes.append(Check(f"{label}: by more than {VAL_DROP.value:g}", change, high=-VAL_DROP.value))
        selections.append(sel)
    if not checks:
        return None
    notes = (
        "Supported when at least one kind of mismatch lowers val_acc; its size is shown when one lowers it by more "
        "than the threshold. Each kind is listed.",
    )
    return finding_from(checks, selections, (), notes, rule=Rule.ANY, size=sizes)


# --- C5: a model too large for the data overfits

# Whether a larger value of the axis gives the model more capacity per training image (the direction that overfits).
LARGER_IS_MORE_CAPACITY = {"model.width": True, "data.samples_per_class": False}


def check_capacity_overfits(claim: Claim, table: pd.DataFrame) -> Finding | None:
    metric = column(vocab.EVAL_GAP, "last")
    checks, sizes, selections = [], [], []
    for axis in claim.needs.axes:
        sel = choose_context(table, axis) if axis in table else None
        if sel is None:
            continue
        values = toggle_values(sel.rows, axis)
        for value in values[1:]:
            grows = (value > values[0]) == LARGER_IS_MORE_CAPACITY[axis]
            diff = paired(sel.rows, axis, values[0], value, metric)
            step = f"{axis} {fmt_value(values[0])} -> {fmt_value(value)}"
            label = f"eval_gap change {step}, last epoch (paired)"
            key = Key(vocab.EVAL_GAP, ((axis, f"{fmt_value(value)} - {fmt_value(values[0])}"), (vocab.EPOCH, "last")))
            # the change must clear 0 the way more capacity points (up where it grows), and the margin for its size
            sign, size = (1.0, math.inf) if grows else (-1.0, -math.inf)
            low, high = sorted((0.0, size))
            size_low, size_high = sorted((sign * CAPACITY_MARGIN.value, size))
            short = f"eval_gap change {step}"
            checks.append(Check(label, diff, low, high, margin=CAPACITY_MARGIN.value, key=key, short=short))
            sizes.append(Check(f"{label}: by more than {CAPACITY_MARGIN.value:g}", diff, size_low, size_high))
        selections.append(sel)
    if not checks:
        return None
    notes = (
        "Overfitting is judged on eval_gap (train and validation measured the same way, end-of-training "
        "model), not on the running train_acc. Expected sign: wider model or fewer images per class -> "
        f"larger eval_gap. A change smaller than {CAPACITY_MARGIN.value:g} is no overfitting (equivalence at that "
        "margin): such a step contradicts the claim.",
    )
    return finding_from(checks, selections, (), notes, size=sizes)


# --- C6-C8: batch size, smallest vs largest (the checks: speed_check, scaling_checks)


def across_batch_sizes(
    check: Callable[[Selection, Any, Any], Finding | None],
) -> Callable[[Claim, pd.DataFrame], Finding | None]:
    """A check given the group of runs chosen to compare batch sizes, with its smallest and largest batch."""

    def run(claim: Claim, table: pd.DataFrame) -> Finding | None:
        sel = choose_context(table, BATCH_SIZE)
        if sel is None:
            return None
        sizes = sorted_values(sel.rows[BATCH_SIZE])
        return check(sel, sizes[0], sizes[-1])

    return run


# --- C9: replicas


def check_replicas_learn_alike(claim: Claim, table: pd.DataFrame) -> Finding | None:
    one = claim.needs.reference
    sel = choose_context(table, GPUS)
    if sel is None or not matches(sel.rows[GPUS], one).any():
        return None
    replicas = [g for g in sorted_values(sel.rows[GPUS]) if g != one]

    def diff(metric: str, g: Any) -> Estimate:
        return paired(sel.rows, GPUS, one, g, column(metric, "last"))

    checks = tuple(
        Check(
            f"val_acc, {fmt_value(g)} replicas - 1 device, last epoch (paired)",
            diff(vocab.VAL_ACC, g),
            low=-SAME_VAL.value,
            high=SAME_VAL.value,
            key=Key(vocab.VAL_ACC, ((GPUS, f"{fmt_value(g)} - {fmt_value(one)}"), (vocab.EPOCH, "last"))),
            short=f"val_acc, {fmt_value(g)} replicas - 1 device",
        )
        for g in replicas
    )
    evidence = tuple(
        (f"train_eval_acc, {fmt_value(g)} replicas - 1 device, last epoch (paired)", diff(vocab.TRAIN_EVAL_ACC, g))
        for g in replicas
    )
    notes = (
        "Each replica normalises its own share of the batch (Keras BatchNormalization is not synchronised "
        "across replicas), so G replicas see batch statistics over batch/G images.",
    )
    return finding_from(checks, sel, evidence, notes)
