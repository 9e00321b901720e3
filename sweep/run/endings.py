"""How a claimed run ends, alone or as one tower of a pack: its status, error and last record stored,
its model kept or dropped, its checkpoint dropped, and the event said (sweep/run/driver.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import optuna

from sweep import vocab
from sweep.run import events, resume
from sweep.store import Lease, Store
from sweep.vocab import RunStatus

RSS_FACT = "worker_rss_mb"


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def taken_back(run_id: str, emit: events.Emit) -> tuple[RunStatus, bool]:
    """The store ended this attempt while it trained (its worker was presumed dead) and queued
    the next one: drop this attempt's work quietly; the queued attempt trains the run.
    """
    emit(events.RunInterrupted(run_id, "the store presumed this worker dead and queued the run again"))
    return RunStatus.INTERRUPTED, False


def should_prune(lease: Lease, epoch: float, epochs: int) -> bool:
    """A search trial whose curve is below the pruner's median, at a whole epoch before its last:
    pruning at the last epoch would save nothing and hide a finished trial from the sampler.
    """
    return lease.search is not None and float(epoch).is_integer() and epoch < epochs and lease.trial.should_prune()


def pruned_error(lease: Lease, epoch: float) -> str:
    return f"pruned after epoch {epoch}: {lease.metric} below the search's median"


@dataclass(frozen=True)
class Ending:
    """How a run ended: its status, error text, epochs it was to train and its last record."""

    status: RunStatus
    error: str | None
    epochs: int
    last: dict[str, Any] | None


def end_run(
    store: Store, lease: Lease, emit: events.Emit, places: resume.Places, ending: Ending, model: Any
) -> RunStatus:
    """Store how the run ended, keep or drop its model and checkpoint, say so; returns its status."""
    status = ending.status
    last = ending.last
    error = ending.error
    value = last[lease.metric] if last and status is RunStatus.DONE else None
    try:
        resume.keep_model(places, lease.spec.run_id, status, model)  # before the run ends
        store.record_fact(lease, RSS_FACT, round(rss_mb(), 1))  # memory growth across runs, measured
        store.finish(lease, status, value=value, error=error)
    except optuna.exceptions.UpdateFinishedTrialError:
        return taken_back(lease.spec.run_id, emit)[0]
    resume.drop_checkpoint(places, lease.spec.run_id, status)
    emit(
        events.RunEnded(
            lease.spec.run_id,
            status,
            max(0, ending.epochs - math.ceil(last[vocab.EPOCH] if last else 0)),
            error.strip().splitlines()[-1] if error else None,
        )
    )
    return status
