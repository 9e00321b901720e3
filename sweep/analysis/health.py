"""Which runs answer the claims: runs with a problem (diverged, did not train, stuck, one-class
validation), the records left once they are out, and the run summary every claim reads.

Reads what `sweep.analysis.load` returns; pandas only. docs/report.md ("Runs with problems")
explains each problem to readers.
"""

from __future__ import annotations

import pandas as pd

from sweep import vocab
from sweep.analysis import (
    PACK_SIZE,
    Results,
    run_summary,
    timing_copies,
    with_run_column,
    with_timing_copies,
)
from sweep.vocab import RunStatus

STUCK_MIN_RECORDS = 3  # fewer records cannot tell a stuck model from a slow one


IN_CLAIMS = "in_claims"  # run_health's column: does the run answer the claims?


def run_health(results: Results) -> pd.DataFrame:
    """Runs with a problem, and whether they still answer the claims: run_id, status, problem, in_claims.

    A run is left out of the claims for what it learned only when it learned nothing: a model at
    chance on its training set cannot show a gap, a cause or a generalisation effect. A one-class
    predictor of an imbalanced set (C2) learned the prior and stays in.

    - diverged: the loss became NaN or infinite; it has no finished epochs, so no final
      numbers to read (never in `epochs`); listed and counted, not in the claims;
    - did not train: a done run whose every accuracy at its last record is at most `untrained_limit`
      (twice chance with many classes; `_did_not_train`); counted and named, in no interval and no decision;
    - stuck: a done run whose val_acc and train_eval_acc never changed over 3 or more
      records while val_acc sits at 1 / classes, i.e. the model predicts one class; it stays
      in the claims, and the report says whether any verdict changes without such runs;
    - a validation set of one class (from results of other tools; our loaders refuse it):
      a property of the data, not of training, where accuracy cannot compare settings; left out.
    """
    problems = []
    runs = results.runs
    if vocab.STATUS in runs:
        for _, run in runs[runs[vocab.STATUS] == RunStatus.DIVERGED].iterrows():
            reason = run.get(vocab.ERROR) or "loss became NaN or infinite"
            problems.append((run[vocab.RUN_ID], RunStatus.DIVERGED.value, f"diverged: {reason}", False))
    if "num_classes" in runs:
        for _, run in runs[(runs[vocab.STATUS] == RunStatus.DONE) & (runs["num_classes"] < 2)].iterrows():
            problems.append(
                (
                    run[vocab.RUN_ID],
                    RunStatus.DONE.value,
                    "validation holds a single class: accuracy cannot compare settings",
                    False,
                )
            )
    epochs = results.epochs
    if not epochs.empty:
        for run_id, rows in epochs.groupby(vocab.RUN_ID, sort=True):
            untrained = _did_not_train(rows, runs)
            if untrained:
                problems.append((run_id, RunStatus.DONE.value, untrained, False))
            elif _stuck(rows, runs):
                problems.append(
                    (
                        run_id,
                        RunStatus.DONE.value,
                        f"stuck: val_acc {rows[vocab.VAL_ACC].iloc[0]:.3f} and "
                        f"train_eval_acc unchanged over {len(rows)} records (the model predicts one class)",
                        True,
                    )
                )
    columns = [vocab.RUN_ID, vocab.STATUS, "problem", IN_CLAIMS]
    return pd.DataFrame(problems, columns=columns).drop_duplicates(vocab.RUN_ID)


DID_NOT_TRAIN = "did not train"


def untrained_limit(classes: int) -> float:
    """The accuracy at or below which a run learned nothing: chance plus the smaller of chance and a quarter
    of what lies above it. Twice chance with many classes (0.017 for 120, 0.2 for 10); for two classes
    twice chance would be 1.0, so the limit stays 0.625 there.
    """
    chance = 1.0 / classes
    return chance + min(chance, (1.0 - chance) / 4)


def _did_not_train(rows: pd.DataFrame, runs: pd.DataFrame) -> str:
    """Why a done run learned nothing, or "": at its last record every training accuracy (running,
    inference mode, recalibrated where measured) and every validation accuracy is at most `untrained_limit`.

    Such a run says nothing about what a setting does to generalisation: an interval over it is a
    failure to train (often of width 0: every seed at chance), so it enters no check. A model that
    predicts its training set's majority class (C2's imbalance) learned that prior and is not one.
    """
    classes = _classes(rows, runs)
    if classes is None:
        return ""
    last = rows.loc[rows[vocab.EPOCH].idxmax()]
    names = [vocab.TRAIN_ACC, vocab.TRAIN_EVAL_ACC, vocab.TRAIN_EVAL_ACC_RECAL, vocab.VAL_ACC, vocab.VAL_ACC_RECAL]
    read = {n: float(last[n]) for n in names if n in last.index and pd.notna(last[n])}
    limit = untrained_limit(classes)
    if not read or max(read.values()) > limit:
        return ""
    shown = ", ".join(f"{n} {v:.3f}" for n, v in read.items())
    chance = f"chance {1 / classes:.3f}, {classes} classes"
    return f"{DID_NOT_TRAIN}: at its last record {shown}, none above {limit:.3f} ({chance})"


def _classes(rows: pd.DataFrame, runs: pd.DataFrame) -> int | None:
    if "num_classes" not in runs:
        return None
    found = runs.loc[runs[vocab.RUN_ID] == rows[vocab.RUN_ID].iloc[0], "num_classes"].dropna()
    return int(found.iloc[0]) if len(found) and found.iloc[0] >= 2 else None


def _stuck(rows: pd.DataFrame, runs: pd.DataFrame) -> bool:
    if len(rows) < STUCK_MIN_RECORDS or rows[vocab.VAL_ACC].nunique() > 1 or rows[vocab.TRAIN_EVAL_ACC].nunique() > 1:
        return False
    if "num_classes" not in runs:
        return True
    classes = runs.loc[runs[vocab.RUN_ID] == rows[vocab.RUN_ID].iloc[0], "num_classes"]
    return classes.empty or abs(rows[vocab.VAL_ACC].iloc[0] - 1.0 / float(classes.iloc[0])) < 1e-6


def without(epochs: pd.DataFrame, health: pd.DataFrame, everything: bool = False) -> pd.DataFrame:
    """`epochs` without the runs `run_health` leaves out of the claims (`everything`: without every run it lists,
    stuck ones too, for the report's sensitivity line).
    """
    if epochs.empty or not len(health):
        return epochs
    dropped = health if everything else health[~health[IN_CLAIMS].astype(bool)]
    return epochs[~epochs[vocab.RUN_ID].isin(dropped[vocab.RUN_ID])]


def did_not_train(health: pd.DataFrame) -> pd.Series:
    """Which rows of `run_health`'s table are runs that did not train."""
    return health["problem"].astype(str).str.startswith(DID_NOT_TRAIN)


def trained(epochs: pd.DataFrame, health: pd.DataFrame) -> pd.DataFrame:
    """The records of every run but those `run_health` found did not train."""
    return epochs.drop(index=untrained(epochs, health).index)


def untrained(epochs: pd.DataFrame, health: pd.DataFrame) -> pd.DataFrame:
    """The records of the runs `run_health` found did not train."""
    if epochs.empty or not len(health):
        return epochs.iloc[0:0]
    ids = health.loc[did_not_train(health), vocab.RUN_ID]
    return epochs[epochs[vocab.RUN_ID].isin(ids)]


def claims_summary(results: Results, health: pd.DataFrame | None = None) -> pd.DataFrame:
    """The run summary every claim reads: done grid runs less those `run_health` leaves out of the claims,
    with the other folders' timings of runs stored twice (`with_timing_copies`). `health`: if already computed.
    """
    health = run_health(results) if health is None else health
    summary = run_summary(without(results.epochs, health))
    # a packed run's epoch times are its share of its pack's: C6 says so (runs.csv's pack_size); a map reads its
    # own grids' runs together by their sweep's name
    timed = with_run_column(with_timing_copies(summary, timing_copies(results)), results.runs, PACK_SIZE)
    return with_run_column(timed, results.runs, vocab.SWEEP)
