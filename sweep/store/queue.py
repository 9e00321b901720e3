"""The queue: statuses, enqueueing attempts, atomic leases, per-epoch records, ending an attempt,
and the retry policy. No TensorFlow.

One trial per attempt at a run:

- a run is enqueued as a WAITING trial with params ``{run_id, attempt}`` (what
  ``enqueue_trial(skip_if_exists=True)`` compares) and its spec in the user attributes. They
  are not suggested as Optuna params: Optuna forbids a categorical parameter whose choices
  differ between trials; ``trials_dataframe()`` shows them as ``user_attrs_run_id``. The
  run's varying settings are (`params`, when the run is leased);
- a worker takes the next WAITING trial as its `Lease` (`claim_next`) with the atomic WAITING -> RUNNING
  step that ``study.ask()`` uses (`internals.take`; ``ask()`` itself would create an unplanned trial);
- every evaluation record becomes a user attribute ``epoch_000E`` and ``trial.report``;
- the trial ends COMPLETE (value: the final metric), PRUNED, or FAIL with user attribute
  ``status`` = failed (with ``error``), diverged, interrupted or duplicate (`vocab.RunStatus`).

A run a worker holds is a lease (`Lease`), wherever a name or a text says so; a worker claims one, as
the verb goes (`claim_next`). A claim, the noun, is one of the post's claims that the report tests.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import optuna
from optuna.trial import FrozenTrial, TrialState

from sweep import vocab
from sweep.config.plan import RunSpec
from sweep.store import internals
from sweep.vocab import RunStatus

EPOCH_PREFIX = "epoch_"
SPEC = "spec"
INFO = "info"  # the run's facts (parameters, devices, threads, ...) recorded when it starts
ERROR_TAIL = 4000  # characters of a traceback kept: its end, where the exception is
# What another attempt of a run inherits from the one before.
INHERITED = (vocab.ROLE, vocab.SEARCH_GROUP, vocab.WORKER_DEATHS)


@dataclass(frozen=True)
class RetryPolicy:
    """When a run is tried again; the one place that decides it.

    Within one command, a run that raised is queued again at once while its attempt number
    is at most `retries` (a run that failed on its data fails the same way again, so never).
    A run left failed, or interrupted, gets a new attempt from the next `run` (`enqueue`);
    done, diverged and pruned runs never do (`RunStatus.final`).

    A run whose worker died (kill -9, out of memory, a lost node, the progress watchdog) is queued
    again at most `max_requeues` times; the next death leaves it failed, so a run that kills every
    worker that takes it cannot stop the sweep. A stop asked for (Ctrl-C, SIGTERM) is no death.
    """

    retries: int = 1
    max_requeues: int = 3

    def again_after_death(self, deaths: int) -> bool:
        """Whether a run whose worker has died `deaths` times (the latest included) is queued again."""
        return deaths <= self.max_requeues

    def again_now(self, attempt: int, retryable: bool) -> bool:
        return retryable and attempt <= self.retries

    @staticmethod
    def again_later(status: RunStatus) -> bool:
        """Whether the next `run` gives the run another attempt: its attempt ended, and not for good."""
        return status.ended and not status.final


DEFAULT_POLICY = RetryPolicy()


class SearchOfTrial(Protocol):
    """What a lease needs of the learning-rate search its trial belongs to (`search.Search`; named by
    its shape here, so this module does not import the one that builds on it).
    """

    @property
    def settings(self) -> dict[str, Any]: ...

    def start(self, lease: Lease) -> Lease: ...


@dataclass(frozen=True)
class Lease:
    """A leased run, what `claim_next` hands a worker: its live trial, its spec, the queue it came from (a post's
    claim is another thing: `sweep.claims.findings.Claim`).
    """

    trial: optuna.Trial
    spec: RunSpec
    study: optuna.Study
    search: SearchOfTrial | None = None  # set for a learning-rate search's trial slot

    @property
    def metric(self) -> str:
        return self.search.settings["metric"] if self.search else vocab.VAL_ACC

    @property
    def attempt(self) -> int:
        return int(self.trial.user_attrs.get(vocab.ATTEMPT, 1))


# --- statuses


def status_of(trial: FrozenTrial) -> RunStatus:
    if trial.state == TrialState.COMPLETE:
        return RunStatus.DONE
    if trial.state == TrialState.RUNNING:
        return RunStatus.RUNNING
    if trial.state == TrialState.WAITING:
        return RunStatus.PENDING
    if trial.state == TrialState.PRUNED:
        return RunStatus.PRUNED
    # Every FAIL this harness writes says why first; one without a status was failed by Optuna
    # itself for a stale heartbeat (a database refuses attributes on a finished trial).
    return RunStatus(trial.user_attrs.get(vocab.STATUS, RunStatus.INTERRUPTED))


def latest_by_run(trials: Iterable[FrozenTrial]) -> dict[str, FrozenTrial]:
    """run_id -> the trial that speaks for it: the best status, then the latest attempt."""
    best: dict[str, FrozenTrial] = {}
    for trial in trials:
        run_id = trial.user_attrs.get(vocab.RUN_ID)
        if run_id is not None and (run_id not in best or _rank(trial) < _rank(best[run_id])):
            best[run_id] = trial
    return best


def _rank(trial: FrozenTrial) -> tuple[int, int]:
    return status_of(trial).rank, -trial.number


def spec_of(trial: FrozenTrial) -> RunSpec:
    return RunSpec.from_json(trial.user_attrs[SPEC])


# --- enqueueing


def enqueue_items(study: optuna.Study, items: list[tuple[str, str]], attrs: dict[str, Any]) -> int:
    """Add a WAITING attempt for each (run id, spec JSON) whose run `RetryPolicy.again_later` allows."""
    trials = study.get_trials(deepcopy=False)
    current, attempts = latest_by_run(trials), _attempts(trials)
    added = 0
    for run_id, spec_json in items:
        trial = current.get(run_id)
        if trial is not None and not RetryPolicy.again_later(status_of(trial)):
            continue
        _enqueue_attempt(study, run_id, spec_json, attempts.get(run_id, 0) + 1, attrs)
        added += 1
    return added


def _attempts(trials: list[FrozenTrial]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for trial in trials:
        run_id = trial.user_attrs.get(vocab.RUN_ID)
        if run_id is not None:
            counts[run_id] = max(counts.get(run_id, 0), int(trial.user_attrs.get(vocab.ATTEMPT, 1)))
    return counts


def _enqueue_attempt(study: optuna.Study, run_id: str, spec_json: str, attempt: int, attrs: dict[str, Any]) -> None:
    study.enqueue_trial(
        {vocab.RUN_ID: run_id, vocab.ATTEMPT: attempt},
        user_attrs={**attrs, vocab.RUN_ID: run_id, vocab.ATTEMPT: attempt, SPEC: spec_json},
        skip_if_exists=True,
    )


def enqueue_next(study: optuna.Study, attrs: dict[str, Any], **more: Any) -> None:
    """Queue the attempt after the one whose user attributes are `attrs`: same run, same spec; `more`
    replaces what it inherits (a worker's death counted).
    """
    if vocab.RUN_ID in attrs:
        kept = {k: attrs[k] for k in INHERITED if k in attrs} | more
        _enqueue_attempt(study, attrs[vocab.RUN_ID], attrs[SPEC], int(attrs.get(vocab.ATTEMPT, 1)) + 1, kept)


# --- leasing


def claim_next(
    study: optuna.Study,
    identity: dict[str, Any],
    search: SearchOfTrial | None = None,
    accept: Callable[[RunSpec], bool] | None = None,
) -> Lease | None:
    """Atomically take the next WAITING trial of `study` (the next whose spec `accept`s, if given)
    as a lease, or None if there is none.

    `identity` is written on the leased trial in order, before anything else, so
    crash detection can tell later whether its worker died.
    """
    for frozen in study.get_trials(deepcopy=False, states=(TrialState.WAITING,)):
        spec = spec_of(frozen)  # unreadable (a newer version queued it): raises before taking it
        if accept is not None and not accept(spec):
            continue
        if not internals.take(study, frozen):
            continue  # another worker took it first
        trial = internals.handle(study, frozen)
        if _duplicate(study, frozen):
            trial.set_user_attr(vocab.STATUS, RunStatus.DUPLICATE.value)
            study.tell(trial, state=TrialState.FAIL)
            continue
        for key, value in identity.items():
            trial.set_user_attr(key, value)
        return Lease(trial, spec, study, search)
    return None


def _duplicate(study: optuna.Study, frozen: FrozenTrial) -> bool:
    """Whether an earlier trial holds the same attempt at the same run.

    Two `run` commands that enqueue at the same moment can both add attempt k of a
    run (enqueueing reads, then writes). Only the lowest-numbered copy is trained,
    whichever worker leases it, so a run is still trained once.
    """
    key = (frozen.user_attrs.get(vocab.RUN_ID), frozen.user_attrs.get(vocab.ATTEMPT))
    return any(
        (t.user_attrs.get(vocab.RUN_ID), t.user_attrs.get(vocab.ATTEMPT)) == key and t.number < frozen.number
        for t in study.get_trials(deepcopy=False)
    )


# --- recording and ending


def record_epoch(lease: Lease, record: dict[str, Any]) -> None:
    """One evaluation record. End of epoch e: user attribute epoch_000e and trial.report(metric, e).
    A record inside an epoch (eval_every_steps, a steps budget) is keyed by its step as well and
    not reported to Optuna, whose intermediate values are per epoch.
    """
    epoch = float(record[vocab.EPOCH])
    if epoch.is_integer():
        lease.trial.set_user_attr(f"{EPOCH_PREFIX}{int(epoch):04d}", record)
        lease.trial.report(float(record[lease.metric]), int(epoch))
    else:
        lease.trial.set_user_attr(f"{EPOCH_PREFIX}{int(epoch):04d}_step_{int(record[vocab.STEP]):09d}", record)


def record_info(lease: Lease, info: dict[str, Any]) -> None:
    lease.trial.set_user_attr(INFO, info)


def record_fact(lease: Lease, key: str, value: Any) -> None:
    """A fact about the attempt that is not a record (e.g. the worker's memory when it ended)."""
    lease.trial.set_user_attr(key, value)


def epochs_of(trial: FrozenTrial) -> list[dict[str, Any]]:
    """The run's evaluation records in training order."""
    records = [v for k, v in trial.user_attrs.items() if k.startswith(EPOCH_PREFIX)]
    return sorted(records, key=lambda r: (r[vocab.STEP], r[vocab.EPOCH]))


def finish(lease: Lease, status: RunStatus, value: float | None = None, error: str | None = None) -> None:
    trial, study = lease.trial, lease.study
    trial.set_user_attr(vocab.STATUS, status.value)
    if error:
        trial.set_user_attr(vocab.ERROR, error[-ERROR_TAIL:])
    if status is RunStatus.DONE:
        study.tell(trial, value)
    elif status is RunStatus.PRUNED:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, state=TrialState.FAIL)


def requeue(study: optuna.Study, trial: optuna.Trial, reason: str, **more: Any) -> bool:
    """End an attempt that cannot finish (interrupted, crashed) and enqueue the next attempt (`more`: what
    it carries beyond its inheritance).

    False if another process ended it first (it then queued the next attempt itself).
    """
    attrs = trial.user_attrs
    if not end_attempt(study, trial, RunStatus.INTERRUPTED, reason):
        return False
    enqueue_next(study, attrs, **more)
    return True


def end_attempt(study: optuna.Study, trial: optuna.Trial, status: RunStatus, error: str) -> bool:
    """Mark a running attempt ended (FAIL to Optuna) with `status` and `error`; False if another process
    ended it first.
    """
    try:
        trial.set_user_attr(vocab.STATUS, status.value)
        trial.set_user_attr(vocab.ERROR, error[-ERROR_TAIL:])
        study.tell(trial, state=TrialState.FAIL)
    except (optuna.exceptions.UpdateFinishedTrialError, ValueError):  # ValueError: "Cannot tell a FAIL trial"
        return False
    return True
