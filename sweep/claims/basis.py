"""The numbers each claim is read from: the basis of its verdict.

- `read`: a claim about generalisation or fit on recalibrated BatchNorm numbers where every chosen run
  recorded them (labels renamed: `relabelled`), the symptom as the post read it, time as measured;
- `tuned_lr`: the re-runs of a search's best lr as one group per results folder, for the batch-size advice;
- `with_sequential`: the sequential p-values of `run --until-decided`, where its looks read the same numbers.

`sweep.claims.registry.evaluate` puts them together into the report's one family of checks.
"""

from __future__ import annotations

import dataclasses
import re

import pandas as pd

from sweep import vocab
from sweep.analysis import BATCH_SIZE, SOURCE, column, readings
from sweep.analysis.decisions import check_of
from sweep.analysis.estimates import Check, Key
from sweep.analysis.outcome import Outcome
from sweep.claims.findings import Claim, Finding, ReadFrom, Reads


def tuned_lr(summary: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    """The tuned re-runs' summary with `train.lr` replaced by its description, so batch sizes that differ in
    their best lr form one group: "tuned per batch size over [0.0001, 0.03] (8: 0.0068, 64: 0.0021)", one
    description per results folder (one folder, one searched grid; an optimizer's search per folder).
    """
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
    labels: the same numbers; a check read on other numbers, or from another folder, keeps its fixed-n p).
    """
    if finding is None or decisions is None or not sequential_applies(finding, decisions):
        return finding
    name, named = check_of(decisions)
    rows = decisions.set_index(name)
    checks = tuple(
        dataclasses.replace(
            c,
            p_sequential=float(rows.at[named(c), "p_seq"]),
            side_sequential=Outcome.of(rows.at[named(c), "side"]),
        )
        for c in finding.checks
    )
    return dataclasses.replace(finding, checks=checks)


def sequential_applies(finding: Finding, decisions: pd.DataFrame) -> bool:
    """Whether a folder's decisions are about this finding's checks (the same keys, so the same numbers)."""
    name, named = check_of(decisions)
    if not len(decisions) or set(decisions[name]) != {named(k) for k in finding.checks}:
        return False
    seeds = dict(zip(decisions[name], decisions["n"], strict=True))  # runs left out since: other numbers
    return all(int(seeds[named(k)]) == k.estimate.n for k in finding.checks)


def in_folder(claim: Claim, table: pd.DataFrame, folder: str | None) -> Finding | None:
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
    if finding is None or claim.reads is not Reads.GENERALISATION:
        read = {Reads.SYMPTOM: ReadFrom.SYMPTOM, Reads.TIME: ReadFrom.TIME}
        if finding is None or finding.read_from is not None:  # C6 names its own: quiet or in-run
            return finding
        return dataclasses.replace(finding, read_from=read.get(claim.reads, ReadFrom.RAW))
    if _all_recalibrated(table, finding.run_ids):
        recal = claim.evaluate(readings.recalibrated(table))
        if recal is not None:
            return dataclasses.replace(relabelled(recal), read_from=ReadFrom.RECAL)
    return dataclasses.replace(finding, read_from=ReadFrom.RAW)


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

    def key(k: Key | None) -> Key | None:
        return None if k is None else k.renamed(_RECAL_NAMES)

    def renamed(checks: tuple[Check, ...]) -> tuple[Check, ...]:
        return tuple(dataclasses.replace(c, label=name(c.label), short=name(c.short), key=key(c.key)) for c in checks)

    evidence = tuple(e._replace(label=name(e.label), key=key(e.key)) for e in finding.evidence)
    return dataclasses.replace(
        finding,
        checks=renamed(finding.checks),
        size=renamed(finding.size),
        mechanism=renamed(finding.mechanism),
        evidence=evidence,
    )
