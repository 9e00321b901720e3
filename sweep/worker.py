"""The worker loop: claim a point, train it, write its records, repeat.

Runs in its own process (``python -m sweep worker``), started by ``run`` or by
hand on another machine. It reports to whoever started it through event lines
on stdout (``@@sweep {json}``); everything else it or TensorFlow prints goes to
its log. TensorFlow is imported only after the device set-up is decided.
"""

from __future__ import annotations

import json
import math
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import asdict
from typing import Any, Callable

import optuna

from sweep import store, vocab
from sweep.config import UnknownSettings
from sweep.plan import RunSpec

EVENT_PREFIX = "@@sweep "
EXIT_NEEDS_MORE_DEVICES = 3  # a queued run needs more replicas than this process set up
EXIT_UNREADABLE = 2  # the queue holds runs written by a newer version
EXIT_RECYCLE = 4  # memory grew past the bound: start a fresh worker
EXIT_DISK_FULL = 5  # the store cannot be written: stop, the coordinator says what to do
EXIT_INTERRUPTED = 130
IDLE_POLL_SECONDS = 2.0

Emit = Callable[[dict[str, Any]], None]


def emit_stdout(event: dict[str, Any]) -> None:
    try:
        sys.stdout.write(EVENT_PREFIX + json.dumps(event) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        raise KeyboardInterrupt from None  # whoever started us is gone: stop like on Ctrl-C


def work(study: optuna.Study, emit: Emit = emit_stdout, retries: int = 1) -> int:
    """Train queued runs until the queue is empty. Returns the process exit code.

    A run that raises is recorded failed and queued again while it has retries left.
    The process is reused across runs while its memory stays under `max_rss_mb()`;
    past that it exits with EXIT_RECYCLE and the coordinator starts a fresh one.
    """
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        return _work(study, emit, retries)
    except UnknownSettings as err:  # a queued run this version cannot read: say so, touch nothing
        emit({"event": "error", "message": str(err)})
        print(f"error: {err}", file=sys.stderr)
        return EXIT_UNREADABLE
    except OSError as err:
        if not store.is_disk_full(err):
            raise
        # Its run stays RUNNING; once this process is gone the next `run` re-queues it.
        emit({"event": "error", "message": f"no space left on device: {err.filename or 'the store'}"})
        print(f"error: {err}", file=sys.stderr)
        return EXIT_DISK_FULL


Queue = tuple[optuna.Study, "store.Search | None"]  # the sweep's own queue, or a learning-rate search's


def _work(study: optuna.Study, emit: Emit, retries: int) -> int:
    from sweep import devices

    queues: list[Queue] = [(study, None)] + [(s.study, s) for s in store.searches_of(study)]
    replicas = _max_replicas([q for q, _ in queues])
    devices.configure_replicas(replicas)
    mirrored: int | None = None  # replica count of the MirroredStrategy this process has used
    while True:
        for queue, _ in queues:
            store.requeue_dead(queue)  # a dead worker's run goes back in the queue for us
        claimed = _claim(queues)
        if claimed is None:
            if not any(store.may_come_back(q) for q, _ in queues):
                return 0
            time.sleep(IDLE_POLL_SECONDS)  # another worker's run may still die and be re-queued
            continue
        queue, search, claim = claimed
        needed = claim.spec.point.train.gpus
        if needed > replicas:
            store.requeue(queue, claim.trial._trial_id, "needs more replicas than this worker set up")
            return EXIT_NEEDS_MORE_DEVICES
        if mirrored not in (None, needed) and needed > 1:
            # TensorFlow's collectives keep their first group size per process: a second
            # MirroredStrategy over another number of devices aborts ("joining a group with
            # size 4, but that group has size 2"). A fresh worker takes this run.
            store.requeue(queue, claim.trial._trial_id, "needs a fresh worker for another replica count")
            return EXIT_RECYCLE
        mirrored = needed if needed > 1 else mirrored
        if search is not None:  # a search slot: this trial's lr comes from the search's sampler
            claim = search.start(claim)
        try:
            status, retryable = run_one(queue, claim, emit, search)
        except KeyboardInterrupt:
            store.requeue(queue, claim.trial._trial_id, "interrupted before the run finished")
            emit({"event": "interrupted", "run_id": claim.spec.run_id})
            return EXIT_INTERRUPTED
        if status == vocab.FAILED and retryable and store.retry_failed(queue, claim.trial, retries):
            emit({"event": "retry", "run_id": claim.spec.run_id, "epochs": claim.spec.point.train.epochs})
        if rss_mb() > max_rss_mb():
            return EXIT_RECYCLE


def _claim(queues: list[Queue]) -> tuple[optuna.Study, store.Search | None, store.Claim] | None:
    """The next queued run: the sweep's own runs first, then the searches' trials in order."""
    for queue, search in queues:
        claim = store.claim_next(queue)
        if claim is not None:
            return queue, search, claim
    return None


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


def max_rss_mb() -> float:
    """Memory above which a worker is replaced between runs ($BATCHSWEEP_WORKER_MAX_MB, default 4096)."""
    return float(os.environ.get("BATCHSWEEP_WORKER_MAX_MB", "4096"))


class _Heartbeat:
    """Records Optuna heartbeats for a trial from a background thread while it trains."""

    def __init__(self, study: optuna.Study, trial_id: int) -> None:
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, args=(study._storage, trial_id), daemon=True)
        self._thread.start()

    def _beat(self, storage: Any, trial_id: int) -> None:
        while True:
            storage.record_heartbeat(trial_id)
            if self._stopped.wait(store.heartbeat_seconds()):
                return

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join()


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _max_replicas(studies: list[optuna.Study]) -> int:
    """The most replicas any queued run needs: logical devices are fixed once TensorFlow starts."""
    waiting = [t for s in studies for t in s.get_trials(deepcopy=False, states=(optuna.trial.TrialState.WAITING,))]
    return max((RunSpec.from_json(t.user_attrs["spec"]).point.train.gpus for t in waiting
                if "spec" in t.user_attrs), default=1)


def _taken_back(run_id: str, emit: Emit) -> tuple[str, bool]:
    """The store ended this attempt while it trained (its worker was presumed dead) and queued
    the next one: drop this attempt's work quietly; the queued attempt trains the run."""
    emit({"event": "interrupted", "run_id": run_id,
          "reason": "the store presumed this worker dead and queued the run again"})
    return vocab.INTERRUPTED, False


def run_one(study: optuna.Study, claim: store.Claim, emit: Emit,
            search: store.Search | None = None) -> tuple[str, bool]:
    """Train one claimed run to its end; record every epoch as it finishes.

    Returns its status and whether another attempt could end differently: a run that
    failed on its data (sweep.data.DataError) fails the same way again.

    A search trial reports the search's metric to Optuna after every epoch and stops
    early (status pruned) when the search's pruner says its curve is below the median.
    """
    from sweep.data import DataError
    from sweep.train import Diverged, Run, forget_compiled, total_steps

    spec, trial = claim.spec, claim.trial
    emit({"event": "start", "run_id": spec.run_id, "epochs": spec.point.train.epochs})
    status, error, last, epochs, retryable = vocab.FAILED, None, None, spec.point.train.epochs, True
    metric = search.settings["metric"] if search else vocab.VAL_ACC
    heartbeat = _Heartbeat(study, trial._trial_id) if store.is_database(study) else None
    try:
        run = Run(spec)
        store.record_info(trial, asdict(run.info))
        epochs = math.ceil(total_steps(spec.point.train, run.info.steps_per_epoch) / run.info.steps_per_epoch)
        if epochs != spec.point.train.epochs:  # a steps budget: known once the data is loaded
            emit({"event": "epochs", "run_id": spec.run_id, "planned": spec.point.train.epochs, "epochs": epochs})
        for record in run.epochs():
            store.record_epoch(trial, record.to_dict(), metric)
            emit({"event": "epoch", "run_id": spec.run_id, "epochs": epochs, **record.to_dict()})
            last = record
            # Pruning at the last epoch would save nothing and hide a finished trial from the sampler.
            if search is not None and float(record.epoch).is_integer() and record.epoch < epochs \
                    and trial.should_prune():
                status, error = vocab.PRUNED, f"pruned after epoch {record.epoch}: {metric} below the search's median"
                break
        else:  # every epoch trained; an exception above leaves the status failed
            status = vocab.DONE
    except Diverged as err:
        status, error = vocab.DIVERGED, str(err)
    except KeyboardInterrupt:
        raise
    except OSError as err:
        if store.is_disk_full(err):
            raise  # not this run's fault, and nothing more can be recorded: the worker stops
        error = traceback.format_exc()
    except DataError:
        error, retryable = traceback.format_exc(), False
    except optuna.exceptions.UpdateFinishedTrialError:
        return _taken_back(spec.run_id, emit)
    except Exception:  # noqa: BLE001 - any error of one run is recorded, and the sweep goes on
        error = traceback.format_exc()
    finally:
        if heartbeat:
            heartbeat.stop()
        if status not in (vocab.DONE, vocab.PRUNED):  # its model may be broken: the next run builds its own
            forget_compiled()  # also on Ctrl-C, which leaves the status failed until the run is re-queued
    value = getattr(last, metric) if last and status == vocab.DONE else None
    try:
        trial.set_user_attr("worker_rss_mb", round(rss_mb(), 1))  # memory growth across runs, measured
        store.finish(study, trial, status, value=value, error=error)
    except optuna.exceptions.UpdateFinishedTrialError:
        return _taken_back(spec.run_id, emit)
    emit({"event": "end", "run_id": spec.run_id, "status": status,
          "epochs_left": max(0, epochs - math.ceil(last.epoch if last else 0)),
          "error": (error or "").strip().splitlines()[-1] if error else None})
    return status, retryable
