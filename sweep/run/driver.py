"""The one driver: train claimed runs (one alone, or several as a pack) to their ends, and record each.

Each run keeps its own lease, records, checkpoint and status, so the store sees ordinary runs
whether they trained alone or packed. After every record the store takes it and the run's
checkpoint is written at it, both or neither; a search trial reports to its pruner there. A run
alone with a checkpoint the store agrees with goes on from it (sweep/run/resume.py); a checkpoint
of a packed run is written as its run alone would hold it, so a pack whose worker died leaves
runs that are re-queued one by one and resume alone.

An error is handled in one place, by who is at fault: a run alone fails (retried by the caller's
policy, except for its data or user code, which fail the same way again); in a pack the runs still
training are queued again to train alone next, where the run at fault fails on its own and the
others go on from their checkpoints. Ctrl-C, SIGTERM and a full disk propagate: they stop the worker
(an error raised after a stop was asked for is taken for the stop, sweep/run/interrupts.py). The
worker's session gets the compiled model back only from a trainer whose runs trained to their ends with
none diverged (sweep/train/session.py): after an error, a stop or a divergence the next run builds its own.
"""

from __future__ import annotations

import math
import traceback
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import optuna

from sweep import vocab
from sweep.exits import StoreUnreachable
from sweep.run import events, interrupts, resume
from sweep.run.endings import Ending, end_run, pruned_error, should_prune, taken_back
from sweep.store import Lease, Store, is_disk_full
from sweep.train import checkpoint
from sweep.vocab import RunStatus

if TYPE_CHECKING:
    from sweep.train.session import Session


@dataclass
class _Outcomes:
    """How each claimed run stands: its ending once known, its last record, the epochs it trains."""

    epochs: int
    endings: dict[int, Ending] = field(default_factory=dict)
    last: dict[int, dict[str, Any]] = field(default_factory=dict)

    def end(self, k: int, status: RunStatus, error: str | None) -> None:
        self.endings[k] = Ending(status, error, self.epochs, self.last.get(k))


def train(
    store: Store, leases: list[Lease], emit: events.Emit, places: resume.Places, session: Session
) -> list[tuple[RunStatus, bool]]:
    """Train the claimed (and started) runs together in the worker's `session`; each one's status, and
    whether another attempt could end differently, in order.
    """
    from sweep.train.data import DataError
    from sweep.train.records import Diverged, total_steps
    from sweep.train.trainer import Trainer
    from sweep.train.usercode import UserCodeError

    for lease in leases:
        emit(events.RunStarted(lease.spec.run_id, lease.spec.point.train.epochs))
    outcomes = _Outcomes(leases[0].spec.point.train.epochs)
    try:
        trainer = Trainer([lease.spec for lease in leases], session)
        steps = trainer.steps_per_epoch
        outcomes.epochs = math.ceil(total_steps(leases[0].spec.point.train, steps) / steps)
        for lease in leases:
            store.record_info(lease, asdict(trainer.info))
            if outcomes.epochs != lease.spec.point.train.epochs:  # a steps budget: known once the data is loaded
                emit(events.EpochsKnown(lease.spec.run_id, lease.spec.point.train.epochs, outcomes.epochs))
        resumed = resume.resume(store, leases[0], trainer.model, trainer.strategy, places) if len(leases) == 1 else None
        if resumed:
            outcomes.last[0] = resumed[1]
        for found in trainer.records(resumed[0] if resumed else None):
            for k, record in found.items():
                if isinstance(record, Diverged):
                    outcomes.end(k, RunStatus.DIVERGED, str(record))
                    continue
                outcomes.last[k] = record.to_dict()
                _store_record(store, leases[k], trainer, k, outcomes, places, emit)
                if should_prune(leases[k], record.epoch, outcomes.epochs):
                    outcomes.end(k, RunStatus.PRUNED, pruned_error(leases[k], record.epoch))
                    trainer.end(k)
        for k, run in enumerate(trainer.runs):
            if k not in outcomes.endings:  # every epoch trained, or stopped early by its rule
                outcomes.end(k, RunStatus.DONE, None)
                if run.stopped_early is not None:
                    store.record_fact(leases[k], vocab.STOPPED_EARLY, run.stopped_early)
    except Exception as err:  # noqa: BLE001 - any error of a run is recorded, and the sweep goes on
        if interrupts.asked():  # the stop landed inside a library, which raised an error of its own
            raise KeyboardInterrupt from err
        if isinstance(err, StoreUnreachable) or (isinstance(err, OSError) and is_disk_full(err)):
            raise  # not these runs' fault, and nothing more can be recorded: the worker stops
        if isinstance(err, optuna.exceptions.UpdateFinishedTrialError) and len(leases) == 1:
            return [taken_back(leases[0].spec.run_id, emit)]  # the store ended the attempt: worker presumed dead
        # A pack's mates whose attempts stand after the store ended one are queued again; a run's
        # data or user code fails the same way again.
        retryable = not isinstance(err, (DataError, UserCodeError))
        return _failed(store, leases, emit, places, outcomes, retryable=retryable)
    kept = trainer.model if len(leases) == 1 else None  # --keep-models trains every run alone
    return [(end_run(store, lease, emit, places, outcomes.endings[k], kept), True) for k, lease in enumerate(leases)]


def _failed(
    store: Store,
    leases: list[Lease],
    emit: events.Emit,
    places: resume.Places,
    outcomes: _Outcomes,
    retryable: bool,
) -> list[tuple[RunStatus, bool]]:
    """The error being handled ends these runs: a run alone fails with it; in a pack, the runs that had
    not ended are queued again to train alone. Their model never went back to the session.
    """
    error = traceback.format_exc()
    if len(leases) == 1:
        outcomes.end(0, RunStatus.FAILED, error)
        return [(end_run(store, leases[0], emit, places, outcomes.endings[0], None), retryable)]
    reason = f"its pack failed ({error.strip().splitlines()[-1]}); it trains alone next"
    ended = [outcomes.endings.get(k) for k in range(len(leases))]
    return [
        (end_run(store, lease, emit, places, e, None), True) if e else _requeue(store, lease, reason, emit)
        for lease, e in zip(leases, ended, strict=True)
    ]


def _requeue(store: Store, lease: Lease, reason: str, emit: events.Emit) -> tuple[RunStatus, bool]:
    """End the attempt unfinished and queue the run again (its checkpoint, if any, is kept)."""
    if not store.requeue(lease, reason):  # the store had ended this attempt and queued the next
        return taken_back(lease.spec.run_id, emit)
    emit(events.RunInterrupted(lease.spec.run_id, reason))
    return RunStatus.INTERRUPTED, True


def _store_record(
    store: Store, lease: Lease, trainer: Any, k: int, outcomes: _Outcomes, places: resume.Places, emit: events.Emit
) -> None:
    """The store takes run k's record, then its checkpoint is written at it: both or neither."""
    spec = lease.spec
    record = outcomes.last[k]
    with interrupts.uninterrupted():
        store.record_epoch(lease, record)
        position = trainer.runs[k].position
        checkpoint.save(places.checkpoint(spec.run_id), spec.run_id, spec.to_json(), position, record, trainer.view(k))
    emit(events.EpochDone(spec.run_id, outcomes.epochs, record))
