"""Which runs answer the claims: runs with a problem (diverged, failed, one-class validation, at chance, stuck),
the records left once the runs with nothing to read are out, and the run summary every claim reads.

Reads what `sweep.analysis.load` returns; pandas only. docs/report.md ("Runs with problems") explains each
problem to readers.
"""

from __future__ import annotations

from enum import Enum

import pandas as pd

from sweep import vocab
from sweep.analysis import (
    PACK_SIZE,
    Results,
    run_summary,
    timing_copies,
    varying,
    with_run_column,
    with_timing_copies,
)
from sweep.analysis.chance import RUN_COUNTS, chance_limit
from sweep.vocab import RunStatus

STUCK_MIN_RECORDS = 3  # fewer records cannot tell a stuck model from a slow one


IN_CLAIMS = "in_claims"  # run_health's column: does the run answer the claims?
KIND = "kind"  # run_health's column: the problem's `Problem` value


class Problem(Enum):
    """A run's problem; only the first three leave it out of the claims: they have nothing to read."""

    DIVERGED = "diverged"  # the loss became NaN or infinite: no finished epochs
    FAILED = "failed"  # it crashed: no finished run
    ONE_CLASS = "one-class validation"  # accuracy on one class cannot compare settings
    AT_CHANCE = "at chance"  # learned nothing: a result about its setting, in every number
    STUCK = "stuck"  # predicts one class from record to record: in every number, with a sensitivity line

    @property
    def read(self) -> bool:
        """Whether the run's numbers enter the claims."""
        return self in (Problem.AT_CHANCE, Problem.STUCK)


def run_health(results: Results) -> pd.DataFrame:
    """Runs with a problem, and whether they answer the claims: run_id, status, problem, kind, in_claims.

    Only a run with nothing to read is left out of the claims. A run at chance learned nothing, and that is
    what its setting did: it stays in every number, and whether a comparison can answer is decided from its
    arms over seeds (`sweep.analysis.chance`).

    - diverged: the loss became NaN or infinite; it has no finished epochs (never in `epochs`); left out;
    - failed: the run crashed and was not trained again; no finished epochs; left out;
    - a validation set of one class (from results of other tools; our loaders refuse it): a property of the
      data, not of training, where accuracy cannot compare settings; left out;
    - at chance: a done run whose every accuracy at its last record is at most `chance_limit` (twice chance
      with many classes); a note, in the claims;
    - stuck: a done run whose val_acc and train_eval_acc (recalibrated where recorded) never changed over 3 or
      more records while val_acc sits at 1 / classes, i.e. the model predicts one class; in the claims, and
      the report says whether any verdict changes without such runs.
    """
    problems = []
    runs = results.runs
    if vocab.STATUS in runs:
        for _, run in runs[runs[vocab.STATUS].isin((RunStatus.DIVERGED, RunStatus.FAILED))].iterrows():
            kind = Problem.DIVERGED if run[vocab.STATUS] == RunStatus.DIVERGED else Problem.FAILED
            reason = run.get(vocab.ERROR) if pd.notna(run.get(vocab.ERROR)) else ""
            reason = reason or ("loss became NaN or infinite" if kind is Problem.DIVERGED else "no error recorded")
            problems.append((run[vocab.RUN_ID], str(run[vocab.STATUS]), f"{kind.value}: {reason}", kind))
    if "num_classes" in runs:
        for _, run in runs[(runs[vocab.STATUS] == RunStatus.DONE) & (runs["num_classes"] < 2)].iterrows():
            why = "validation holds a single class: accuracy cannot compare settings"
            problems.append((run[vocab.RUN_ID], RunStatus.DONE.value, why, Problem.ONE_CLASS))
    epochs = results.epochs
    if not epochs.empty:
        for run_id, rows in epochs.groupby(vocab.RUN_ID, sort=True):
            at_chance = _at_chance(rows, runs)
            if at_chance:
                problems.append((run_id, RunStatus.DONE.value, at_chance, Problem.AT_CHANCE))
            elif _stuck(rows, runs):
                val, train = _read(rows)
                problems.append(
                    (
                        run_id,
                        RunStatus.DONE.value,
                        f"stuck: {val} {rows[val].iloc[0]:.3f} and {train} unchanged over {len(rows)} records "
                        "(the model predicts one class)",
                        Problem.STUCK,
                    )
                )
    table = pd.DataFrame(problems, columns=[vocab.RUN_ID, vocab.STATUS, "problem", KIND])
    table[IN_CLAIMS] = [kind.read for kind in table[KIND]]
    return table.drop_duplicates(vocab.RUN_ID).reset_index(drop=True)


def _at_chance(rows: pd.DataFrame, runs: pd.DataFrame) -> str:
    """Why a done run learned nothing, or "": at its last record every training accuracy (running,
    inference mode, recalibrated where measured) and every validation accuracy is at most `chance_limit`.

    A note for readers, not a reason to leave the run out: where a whole arm sits at chance, the claims say
    so with a test over its seeds (`sweep.analysis.chance`). A model that predicts its training set's
    majority class (C2's imbalance) learned that prior and is not one.
    """
    classes = _classes(rows, runs)
    if classes is None:
        return ""
    last = rows.loc[rows[vocab.EPOCH].idxmax()]
    names = [vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.TRAIN_EVAL_ACC_RECAL, vocab.VAL_ACC, vocab.VAL_ACC_RECAL]
    read = {n: float(last[n]) for n in names if n in last.index and pd.notna(last[n])}
    limit = chance_limit(classes)
    if not read or max(read.values()) > limit:
        return ""
    shown = ", ".join(f"{n} {v:.3f}" for n, v in read.items())
    chance = f"chance {1 / classes:.3f}, {classes} classes"
    return f"{Problem.AT_CHANCE.value}: at its last record {shown}, none above {limit:.3f} ({chance})"


def _classes(rows: pd.DataFrame, runs: pd.DataFrame) -> int | None:
    if "num_classes" not in runs:
        return None
    found = runs.loc[runs[vocab.RUN_ID] == rows[vocab.RUN_ID].iloc[0], "num_classes"].dropna()
    return int(found.iloc[0]) if len(found) and found.iloc[0] >= 2 else None


def _read(rows: pd.DataFrame) -> tuple[str, str]:
    """The validation and training accuracies the stuck test reads: recalibrated where every record has them
    (raw inference-mode numbers after few steps are BatchNorm's lag), else raw.
    """
    recal = (vocab.VAL_ACC_RECAL, vocab.TRAIN_EVAL_ACC_RECAL)
    if all(n in rows and rows[n].notna().all() for n in recal):
        return recal
    return vocab.VAL_ACC, vocab.TRAIN_EVAL_ACC


def _stuck(rows: pd.DataFrame, runs: pd.DataFrame) -> bool:
    val, train = _read(rows)
    if len(rows) < STUCK_MIN_RECORDS or rows[val].nunique() > 1 or rows[train].nunique() > 1:
        return False
    if "num_classes" not in runs:
        return True
    classes = runs.loc[runs[vocab.RUN_ID] == rows[vocab.RUN_ID].iloc[0], "num_classes"]
    return classes.empty or abs(rows[val].iloc[0] - 1.0 / float(classes.iloc[0])) < 1e-6


def without(epochs: pd.DataFrame, health: pd.DataFrame) -> pd.DataFrame:
    """`epochs` without the runs `run_health` leaves out of the claims (`in_claims` False)."""
    if epochs.empty or not len(health):
        return epochs
    dropped = health[~health[IN_CLAIMS].astype(bool)]
    return epochs[~epochs[vocab.RUN_ID].isin(dropped[vocab.RUN_ID])]


def of_kind(health: pd.DataFrame, kind: Problem) -> pd.DataFrame:
    """The rows of `run_health`'s table with this problem."""
    return health[health[KIND] == kind] if len(health) else health


def leaving_out(health: pd.DataFrame, kind: Problem) -> pd.DataFrame:
    """`run_health`'s table with the runs of `kind` left out of the claims too (the stuck-run sensitivity)."""
    if not len(health):
        return health
    return health.assign(**{IN_CLAIMS: health[IN_CLAIMS].astype(bool) & (health[KIND] != kind)})


def left_out_by_setting(health: pd.DataFrame, runs: pd.DataFrame) -> list[tuple[str, int]]:
    """The runs left out of the claims counted per setting (per arm): ("batch_size=64, shuffle=False", 2),
    named by the settings that vary between the results' runs.
    """
    dropped = health[~health[IN_CLAIMS].astype(bool)] if len(health) else health
    if dropped.empty or vocab.RUN_ID not in runs:
        return []
    keys = varying(runs)
    chosen = runs[runs[vocab.RUN_ID].isin(dropped[vocab.RUN_ID])].drop_duplicates(vocab.RUN_ID)
    names = chosen.apply(lambda r: ", ".join(f"{k.rsplit('.', 1)[-1]}={r[k]}" for k in keys) or "every run", axis=1)
    return sorted(names.value_counts().items()) if len(names) else []


def claims_summary(results: Results, health: pd.DataFrame | None = None) -> pd.DataFrame:
    """The run summary every claim reads: done grid runs less those `run_health` leaves out of the claims,
    with the other folders' timings of runs stored twice (`with_timing_copies`) and runs.csv's counts of
    classes and images (`chance.RUN_COUNTS`: an arm's test against chance). `health`: if already computed.
    """
    health = run_health(results) if health is None else health
    summary = run_summary(without(results.epochs, health))
    return with_counts(with_timing_copies(summary, timing_copies(results)), results)


def with_counts(summary: pd.DataFrame, results: Results) -> pd.DataFrame:
    """`summary` with runs.csv's pack size (a packed run's epoch times are its share of its pack's: C6 says so),
    its counts of classes and images (`chance.RUN_COUNTS`) and its sweep's name (a map reads its own grids' runs
    together by it), where runs.csv has them.
    """
    for name in (PACK_SIZE, *RUN_COUNTS, vocab.SWEEP):
        summary = with_run_column(summary, results.runs, name)
    return summary
