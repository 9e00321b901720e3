"""Tables of a sweep's trials: one row per run, one row per (run, record), counts, and the CSV
files (written atomically). Pure functions of the trials; no TensorFlow.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
from optuna.trial import FrozenTrial

from sweep import vocab
from sweep.base import atomic
from sweep.config.plan import RunSpec
from sweep.store.queue import INFO, epochs_of, latest_by_run, spec_of, status_of
from sweep.store.search import LR_PARAM
from sweep.vocab import RunStatus

WORKER_FACTS = ("worker_host", "worker_pid", "visible_devices", "worker_rss_mb")
# Facts recorded only when they happen: a column once any run has one, empty for the others.
RUN_FACTS = (vocab.STOPPED_EARLY, vocab.RESUMED_FROM_EPOCH)


def runs_table(trials: Iterable[FrozenTrial], searches: Mapping[str, dict[str, Any]] | None = None) -> pd.DataFrame:
    """One row per run: spec columns, status, timings, run facts, final metrics; and on the runs of a search
    in `searches` (group id -> its settings), what it chose on and its lr range, for the report.
    """
    trials = list(trials)
    counts = threads_by_run(trials)
    differ = any(len(set(c)) > 1 for c in counts.values())  # then a column says each run's, like a run fact
    rows = [
        {**_run_row(t), **_search_of(t, searches or {}), **(_threads_by_attempt(t, counts) if differ else {})}
        for t in latest_by_run(trials).values()
    ]
    return pd.DataFrame(rows).sort_values(vocab.RUN_ID).reset_index(drop=True) if rows else pd.DataFrame()


def threads_by_run(trials: Iterable[FrozenTrial]) -> dict[str, list[int]]:
    """run id -> the thread count of each of its attempts that began training, in attempt order. A run's numbers
    depend on its thread count in the last bits, so a run resumed at another count is not the run it began as.
    """
    counts: dict[str, list[tuple[int, int]]] = {}
    for trial in trials:
        info = trial.user_attrs.get(INFO)
        run_id = trial.user_attrs.get(vocab.RUN_ID)
        if run_id is not None and isinstance(info, dict) and info.get(vocab.THREADS):
            attempt = int(trial.user_attrs.get(vocab.ATTEMPT, 1))
            counts.setdefault(str(run_id), []).append((attempt, int(info[vocab.THREADS])))
    return {run_id: [threads for _, threads in sorted(pairs)] for run_id, pairs in counts.items()}


def _threads_by_attempt(trial: FrozenTrial, counts: Mapping[str, list[int]]) -> dict[str, str]:
    return {vocab.THREADS_BY_ATTEMPT: ",".join(map(str, counts.get(str(trial.user_attrs.get(vocab.RUN_ID)), [])))}


def _run_row(trial: FrozenTrial) -> dict[str, Any]:
    spec = spec_of(trial)
    epochs = epochs_of(trial)
    final = {f"final_{k}": v for k, v in (epochs[-1] if epochs else {}).items() if k != vocab.EPOCH}
    started, finished = trial.datetime_start, trial.datetime_complete
    return {
        vocab.RUN_ID: _shown_id(trial, spec),
        "sweep": spec.sweep,
        vocab.STATUS: status_of(trial).value,
        vocab.ATTEMPT: trial.user_attrs.get(vocab.ATTEMPT, 1),
        **_role(trial),
        **spec.flat(),
        **trial.user_attrs.get(INFO, {}),
        "epochs_done": len(epochs),
        "started": started.isoformat() if started else None,
        "finished": finished.isoformat() if finished else None,
        "duration_seconds": (finished - started).total_seconds() if started and finished else None,
        **final,
        vocab.ERROR: trial.user_attrs.get(vocab.ERROR),
        "trial_number": trial.number,
        **{k: trial.user_attrs.get(k) for k in WORKER_FACTS},
        **{k: trial.user_attrs[k] for k in RUN_FACTS if k in trial.user_attrs},
    }


def _search_of(trial: FrozenTrial, searches: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    settings = searches.get(trial.user_attrs.get(vocab.SEARCH_GROUP) or "")
    if settings is None:
        return {}
    return {
        vocab.SEARCH_METRIC: settings["metric"],
        vocab.SEARCH_LR_LOW: settings["lr_low"],
        vocab.SEARCH_LR_HIGH: settings["lr_high"],
    }


def _shown_id(trial: FrozenTrial, spec: RunSpec) -> str:
    """The run's id; a search slot whose lr is not drawn yet shows its slot id (its spec is only a template)."""
    if trial.user_attrs.get(vocab.ROLE) == vocab.SEARCH and LR_PARAM not in trial.params:
        return str(trial.user_attrs[vocab.RUN_ID])
    return spec.run_id


def _role(trial: FrozenTrial) -> dict[str, Any]:
    """role (grid | search | tuned) and the learning-rate search it belongs to, if any."""
    return {
        vocab.ROLE: trial.user_attrs.get(vocab.ROLE, vocab.GRID),
        vocab.SEARCH_GROUP: trial.user_attrs.get(vocab.SEARCH_GROUP),
    }


def epochs_table(trials: Iterable[FrozenTrial]) -> pd.DataFrame:
    """One row per (run, record), every spec column repeated (tidy)."""
    rows: list[dict[str, Any]] = []
    for trial in latest_by_run(trials).values():
        spec = spec_of(trial)
        status = status_of(trial).value
        head = {vocab.RUN_ID: _shown_id(trial, spec), vocab.STATUS: status, **_role(trial), **spec.flat()}
        rows.extend(
            {
                **head,
                **{k: record.get(k) for k in vocab.EPOCH_METRICS},
                **{k: record[k] for k in vocab.OPTIONAL_METRICS if k in record},
            }
            for record in epochs_of(trial)
        )
    if not rows:
        return pd.DataFrame(columns=[vocab.RUN_ID, vocab.STATUS, *vocab.EPOCH_METRICS])
    return pd.DataFrame(rows).sort_values([vocab.RUN_ID, vocab.EPOCH]).reset_index(drop=True)


def export_csv(
    trials: list[FrozenTrial], folder: Path, searches: Mapping[str, dict[str, Any]] | None = None
) -> tuple[Path, Path]:
    """Write runs.csv and epochs.csv atomically; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / vocab.RUNS_CSV, folder / vocab.EPOCHS_CSV
    atomic.write_csvs([(runs_table(trials, searches), paths[0]), (epochs_table(trials), paths[1])])
    return paths


def counts(trials: Iterable[FrozenTrial], run_ids: Iterable[str] | None = None) -> dict[RunStatus, int]:
    """Runs per status; with run_ids, only those runs, and unplanned ones count as pending."""
    current = latest_by_run(trials)
    ids = list(run_ids) if run_ids is not None else list(current)
    result = dict.fromkeys(vocab.STATUSES, 0)
    for run_id in ids:
        status = status_of(current[run_id]) if run_id in current else RunStatus.PENDING
        status = RunStatus.PENDING if status is RunStatus.INTERRUPTED else status
        result[status] = result.get(status, 0) + 1
    return result
