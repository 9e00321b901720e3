"""Crash detection: finding attempts whose worker is gone and queueing them again. No TensorFlow.

Database store: Optuna's heartbeats (any machine): a RUNNING trial whose heartbeat is stale (older than
`outage.grace_seconds`, so a worker that waited out a database outage is not taken for a dead one); and, at
once, a RUNNING trial whose worker ran on this machine (its boot id) and is gone, as on a journal.
Journal: a lease records the worker's host, pid namespace, pid and process start time; a RUNNING trial
whose process on this host is gone (a reused pid has another start time) is dead.
Either way the run is queued again, up to the retry policy's cap on deaths (then it is left failed).
"""

from __future__ import annotations

import datetime
import functools
import math
import os
import socket
from dataclasses import dataclass
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from sweep import vocab
from sweep.store import internals, queue
from sweep.vocab import RunStatus

# A worker writes its identity on a lease within milliseconds of claiming it; a RUNNING trial still
# without one after this long lost its worker while being claimed (journal stores; databases use heartbeats).
CLAIM_SECONDS = 60.0
WORKER_HOST, WORKER_PID, WORKER_STARTED = "worker_host", "worker_pid", "worker_started"
WORKER_PIDS = "worker_pid_namespace"  # containers may share a hostname but not their pids
WORKER_BOOT = "worker_boot"  # the machine's boot id: two machines may share a hostname, never this


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
        WORKER_PIDS: _pid_namespace(),
        WORKER_BOOT: _boot_id(),
        WORKER_HOST: socket.gethostname(),
    }


@dataclass(frozen=True)
class Dead:
    """A run whose worker died: queued again, or left failed once its worker died past the cap."""

    run_id: str
    deaths: int  # its worker's deaths so far, this one included
    failed: str | None = None  # the error it was left failed with; None: queued again


def requeue_dead(
    study: optuna.Study, database: bool, policy: queue.RetryPolicy, causes: dict[int, str] | None = None
) -> list[Dead]:
    """Queue again the RUNNING trials of `study` whose worker is gone, or leave them failed past the
    policy's cap (`RetryPolicy.again_after_death`). `causes`: what this process knows of a worker's end,
    by pid (its exit code, from the coordinator that started it).
    """
    causes = causes or {}
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    found: list[tuple[FrozenTrial, str | None]]
    if database:  # heartbeats; and at once, the runs of a worker of this machine that is gone
        stale = internals.stale_trials(study)
        found = [(t, _stale_reason()) for t in stale]
        seen = {t.number for t in stale}
        found += [
            (t, _why_dead(t))
            for t in running
            if t.number not in seen and (t.user_attrs.get(WORKER_PID) in causes or _this_machine(t.user_attrs))
        ]
        found += [(t, _CLAIM_LOST) for t in running if t.number not in seen and _claim_lost(t)]
    else:
        found = [(t, _why_dead(t)) for t in running]
    ended = [_end_dead(study, trial, reason, policy, causes) for trial, reason in found if reason]
    return [dead for dead in ended if dead is not None]


def _end_dead(
    study: optuna.Study, trial: FrozenTrial, reason: str, policy: queue.RetryPolicy, causes: dict[int, str]
) -> Dead | None:
    """Queue the next attempt of a dead worker's run, or end the run failed; None if another process
    ended the attempt first.
    """
    attrs = trial.user_attrs
    pid = attrs.get(WORKER_PID)
    reason = attrs.get(vocab.STALLED) or (f"{reason}: {causes[pid]}" if pid in causes else reason)
    deaths = int(attrs.get(vocab.WORKER_DEATHS, 0)) + 1
    live = internals.handle(study, trial)
    run_id = str(attrs.get(vocab.RUN_ID, "?"))
    if policy.again_after_death(deaths):
        queued = queue.requeue(study, live, reason, **{vocab.WORKER_DEATHS: deaths})
        return Dead(run_id, deaths) if queued else None
    error = f"worker died {deaths} time{'s' if deaths > 1 else ''} (last: {reason})"
    return Dead(run_id, deaths, error) if queue.end_attempt(study, live, RunStatus.FAILED, error) else None


def ended_by_death(study: optuna.Study, pid: int) -> bool:
    """Whether a run that the worker `pid` of this host held was ended by its death (by any process:
    another worker may have seen it first).
    """
    for trial in study.get_trials(deepcopy=False, states=(TrialState.FAIL,)):
        attrs = trial.user_attrs
        if attrs.get(WORKER_PID) != pid or not _ours(attrs):
            continue
        if queue.status_of(trial) is RunStatus.INTERRUPTED or str(attrs.get(vocab.ERROR, "")).startswith("worker died"):
            return True
    return False


def _ours(attrs: dict[str, Any]) -> bool:
    """Whether the worker of this identity ran on this host, in this pid namespace (if it recorded one)."""
    return (
        attrs.get(WORKER_HOST) == socket.gethostname() and attrs.get(WORKER_PIDS, _pid_namespace()) == _pid_namespace()
    )


def _stale_reason() -> str:
    from sweep.store import outage
    from sweep.store.storage import heartbeat_seconds

    grace = outage.grace_seconds(heartbeat_seconds())
    return f"its worker sent no heartbeat for {grace} s (dead, or cut off from the database)"


_CLAIM_LOST = "its claim was never completed (its worker died claiming it, or an outage lost the claim's answer)"


def _claim_lost(trial: FrozenTrial) -> bool:
    """A database's RUNNING trial that no worker said it holds for longer than the heartbeat grace: its claimer
    died before its identity, or a retried claim found it taken by its own lost first try (sweep/store/outage.py)
    and moved on. It may have no heartbeat, which Optuna never judges stale.
    """
    from sweep.store import outage
    from sweep.store.storage import heartbeat_seconds

    attrs = trial.user_attrs
    grace = outage.grace_seconds(heartbeat_seconds())
    return vocab.RUN_ID in attrs and WORKER_HOST not in attrs and _seconds_since(trial.datetime_start) > grace


def _this_machine(attrs: dict[str, Any]) -> bool:
    """Whether a worker that recorded these attributes ran on this machine (its boot id; a database's workers
    may run on machines of one hostname), so its pid can be checked here. Any container of it: `_ours`.
    """
    return WORKER_HOST in attrs and bool(attrs.get(WORKER_BOOT)) and attrs.get(WORKER_BOOT) == _boot_id()


def _why_dead(trial: FrozenTrial) -> str | None:
    """Why this RUNNING trial's worker is known dead, or None if it may be alive (or is not ours to judge:
    another host, or another pid namespace of this one, as containers sharing a hostname have).
    """
    attrs = trial.user_attrs
    if vocab.RUN_ID not in attrs:
        return None
    if WORKER_HOST not in attrs:  # being claimed right now, or its claimer died before saying who it is
        return "its worker died while claiming it" if _seconds_since(trial.datetime_start) > CLAIM_SECONDS else None
    if not _ours(attrs) or _alive(int(attrs.get(WORKER_PID, -1)), float(attrs.get(WORKER_STARTED, 0))):
        return None
    return f"worker pid {attrs.get(WORKER_PID)} on {attrs[WORKER_HOST]} died mid-run"


def may_come_back(study: optuna.Study, database: bool) -> bool:
    """Whether a RUNNING trial could still return to the queue if its worker dies.

    On a database any running trial can (heartbeats); on a journal, those of live
    workers on this machine can (dead ones were re-queued already).
    """
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    if database:
        return bool(running)
    return any(t.user_attrs.get(WORKER_HOST) == socket.gethostname() for t in running)


@functools.cache  # a process's pid namespace is fixed for its life
def _pid_namespace() -> str:
    """This process's pid namespace (Linux: "pid:[4026531836]"); "" where there is no such thing to read."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


@functools.cache  # fixed until the machine restarts
def _boot_id() -> str:
    """This machine's boot id (Linux: a UUID drawn at every boot); "" where there is no such thing to read."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as found:
            return found.read().strip()
    except OSError:
        return ""


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
