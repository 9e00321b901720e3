"""The worker loop: claim a run (and the queued runs that pack with it), train them, repeat.

Runs in its own process (``python -m sweep worker``), started by ``run`` or by hand on
another machine, and reports to whoever started it through event lines on stdout
(`sweep.run.events`); everything else it or TensorFlow prints goes to its log. The same loop
runs inside the caller's process for `orchestrate.run_sweep(..., in_process=True)`, with
events handed to a callback. TensorFlow is imported only after the device set-up is decided.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import fields, replace
from typing import TYPE_CHECKING

from sweep.config import UnknownSettings
from sweep.config.plan import RunSpec
from sweep.exits import (
    EXIT_DISK_FULL,
    EXIT_INTERRUPTED,
    EXIT_NEEDS_MORE_DEVICES,
    EXIT_RECYCLE,
    EXIT_STORE_UNREACHABLE,
    EXIT_UNREADABLE,
    StoreUnreachable,
)
from sweep.run import driver, events, interrupts, mates, resume, watchdog
from sweep.run.endings import rss_mb
from sweep.store import DEFAULT_POLICY, Lease, RetryPolicy, Store, is_disk_full, redact
from sweep.train import checkpoint
from sweep.vocab import RunStatus

if TYPE_CHECKING:
    from sweep.train.session import Session

# A worker with nothing to claim waits while another worker's run may still die and come back, polling
# the store this often: the sweep ends when its last worker exits, so a long poll was up to 2 s of every
# sweep's end (a read of the store per poll costs milliseconds).
IDLE_POLL_SECONDS = 0.25


def emit_stdout(event: events.Event) -> None:
    try:
        sys.stdout.write(events.to_line(event))
        sys.stdout.flush()
    except BrokenPipeError:
        raise KeyboardInterrupt from None  # whoever started us is gone: stop like on Ctrl-C


def work(
    store: Store,
    emit: events.Emit = emit_stdout,
    policy: RetryPolicy = DEFAULT_POLICY,
    own_process: bool = True,
    places: resume.Places | None = None,
    pack: int | None = None,
    session: Session | None = None,
) -> int:
    """Train queued runs until the queue is empty. Returns the worker's exit code.

    Runs that share a compiled graph train together, up to `pack` at a time (default: the measured
    size for their batch size, sweep/train/pack.py; 1 trains every run alone). The worker's `session`
    keeps its compiled model from one run to the next (sweep/train/session.py): a fresh one, unless
    the caller keeps one across calls (an in-process sweep, sweep/run/orchestrate.py).

    In its own process, a run that stops making records is stopped by the progress watchdog
    (sweep/run/watchdog.py), which kills the process; its run is queued again, counted as a death.
    The process is reused across runs while its memory stays under `max_rss_mb()`; past
    that it exits with EXIT_RECYCLE and the coordinator starts a fresh one. In its own
    process, SIGTERM stops it like Ctrl-C (sweep/run/interrupts.py): the running run is queued
    again, and goes on from its checkpoint (`places`, default `resume.places` of the store)
    when claimed again.
    """
    with interrupts.armed() if own_process else contextlib.nullcontext():
        return _work_reporting(store, emit, policy, own_process, places, pack, session)


def _work_reporting(
    store: Store,
    emit: events.Emit,
    policy: RetryPolicy,
    own_process: bool,
    places: resume.Places | None,
    pack: int | None,
    session: Session | None,
) -> int:
    """`work`'s loop, with what stops it said as an event and an exit code."""
    emit = masked(emit, store.target)
    dog = watchdog.Watchdog(watchdog.floor_seconds()) if own_process else None  # it kills its process
    try:
        return _work(
            store,
            dog.emit(emit) if dog else emit,
            policy,
            places or resume.places(store.target, store.name),
            pack,
            dog,
            session,
        )
    except UnknownSettings as err:  # a queued run this version cannot read: say so, touch nothing
        emit(events.WorkerStopped(str(err)))
        print(redact(f"error: {err}", store.target), file=sys.stderr)
        return EXIT_UNREADABLE
    except StoreUnreachable as err:  # its runs stay RUNNING; the next `run` re-queues them (its pid is gone)
        print(f"error: {err}", file=sys.stderr)  # a coordinator says it once for all its workers
        return EXIT_STORE_UNREACHABLE
    except OSError as err:
        if not is_disk_full(err):
            raise
        # Its run stays RUNNING; once this process is gone the next `run` re-queues it.
        emit(events.WorkerStopped(f"no space left on device: {err.filename or 'a file this worker was writing'}"))
        print(redact(f"error: {err}", store.target), file=sys.stderr)
        return EXIT_DISK_FULL


def masked(emit: events.Emit, target: str) -> events.Emit:
    """`emit` with every text of an event passed through `redact`: an error's last line (a user's callback
    may raise with the storage URL in its message) reaches the terminal, a log or a Slurm job's .out file.
    """

    def emit_masked(event: events.Event) -> None:
        texts = {f.name: redact(v, target) for f in fields(event) if isinstance(v := getattr(event, f.name), str)}
        emit(replace(event, **texts))  # type: ignore[arg-type]  # a field of this event, by its name

    return emit_masked


def _work(
    store: Store,
    emit: events.Emit,
    policy: RetryPolicy,
    places: resume.Places,
    pack: int | None,
    dog: watchdog.Watchdog | None,
    session: Session | None,
) -> int:
    from sweep.train import devices
    from sweep.train.session import Session

    session = session if session is not None else Session()  # what this worker keeps between its runs
    checkpoint.sweep_leftovers(places.checkpoints)  # what killed checkpoint writes left, whichever run's

    replicas = max((s.point.train.gpus for s in store.queued()), default=1)
    devices.configure_replicas(replicas)  # logical devices are fixed once TensorFlow starts
    mirrored: int | None = None  # replica count of the MirroredStrategy this process has used
    alone: set[str] = set()  # runs whose pack failed here: each trains alone
    last: RunSpec | None = None  # the run whose compiled model this worker's session holds
    while True:
        store.requeue_dead(policy)  # a dead worker's run goes back in the queue for us
        lease = mates.claim_for(store, last)
        if lease is None:
            if not store.may_come_back():
                return 0
            time.sleep(IDLE_POLL_SECONDS)  # another worker's run may still die and be re-queued
            continue
        needed = lease.spec.point.train.gpus
        if needed > replicas:
            store.requeue(lease, "needs more replicas than this worker set up")
            return EXIT_NEEDS_MORE_DEVICES
        if mirrored not in (None, needed) and needed > 1:
            # TensorFlow's collectives keep their first group size per process: a second
            # MirroredStrategy over another number of devices aborts ("joining a group with
            # size 4, but that group has size 2"). A fresh worker takes this run.
            store.requeue(lease, "needs a fresh worker for another replica count")
            return EXIT_RECYCLE
        mirrored = needed if needed > 1 else mirrored
        leases = [store.start(lease)]  # a search slot: its lr is drawn now
        size = mates.size_for(lease, pack, places, alone)
        if size > 1:
            leases += [store.start(m) for m in mates.claim_mates(store, lease, size, places, alone)[1:]]
        try:
            watched = dog.watching(leases, _first_record(places, leases)) if dog else contextlib.nullcontext()
            with heartbeats(store, leases), watched:
                ended = driver.train(store, leases, emit, places, session)
        except KeyboardInterrupt:
            for taken in leases:
                store.requeue(taken, "interrupted before the run finished")
                emit(events.RunInterrupted(taken.spec.run_id))
            return EXIT_INTERRUPTED
        except OSError as err:
            if is_disk_full(err):
                _requeue_after_full_disk(store, leases, err)
            raise
        last = leases[0].spec
        alone |= {
            c.spec.run_id for c, (status, _) in zip(leases, ended, strict=True) if status is RunStatus.INTERRUPTED
        }
        for taken, (status, retryable) in zip(leases, ended, strict=True):
            if status is RunStatus.FAILED and store.retry(taken, policy, retryable):
                emit(events.RunRetried(taken.spec.run_id, taken.spec.point.train.epochs))
        if rss_mb() > max_rss_mb():
            return EXIT_RECYCLE


def _first_record(places: resume.Places, leases: list[Lease]) -> float | None:
    """The measured quiet seconds to the runs' first record; a pack's, at most its size times a run's alone."""
    from sweep.analysis.timing import first_record_seconds

    alone = first_record_seconds(places.results, leases[0].spec) if places.results else None
    return alone * len(leases) if alone is not None else None


def _requeue_after_full_disk(store: Store, leases: list[Lease], err: OSError) -> None:
    """The runs queued again, not left to be found dead: a full disk is no worker's death (it does not count
    toward --max-requeues). Where the store's own disk is the full one this write fails too, and the next
    `run` finds them as it finds a dead worker's.
    """
    reason = f"no space left on device writing {err.filename or 'a file'}"
    with contextlib.suppress(OSError):
        for taken in leases:
            store.requeue(taken, reason)


@contextlib.contextmanager
def heartbeats(store: Store, leases: list[Lease]) -> Iterator[None]:
    """Each claimed run's heartbeat (database stores) from its lease to its end, alone or in a pack: a run
    whose worker dies goes stale and is re-queued by any other worker.
    """
    with contextlib.ExitStack() as beating:
        for lease in leases:
            beating.enter_context(store.heartbeat(lease))
        yield


def max_rss_mb() -> float:
    """Memory above which a worker is replaced between runs ($BATCHSWEEP_WORKER_MAX_MB, default 4096)."""
    return float(os.environ.get("BATCHSWEEP_WORKER_MAX_MB", "4096"))
