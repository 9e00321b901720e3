"""Crash detection: finding attempts whose worker is gone and queueing them again. No TensorFlow.

Database store: Optuna's heartbeats (any machine; `optuna.storages.fail_stale_trials`).
Journal: a claim records the worker's host, pid and process start time; a RUNNING trial whose
process on this host is gone (a reused pid has another start time) is re-queued.
"""

from __future__ import annotations

import datetime
import math
import os
import socket
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from sweep import vocab
from sweep.store import internals, queue

# A claim writes the worker's identity within milliseconds; a RUNNING trial still without
# one after this long lost its worker mid-claim (journal stores; databases use heartbeats).
CLAIM_SECONDS = 60.0
WORKER_HOST, WORKER_PID, WORKER_STARTED = "worker_host", "worker_pid", "worker_started"


def worker_identity() -> dict[str, Any]:
    """host + pid + process start time: enough to tell later whether this worker is dead.

    Written one attribute at a time, host last: `requeue_dead` judges only trials whose
    host is written, so it never sees a half-written identity (a pid of -1) as a dead worker.
    """
    import psutil

    return {
        WORKER_PID: os.getpid(),
        WORKER_STARTED: psutil.Process().create_time(),
        "visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        WORKER_HOST: socket.gethostname(),
    }


def requeue_stale(study: optuna.Study, trial: FrozenTrial) -> None:
    """Optuna's callback for a trial it has failed for a missing heartbeat (database stores):
    queue the next attempt. The failed one reads as interrupted (`queue.status_of`)."""
    queue.enqueue_next(study, trial.user_attrs)


def requeue_dead(study: optuna.Study, database: bool) -> list[str]:
    """Re-enqueue RUNNING trials of `study` whose worker is gone. Returns their run ids."""
    if database:
        before = {t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))}
        optuna.storages.fail_stale_trials(study)
        after = study.get_trials(deepcopy=False)
        return [after[n].user_attrs.get(vocab.RUN_ID, "?") for n in sorted(before) if after[n].state == TrialState.FAIL]
    revived = []
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        reason = _why_dead(trial)
        if reason and queue.requeue(study, internals.handle(study, trial), reason):
            revived.append(trial.user_attrs[vocab.RUN_ID])
    return revived


def _why_dead(trial: FrozenTrial) -> str | None:
    """Why this RUNNING trial's worker is known dead, or None if it may be alive (or is not ours to judge)."""
    attrs = trial.user_attrs
    if vocab.RUN_ID not in attrs:
        return None
    if WORKER_HOST not in attrs:  # being claimed right now, or its claimer died before saying who it is
        return "its worker died while claiming it" if _seconds_since(trial.datetime_start) > CLAIM_SECONDS else None
    host = socket.gethostname()
    if attrs[WORKER_HOST] != host or _alive(int(attrs.get(WORKER_PID, -1)), float(attrs.get(WORKER_STARTED, 0))):
        return None
    return f"worker pid {attrs.get(WORKER_PID)} on {host} died mid-run"


def may_come_back(study: optuna.Study, database: bool) -> bool:
    """Whether a RUNNING trial could still return to the queue if its worker dies.

    On a database any running trial can (heartbeats); on a journal, those of live
    workers on this machine can (dead ones were re-queued already).
    """
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if database:
        return bool(running)
    return any(t.user_attrs.get(WORKER_HOST) == socket.gethostname() for t in running)


def _seconds_since(moment: datetime.datetime | None) -> float:
    return (datetime.datetime.now() - moment).total_seconds() if moment else math.inf


def _alive(pid: int, started: float) -> bool:
    import psutil

    try:
        process = psutil.Process(pid)
        same = abs(process.create_time() - started) < 1.0  # a reused pid has another start time
        return same and process.status() != psutil.STATUS_ZOMBIE  # killed, not yet reaped
    except (psutil.NoSuchProcess, ValueError):
        return False
