"""Runs whose worker died: queued again up to the retry policy's cap, then left failed with how often and
how the worker last died; never judged dead from another pid namespace. A worker is "dead" here by its
identity: its lease records this process's pid with a start time an hour off, as a reused pid would
have (tests/test_store.py shows that is how a dead worker is told from a live one).
"""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import psutil
import pytest
from conftest import write_grid

from sweep import vocab
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.run import events, watchdog
from sweep.store import Dead, RetryPolicy, Store, crash
from sweep.vocab import RunStatus

pytestmark = pytest.mark.unit


def _store(tmp_path: Path) -> tuple[Store, list[str]]:
    store = Store.open(tmp_path / "journal.log", "s")
    runs = plan(load_grid(write_grid(tmp_path, "name: s\nseeds: [0]\ngrid: {train.batch_size: [8, 64]}\n")))
    store.enqueue(runs)
    return store, [r.run_id for r in runs]


@pytest.fixture
def dead_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every lease from here on names a worker that is gone (this pid, another start time)."""
    real = crash.worker_identity()
    gone = {**real, crash.WORKER_STARTED: psutil.Process().create_time() - 3600.0}
    monkeypatch.setattr(crash, "worker_identity", lambda: gone)


def _claim(store: Store, run_id: str):
    lease = store.claim_next(lambda spec: spec.run_id == run_id)
    assert lease is not None
    return lease


def _status(store: Store, run_id: str) -> tuple[str, str]:
    row = store.runs_table().set_index(vocab.RUN_ID).loc[run_id]
    return row[vocab.STATUS], row[vocab.ERROR]


def test_a_run_whose_worker_dies_every_time_is_failed_after_the_cap(tmp_path: Path, dead_claims: None) -> None:
    store, (victim, other) = _store(tmp_path)
    policy = RetryPolicy(max_requeues=2)
    pid = crash.worker_identity()[crash.WORKER_PID]
    for death in (1, 2):
        _claim(store, victim)
        assert store.requeue_dead(policy) == [Dead(victim, death)]
        assert _status(store, victim)[0] == RunStatus.PENDING
    _claim(store, victim)
    [dead] = store.requeue_dead(policy, causes={pid: "killed by SIGKILL"})
    host = crash.socket.gethostname()
    assert dead.failed == f"worker died 3 times (last: worker pid {pid} on {host} died mid-run: killed by SIGKILL)"
    assert _status(store, victim) == (RunStatus.FAILED, dead.failed)
    assert store.claim_next(lambda spec: spec.run_id == victim) is None  # nothing of it is queued any more
    assert _status(store, other)[0] == RunStatus.PENDING  # the rest of the sweep is untouched
    attempts = [t.user_attrs[vocab.ATTEMPT] for t in store.trials() if t.user_attrs[vocab.RUN_ID] == victim]
    assert attempts == [1, 2, 3]


def test_max_requeues_0_fails_the_run_at_its_first_death(tmp_path: Path, dead_claims: None) -> None:
    store, (victim, _) = _store(tmp_path)
    _claim(store, victim)
    [dead] = store.requeue_dead(RetryPolicy(max_requeues=0))
    assert dead.deaths == 1 and dead.failed is not None and dead.failed.startswith("worker died 1 time (last: ")


def test_a_stop_asked_for_is_no_death_and_keeps_the_count(tmp_path: Path, dead_claims: None) -> None:
    """Ctrl-C or SIGTERM re-queues the run itself: the deaths counted before it stay, none is added."""
    store, (victim, _) = _store(tmp_path)
    _claim(store, victim)
    assert store.requeue_dead() == [Dead(victim, 1)]
    store.requeue(_claim(store, victim), "interrupted before the run finished")
    _claim(store, victim)
    assert store.requeue_dead() == [Dead(victim, 2)]


def test_a_new_run_command_gives_a_failed_run_a_fresh_count(tmp_path: Path, dead_claims: None) -> None:
    store, (victim, _) = _store(tmp_path)
    _claim(store, victim)
    [dead] = store.requeue_dead(RetryPolicy(max_requeues=0))
    assert dead.failed is not None
    runs = plan(load_grid(tmp_path / "grid.yaml"))
    assert store.enqueue(runs) == 1  # `run` again: the failed run gets a new attempt
    _claim(store, victim)
    assert store.requeue_dead(RetryPolicy(max_requeues=1)) == [Dead(victim, 1)]


def test_the_watchdogs_reason_is_the_one_recorded(tmp_path: Path, dead_claims: None) -> None:
    store, (victim, _) = _store(tmp_path)
    lease = _claim(store, victim)
    lease.trial.set_user_attr(vocab.STALLED, "no record for 700 s")
    [dead] = store.requeue_dead(RetryPolicy(max_requeues=0))
    assert dead.failed == "worker died 1 time (last: no record for 700 s)"


def test_a_worker_in_another_pid_namespace_is_not_judged(tmp_path: Path, dead_claims: None) -> None:
    """Containers may share a hostname but not their pids: a pid missing here may be alive in another one."""
    store, (victim, _) = _store(tmp_path)
    lease = _claim(store, victim)
    lease.trial.set_user_attr(crash.WORKER_PIDS, "pid:[1]")
    assert store.requeue_dead() == [] and store.may_come_back() is True
    lease.trial.set_user_attr(crash.WORKER_PIDS, crash._pid_namespace())  # this namespace: judged, and dead
    assert store.requeue_dead() == [Dead(victim, 1)]


def test_the_watchdog_stops_a_worker_whose_run_makes_no_record(tmp_path: Path) -> None:
    """Fed records at its pace, the watchdog lets the run go on; once they stop, it says why on the run's
    attempt and stops the worker (here a flag; in a worker process, kill -9 of itself).
    """
    store, (victim, _) = _store(tmp_path)
    lease = _claim(store, victim)
    stopped = threading.Event()
    dog = watchdog.Watchdog(floor=0.3, stop=stopped.set)
    emit = dog.emit(lambda event: None)
    record = {k: 0.5 for k in vocab.EPOCH_METRICS}
    with dog.watching([lease]):
        for _ in range(20):  # 2 s of records every 0.1 s: far under the bound (10 x 0.1 s, at least 0.3 s)
            time.sleep(0.1)
            emit(events.EpochDone(victim, 3, record))
        assert not stopped.is_set()
        assert stopped.wait(timeout=10)  # no record any more: stopped after about 1 s
    why = store.sweep.get_trials()[lease.trial.number].user_attrs[vocab.STALLED]
    pace = r"no record for \d+ s \(bound \d+ s: 10x this worker's slowest interval between records, 0\.\d s\)"
    assert re.fullmatch(pace + "; the watchdog stopped its worker", why), why


def test_the_watchdog_waits_10x_its_floor_for_a_workers_first_record(tmp_path: Path) -> None:
    stopped = threading.Event()
    dog = watchdog.Watchdog(floor=0.1, stop=stopped.set)
    assert dog.bound()[0] == pytest.approx(1.0)
    store, (victim, _) = _store(tmp_path)
    started = time.monotonic()
    with dog.watching([_claim(store, victim)]):
        assert stopped.wait(timeout=10)
    assert time.monotonic() - started >= 1.0


def test_before_its_first_record_a_timed_run_waits_the_floor_and_10x_its_measured_seconds(tmp_path: Path) -> None:
    """Where `sweep time` measured the runs' configuration: the floor (to build the model) plus 10x the measured
    seconds to the first record, 1.0 s here, not 10x the floor (5 s).
    """
    stopped = threading.Event()
    dog = watchdog.Watchdog(floor=0.5, stop=stopped.set)
    store, (victim, _) = _store(tmp_path)
    started = time.monotonic()
    with dog.watching([_claim(store, victim)], expected=0.05):
        bound, basis = dog.bound()
        assert bound == pytest.approx(1.0) and "0.05 s timing.csv measured" in basis
        assert stopped.wait(timeout=10)
    assert 1.0 <= time.monotonic() - started < 5.0
    why = (
        store.sweep.get_trials()[0].user_attrs.get(vocab.STALLED)
        or store.sweep.get_trials()[1].user_attrs[vocab.STALLED]
    )
    assert "bound 1 s: the floor of 0.5 s and 10x the 0.05 s timing.csv measured to its first record" in why


def test_a_worker_bounds_a_first_record_by_its_results_folders_timing(tmp_path: Path) -> None:
    """The worker's results folder (a journal's folder by default) holds timing.csv; a pack of two waits twice."""
    from sweep.config import timing_schema
    from sweep.run import resume, worker
    from sweep.train import timing

    store, (victim, other) = _store(tmp_path)
    places = resume.places(str(tmp_path / "journal.log"), "s")
    assert places.results == tmp_path
    leases = [_claim(store, victim), _claim(store, other)]
    flat = leases[0].spec.flat()
    names = timing_schema.timing_keys(flat)
    row = {timing_schema.CONFIG: timing_schema.config_key(flat, names), **{k: flat[k] for k in names}}
    timing.merge(
        tmp_path / vocab.TIMING_CSV, [row | {timing_schema.STEP_SECONDS: 0.01, timing_schema.STEPS_PER_EPOCH: 30}]
    )
    assert worker._first_record(places, leases[:1]) == pytest.approx(0.3)
    assert worker._first_record(places, leases) == pytest.approx(0.6)
    assert worker._first_record(resume.Places(tmp_path / "elsewhere"), leases) is None


class _Clock:
    """The watchdog's clock, moved by hand: its thread reads it (real sleeps between looks)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(seconds)


def test_the_bound_follows_the_slowest_interval_not_the_latest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records 10 s then 1 s apart: the bound is 10x the slowest, 100 s; at 50 s without a record the run goes on,
    past 100 s it is stopped.
    """
    clock = _Clock()
    monkeypatch.setattr(watchdog, "time", clock)
    stopped = threading.Event()
    dog = watchdog.Watchdog(floor=0.2, stop=stopped.set)
    store, (victim, _) = _store(tmp_path)
    emit = dog.emit(lambda event: None)
    record = {k: 0.5 for k in vocab.EPOCH_METRICS}
    with dog.watching([_claim(store, victim)]):
        for step in (10.0, 1.0):
            clock.now += step
            emit(events.EpochDone(victim, 1, record))
        assert dog.bound()[0] == pytest.approx(100.0)
        clock.now += 50.0
        assert not stopped.wait(timeout=0.5)
        clock.now += 51.0
        assert stopped.wait(timeout=5)


def test_the_watchdog_never_stops_a_worker_that_watches_no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Between runs (nothing watched) no time without a record is a stall."""
    clock = _Clock()
    monkeypatch.setattr(watchdog, "time", clock)
    stopped = threading.Event()
    watchdog.Watchdog(floor=0.2, stop=stopped.set)
    clock.now += 1e6
    assert not stopped.wait(timeout=0.5)
