"""The post's claims C1-C9 as data: its words, the runs each needs, its thresholds and its check.

Each claim is one `Claim` in `CLAIMS`; its check function (`sweep.report.checks`) reads a run
summary table and returns a `Finding` (`sweep.report.findings`), or None when the runs cannot
answer it. docs/report.md explains every threshold to readers.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

import pandas as pd

from sweep import readings, vocab
from sweep.analysis import BATCH_SIZE, GPUS, SOURCE, column
from sweep.report.checks import (
    check_capacity_overfits,
    check_cause_raises_gap,
    check_gap_at_two_batch_sizes,
    check_large_batch_faster,
    check_large_batch_trains_small_generalises,
    check_mismatch_lowers_val,
    check_replicas_learn_alike,
    check_small_batch_wins,
)
from sweep.report.family import corrected
from sweep.report.findings import (
    CAUSE_RAISES_GAP,
    CLOSE_GAP,
    FAR_GAP,
    GENERALISATION,
    READ_RAW,
    READ_RECAL,
    READ_SYMPTOM,
    READ_TIME,
    SAME_VAL,
    SPEEDUP,
    SYMPTOM,
    TIME,
    VAL_DROP,
    Claim,
    Finding,
    Needs,
    Threshold,
)
from sweep.tuning import SMALL_BATCH

# The experiments files whose runs answer the claims (shipped in experiments/, named here so
# an installed package can name them without that folder).
ARTICLE_GRID, CAUSES_GRID = "experiments/article.yaml", "experiments/causes.yaml"
BATCH_SIZES_GRID, GPUS_GRID = "experiments/batch_sizes.yaml", "experiments/gpus.yaml"

CLAIMS: tuple[Claim, ...] = (
    Claim(
        "C1",
        "at batch_size=64, epoch 2, train_acc 80% but val_acc 6%; at batch_size=8 both 60% and rising",
        f"at epoch 2, gap = train_acc - val_acc above {FAR_GAP.value:g} at batch 64 and within "
        f"+-{CLOSE_GAP.value:g} at batch 8",
        Needs(ARTICLE_GRID, (BATCH_SIZE,), values=(8, 64)),
        (FAR_GAP, CLOSE_GAP),
        check_gap_at_two_batch_sizes,
        reads=SYMPTOM,
    ),
    Claim(
        "C2",
        "imbalanced training classes (95% of the images in one class; validation balanced) "
        "give high train_acc and low val_acc",
        f"at epoch 2 the imbalanced runs' gap is above {FAR_GAP.value:g} and exceeds the balanced runs' gap by "
        f"more than {CAUSE_RAISES_GAP.value:g} (paired by seed)",
        Needs(CAUSES_GRID, ("data.imbalance",), reference=0.0),
        (FAR_GAP, CAUSE_RAISES_GAP),
        check_cause_raises_gap,
        reads=SYMPTOM,
    ),
    Claim(
        "C3",
        "training data not shuffled (a whole batch is one class) gives high train_acc and low val_acc",
        f"at epoch 2 the unshuffled runs' gap is above {FAR_GAP.value:g} and exceeds the shuffled runs' gap by "
        f"more than {CAUSE_RAISES_GAP.value:g} (paired by seed)",
        Needs(CAUSES_GRID, ("data.shuffle",), reference=True),
        (FAR_GAP, CAUSE_RAISES_GAP),
        check_cause_raises_gap,
        reads=SYMPTOM,
    ),
    Claim(
        "C4",
        "train and validation preprocessed differently give low val_acc",
        f"at the last epoch at least one kind of mismatch lowers val_acc by more than {VAL_DROP.value:g} "
        "(paired by seed)",
        Needs(CAUSES_GRID, ("data.preprocess_mismatch",), reference="none"),
        (VAL_DROP,),
        check_mismatch_lowers_val,
    ),
    Claim(
        "C5",
        "a model too complex for the amount of data overfits",
        "at the last epoch eval_gap is larger for the wider model and for fewer samples per class "
        "(paired differences above 0 for every value tested)",
        Needs(CAUSES_GRID, ("model.width", "data.samples_per_class")),
        (),
        check_capacity_overfits,
    ),
    Claim(
        "C6",
        "large batches: faster",
        f"an epoch at the largest batch takes at least {SPEEDUP.value:.0%} less time than at the smallest (paired)",
        Needs(BATCH_SIZES_GRID, (BATCH_SIZE,)),
        (SPEEDUP,),
        check_large_batch_faster,
        reads=TIME,
    ),
    Claim(
        "C7",
        "large batches: more stable [lower training error]; small: better generalisation",
        "at the last epoch the largest batch has higher train_eval_acc and lower val_acc than the smallest (paired)",
        Needs(BATCH_SIZES_GRID, (BATCH_SIZE,)),
        (),
        check_large_batch_trains_small_generalises,
    ),
    Claim(
        "C8",
        f"batch_size {SMALL_BATCH} or less",
        f"at the last epoch the best batch size <= {SMALL_BATCH} has higher val_acc than the best batch size "
        f"> {SMALL_BATCH} (paired), each chosen on the other seeds and tested on the held-out one (leave one seed out)",
        Needs(BATCH_SIZES_GRID, (BATCH_SIZE,)),
        (),
        check_small_batch_wins,
    ),
    Claim(
        "C9",
        "with multi_gpu_model a model is copied onto G GPUs and each batch is split between them",
        "the sentence itself describes the API (copies of the model, each batch split) and is true by "
        "construction; tested is what it implies for training: at one global batch, G replicas, each normalising "
        f"its own share of the batch (per-replica BatchNorm), end with val_acc within +-{SAME_VAL.value:g} of one "
        "device (paired) for every G tested",
        Needs(GPUS_GRID, (GPUS,), reference=1),
        (SAME_VAL,),
        check_replicas_learn_alike,
    ),
)


def by_id(claim_id: str) -> Claim:
    return next(c for c in CLAIMS if c.id == claim_id)


def thresholds() -> tuple[Threshold, ...]:
    """Every threshold the claims use, once each, in the order the claims name them."""
    return tuple(dict.fromkeys(t for claim in CLAIMS for t in claim.thresholds))


def evaluate(
    table: pd.DataFrame,
    decided_in: Mapping[str, str] | None = None,
    sequential: Mapping[str, pd.DataFrame] | None = None,
    tuned: pd.DataFrame | None = None,
    untrained: pd.DataFrame | None = None,
) -> list[tuple[Claim, Finding | None]]:
    """Every claim against a run summary table (`analysis.run_summary`), Holm-corrected across all their checks:
    one family, so the whole report's chance of any wrong decision stays below 5%.

    `decided_in` maps a claim to the results folder that continued it with `run --until-decided`: the claim is
    read from that folder's runs alone, so its sequential verdict and the numbers shown are about the same
    runs (a combined report would otherwise answer C5 from a map grid's broader but thinner data sizes).
    `sequential` holds each such claim's rows of decisions.csv: a check they decided on the same numbers
    enters the family with its sequential p-value, valid after the optional stopping. `tuned` (`tuned_lr`):
    the batch-size advice (TUNED_FIRST) is read there first, each batch size at its own best lr. `untrained`:
    the summary of the runs that did not train (in no number); each finding counts those its groups lost.
    """
    if table.empty and (tuned is None or tuned.empty):
        return [(claim, None) for claim in CLAIMS]
    where, looks = decided_in or {}, sequential or {}
    found: list[tuple[Claim, Finding | None]] = []
    for claim in CLAIMS:
        at_tuned = read(claim, tuned) if claim.id in TUNED_FIRST and tuned is not None and len(tuned) else None
        if at_tuned is not None:
            found.append((claim, dataclasses.replace(at_tuned, reading=f"{at_tuned.reading}; {READ_TUNED}")))
            continue
        finding = _evaluate_in(claim, table, where.get(claim.id)) if len(table) else None
        finding = with_lost(claim, finding, table, untrained, where.get(claim.id))
        found.append((claim, with_sequential(finding, looks.get(claim.id))))
    return corrected(found)


def with_lost(
    claim: Claim, finding: Finding | None, table: pd.DataFrame, untrained: pd.DataFrame | None, folder: str | None
) -> Finding | None:
    """The finding with the number of runs that did not train in the groups it compares: the same choice of
    runs made with them back in (choices depend on settings only), counted, never read. Where the claim had
    nothing to read without them, a finding without checks says so."""
    if untrained is None or untrained.empty:
        return finding
    everything = pd.concat([table, untrained], ignore_index=True)
    chosen = _evaluate_in(claim, everything, folder)
    if chosen is None:
        return finding
    lost = len(set(chosen.run_ids) & set(untrained[vocab.RUN_ID].astype(str)))
    if finding is None:  # every run of a compared setting did not train: the claim has nothing to read
        return Finding((), chosen.selection, run_ids=chosen.run_ids, tested_at=chosen.tested_at, untrained=lost)
    return dataclasses.replace(finding, untrained=lost)


# Batch-size advice is read with each batch size at its own tuned learning rate where the results have one
# (Shallue et al. 2019; the tuning playbook): at one fixed lr a batch size is judged at another's best lr.
TUNED_FIRST = ("C7", "C8")
READ_TUNED = "each batch size at its own tuned lr (the search's best, re-run at every seed)"


def tuned_lr(summary: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The tuned re-runs' summary with `train.lr` replaced by its description, so batch sizes that differ in
    their best lr form one group: "tuned per batch size over [0.0001, 0.03] (8: 0.0068, 64: 0.0021)", one
    description per results folder (one folder, one searched grid; an optimizer's search per folder)."""
    if summary.empty or "train.lr" not in summary:
        return summary
    parts = []
    for folder, rows in summary.groupby(SOURCE, sort=False) if SOURCE in summary else [(None, summary)]:
        best = rows.groupby(BATCH_SIZE)["train.lr"].first().sort_index()
        listed = ", ".join(f"{int(b)}: {lr:.2g}" for b, lr in best.items())
        searched = _searched(runs if folder is None or SOURCE not in runs else runs[runs[SOURCE] == folder])
        parts.append(rows.assign(**{"train.lr": f"tuned per batch size over {searched} ({listed})"}))
    return pd.concat(parts).loc[summary.index]


def _searched(runs: pd.DataFrame) -> str:
    """The range the searches drew from (runs.csv records it on search runs), else the range their trials span."""
    if vocab.SEARCH_LR_LOW in runs and runs[vocab.SEARCH_LR_LOW].notna().any():
        return f"[{runs[vocab.SEARCH_LR_LOW].min():.2g}, {runs[vocab.SEARCH_LR_HIGH].max():.2g}]"
    trials = runs[runs[vocab.ROLE] == vocab.SEARCH] if vocab.ROLE in runs else runs.iloc[0:0]
    if trials.empty:
        return "a search"
    return f"trials at {trials['train.lr'].min():.2g}-{trials['train.lr'].max():.2g}"


def with_sequential(finding: Finding | None, decisions: pd.DataFrame | None) -> Finding | None:
    """The finding with each check's sequential p-value, where decisions.csv holds exactly its checks (the same
    labels: the same numbers; a check read on other numbers, or from another folder, keeps its fixed-n p)."""
    if finding is None or decisions is None or not sequential_applies(finding, decisions):
        return finding
    rows = decisions.set_index("check")
    sides = {"holds": True, "fails": False}
    checks = tuple(
        dataclasses.replace(
            c,
            p_sequential=float(rows.at[c.label, "p_seq"]),
            side_sequential=sides.get(str(rows.at[c.label, "side"])),
        )
        for c in finding.checks
    )
    return dataclasses.replace(finding, checks=checks)


def sequential_applies(finding: Finding, decisions: pd.DataFrame) -> bool:
    """Whether a folder's decisions are about this finding's checks (the same labels, so the same numbers)."""
    if not len(decisions) or set(decisions["check"]) != {k.label for k in finding.checks}:
        return False
    seeds = dict(zip(decisions["check"], decisions["n"], strict=True))  # runs left out since: other numbers
    return all(int(seeds[k.label]) == k.estimate.n for k in finding.checks)


def _evaluate_in(claim: Claim, table: pd.DataFrame, folder: str | None) -> Finding | None:
    """The claim on one folder's runs when it was decided there (all runs if that folder cannot answer it)."""
    if folder is not None and SOURCE in table:
        own = table[table[SOURCE] == folder]
        finding = read(claim, own) if len(own) else None
        if finding is not None:
            return finding
    return read(claim, table)


def read(claim: Claim, table: pd.DataFrame) -> Finding | None:
    """The claim's finding from the numbers its question needs (`Claim.reads`), the reading named.

    A claim about generalisation or fit reads the recalibrated numbers when every run its check chose
    recorded them: raw inference-mode accuracy after few optimizer steps is BatchNorm's lag, not the
    weights. The choice of runs depends on settings only, so both readings compare the same runs.
    """
    finding = claim.evaluate(table)
    if finding is None or claim.reads != GENERALISATION:
        words = {SYMPTOM: READ_SYMPTOM, TIME: READ_TIME}
        if finding is None or finding.reading:  # C6 names its own: quiet or in-run
            return finding
        return dataclasses.replace(finding, reading=words.get(claim.reads, READ_RAW))
    if _all_recalibrated(table, finding.run_ids):
        recal = claim.evaluate(readings.recalibrated(table))
        if recal is not None:
            return dataclasses.replace(relabelled(recal), reading=READ_RECAL)
    return dataclasses.replace(finding, reading=READ_RAW)


def _all_recalibrated(table: pd.DataFrame, run_ids: tuple[str, ...]) -> bool:
    name = column(vocab.VAL_ACC_RECAL, "last")
    if name not in table:
        return False
    chosen = table[table[vocab.RUN_ID].astype(str).isin(run_ids)]
    return len(chosen) > 0 and bool(chosen[name].notna().all())


# The names a check's label gives the numbers it read, and their recalibrated versions' names.
_RECAL_NAMES = {raw: recal for raw, recal in readings.RECALIBRATED.items()} | {vocab.GAP: vocab.EVAL_GAP_RECAL}
_NAME = re.compile(r"\b(" + "|".join(sorted(map(re.escape, _RECAL_NAMES), key=len, reverse=True)) + r")\b")


def relabelled(finding: Finding) -> Finding:
    """A finding read on `readings.recalibrated` numbers, its labels naming them (val_acc -> val_acc_recal)."""

    def name(label: str) -> str:
        return _NAME.sub(lambda m: _RECAL_NAMES[m.group(1)], label)

    checks = tuple(dataclasses.replace(c, label=name(c.label)) for c in finding.checks)
    evidence = tuple((name(label), e) for label, e in finding.evidence)
    return dataclasses.replace(finding, checks=checks, evidence=evidence)
