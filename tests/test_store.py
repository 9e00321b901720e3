"""The Optuna-backed store: idempotent queue, atomic leases, per-epoch records, tables, plain Optuna."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest
from conftest import REPO, write_grid

from sweep import vocab
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.store import Dead, RetryPolicy, Store, crash, epochs_of, internals, outage, storage
from sweep.vocab import RunStatus


def _store(tmp_path: Path) -> Store:
    return Store.open(tmp_path / "journal.log", "s")


def _runs(tmp_path: Path):
    return plan(load_grid(write_grid(tmp_path, "name: s\nseeds: [0, 1]\ngrid: {train.batch_size: [8, 64]}\n")))


def _record(epoch: float, val_acc: float) -> dict:
    record = {k: 0.5 for k in vocab.EPOCH_METRICS}
    record.update(epoch=epoch, step=10 * epoch, val_acc=val_acc)
    return record


@pytest.mark.unit
def test_the_optuna_internals_it_relies_on_still_hold() -> None:
    """Fails with a one-line message naming what moved when an Optuna upgrade changes them."""
    internals.verify()
    assert optuna.__version__ in internals.CHECKED_VERSIONS, (
        f"Optuna {optuna.__version__} is installed; sweep/store/internals.py was checked against "
        f"{', '.join(internals.CHECKED_VERSIONS)}: read it against the new version, then add it there"
    )


@pytest.mark.unit
def test_only_one_module_names_optunas_private_attributes() -> None:
    private = re.compile(r"\._storage|_study_id|_trial_id")
    hits = [p for p in sorted((REPO / "sweep").rglob("*.py")) if private.search(p.read_text(encoding="utf-8"))]
    assert [p.relative_to(REPO).as_posix() for p in hits] == ["sweep/store/internals.py"]


@pytest.mark.unit
def test_enqueue_is_idempotent(tmp_path: Path) -> None:
    store, runs = _store(tmp_path), _runs(tmp_path)
    assert store.enqueue(runs) == 4
    assert store.enqueue(runs) == 0
    assert len(store.sweep.trials) == 4
    assert store.counts([r.run_id for r in runs])[RunStatus.PENDING] == 4


@pytest.mark.unit
def test_a_run_status_is_its_word_with_final_and_rank() -> None:
    """`RunStatus` (sweep/vocab.py): done, diverged and pruned are final (never trained again), a pending or
    running attempt has not ended, the rank says which attempt speaks for a run, and the retry policy gives
    another attempt to the others; a member is its word wherever it goes (str, f-string, JSON, dict key, CSV).
    """
    assert [s for s in RunStatus if s.final] == [RunStatus.DONE, RunStatus.DIVERGED, RunStatus.PRUNED]
    assert [s for s in RunStatus if not s.ended] == [RunStatus.RUNNING, RunStatus.PENDING]
    by_rank = ["done", "pruned", "running", "pending", "diverged", "failed", "interrupted", "duplicate"]
    assert [s.value for s in sorted(RunStatus, key=lambda s: s.rank)] == by_rank
    again = [RunStatus.FAILED, RunStatus.INTERRUPTED, RunStatus.DUPLICATE]
    assert [s for s in RunStatus if RetryPolicy.again_later(s)] == again
    for status in RunStatus:
        word = status.value
        assert str(status) == f"{status}" == word and status == word and {word: 1}[status] == 1
        assert json.dumps({vocab.STATUS: status}) == json.dumps({vocab.STATUS: word})
        assert RunStatus(word) is status
    written = pd.DataFrame({vocab.STATUS: list(RunStatus)}).to_csv(index=False)
    assert written == "status\n" + "".join(f"{s.value}\n" for s in RunStatus)


@pytest.mark.unit
def test_the_journal_runs_csv_and_a_workers_events_hold_the_status_words(tmp_path: Path) -> None:
    """Each way an attempt ends writes the word it always wrote, in the journal, in runs.csv and in a
    worker's event line; an event line read back holds the member.
    """
    from sweep.run import events

    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    done, failed, diverged, interrupted = (store.claim_next() for _ in runs)
    store.finish(done, RunStatus.DONE, value=0.5)
    store.finish(failed, RunStatus.FAILED, error="boom")
    store.finish(diverged, RunStatus.DIVERGED, error="loss became nan")
    assert store.requeue(interrupted, "stopped")
    journal = (tmp_path / "journal.log").read_text(encoding="utf-8")
    written = re.findall(r'"user_attr":\{"status":"(\w+)"\}', journal)
    assert written == ["done", "failed", "diverged", "interrupted"]
    store.export_csv(tmp_path)
    lines = (tmp_path / vocab.RUNS_CSV).read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("run_id,sweep,status,")
    statuses = {line.split(",")[0]: line.split(",")[2] for line in lines[1:]}
    ids = [lease.spec.run_id for lease in (done, failed, diverged, interrupted)]
    assert [statuses[i] for i in ids] == ["done", "failed", "diverged", "pending"]  # queued again
    line = events.to_line(events.RunEnded("r", RunStatus.DIVERGED, 1, "nan"))
    assert line == '@@sweep {"event": "end", "run_id": "r", "status": "diverged", "epochs_left": 1, "error": "nan"}\n'
    read = events.from_line(line)
    assert isinstance(read, events.RunEnded) and read.status is RunStatus.DIVERGED


@pytest.mark.unit
def test_leases_are_exclusive_and_records_arrive_per_epoch(tmp_path: Path) -> None:
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    other = _store(tmp_path)  # a second client on the same journal, like a second worker
    a, b = store.claim_next(), other.claim_next()
    assert a is not None and b is not None and a.spec.run_id != b.spec.run_id
    store.record_epoch(a, _record(1, 0.25))
    assert other.counts()[RunStatus.RUNNING] == 2
    assert other.epochs_table()[vocab.VAL_ACC].tolist() == [0.25]  # visible before the run ends
    store.record_epoch(a, _record(2, 0.5))
    store.finish(a, RunStatus.DONE, value=0.5)
    other.finish(b, RunStatus.DIVERGED, error="loss became nan")
    counts = _store(tmp_path).counts([r.run_id for r in runs])
    assert counts == {
        RunStatus.DONE: 1,
        RunStatus.RUNNING: 0,
        RunStatus.FAILED: 0,
        RunStatus.DIVERGED: 1,
        RunStatus.PRUNED: 0,
        RunStatus.PENDING: 2,
    }
    assert store.enqueue(runs) == 0  # diverged is final: enqueueing again adds nothing for it


@pytest.mark.unit
def test_two_workers_claiming_the_same_trial_at_once_one_wins(tmp_path: Path) -> None:
    """Threads of two clients claim from a 4-run queue at once: every run is claimed exactly once."""
    _store(tmp_path).enqueue(_runs(tmp_path))
    clients = [_store(tmp_path) for _ in range(4)]
    claimed: list[str] = []

    def claim_all(client: Store) -> None:
        while (lease := client.claim_next()) is not None:
            claimed.append(lease.spec.run_id)

    threads = [threading.Thread(target=claim_all, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(claimed) == sorted(r.run_id for r in _runs(tmp_path))


@pytest.mark.unit
def test_failed_runs_get_a_new_attempt_from_the_next_enqueue(tmp_path: Path) -> None:
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    lease = store.claim_next()
    store.finish(lease, RunStatus.FAILED, error="Traceback...\nValueError: boom")
    assert store.enqueue(runs) == 1
    row = store.runs_table().set_index(vocab.RUN_ID).loc[lease.spec.run_id]
    assert (row.status, row.attempt) == (RunStatus.PENDING, 2)


@pytest.mark.unit
def test_runs_csv_says_each_attempts_thread_count_where_a_run_changed_count(tmp_path: Path) -> None:
    """runs.csv's threads is the attempt that speaks for the run; threads_by_attempt appears once any run's
    attempts trained at different counts, in attempt order, empty for a run never trained.
    """
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    first = store.claim_next()
    store.record_info(first, {vocab.THREADS: 1})
    assert vocab.THREADS_BY_ATTEMPT not in store.runs_table()  # one count per run so far: no column
    store.requeue(first, "interrupted before the run finished")
    second = next(lease for lease in iter(store.claim_next, None) if lease.spec.run_id == first.spec.run_id)
    store.record_info(second, {vocab.THREADS: 2})
    table = store.runs_table().set_index(vocab.RUN_ID)
    assert table.loc[first.spec.run_id, vocab.THREADS_BY_ATTEMPT] == "1,2"
    assert table.loc[first.spec.run_id, vocab.THREADS] == 2
    assert set(table.drop(first.spec.run_id)[vocab.THREADS_BY_ATTEMPT]) == {""}


@pytest.mark.unit
@pytest.mark.parametrize("retries, retryable, expected", [(1, True, True), (0, True, False), (1, False, False)])
def test_the_retry_policy_decides_an_immediate_retry(
    tmp_path: Path, retries: int, retryable: bool, expected: bool
) -> None:
    store = _store(tmp_path)
    store.enqueue(_runs(tmp_path)[:1])
    lease = store.claim_next()
    store.finish(lease, RunStatus.FAILED, error="boom")
    assert store.retry(lease, RetryPolicy(retries), retryable) is expected
    assert store.counts()[RunStatus.PENDING] == int(expected)
    if expected:  # the second attempt, failed again, has used its retry
        again = store.claim_next()
        assert again.attempt == 2
        store.finish(again, RunStatus.FAILED, error="boom")
        assert not store.retry(again, RetryPolicy(retries), retryable)


@pytest.mark.unit
def test_the_shipped_heartbeat_and_worker_memory_cap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/workers.md: on a database a worker beats every 20 s and a run whose worker stops beating for
    the outage bound and 3 intervals more (128 s) is queued again; a worker is reused while its memory stays
    under 4 GiB, then replaced.
    """
    from sweep.run import worker

    for name in ("BATCHSWEEP_HEARTBEAT", "BATCHSWEEP_WORKER_MAX_MB"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("BATCHSWEEP_OUTAGE_SECONDS", raising=False)
    database = storage.open_storage(f"sqlite:///{tmp_path / 'store.db'}")
    assert isinstance(database, outage.RidingOut) and isinstance(database.rdb, optuna.storages.RDBStorage)
    # stale past the 60 s outage bound, the longest wait between two tries (8 s) and 3 heartbeats
    assert (database.heartbeat_interval, database.grace_period) == (20, 60 + 8 + 3 * 20)
    assert worker.max_rss_mb() == 4096  # MB: 4 GiB


@pytest.mark.system
def test_dead_workers_runs_are_requeued(tmp_path: Path) -> None:
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            f"""
from sweep.store import Store
s = Store.open({str(tmp_path / "journal.log")!r}, 's')
c = s.claim_next()
s.record_epoch(c, {_record(1, 0.1)!r})
print(c.spec.run_id)
""",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    )
    run_id = child.stdout.strip()
    assert store.counts()[RunStatus.RUNNING] == 1
    assert store.requeue_dead() == [Dead(run_id, 1)]  # the child process is gone
    assert store.may_come_back() is False  # nothing is running any more
    assert store.runs_table().set_index(vocab.RUN_ID).loc[run_id, vocab.STATUS] == RunStatus.PENDING
    assert store.requeue_dead() == []


@pytest.mark.unit
def test_a_live_workers_run_is_left_alone(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.enqueue(_runs(tmp_path))
    store.claim_next()  # claimed by this (live) process
    assert store.requeue_dead() == [] and store.may_come_back() is True


@pytest.mark.unit
def test_a_reused_pid_with_another_start_time_is_a_dead_worker(tmp_path: Path, monkeypatch) -> None:
    """The pid is alive (it is this very process) but started at another time: the worker that
    claimed the run is gone and its pid was reused, so the run is queued again.
    """
    import psutil

    started = psutil.Process().create_time()
    real = crash.worker_identity()
    assert (real[crash.WORKER_PID], real[crash.WORKER_STARTED]) == (os.getpid(), started)
    assert crash._alive(os.getpid(), started)  # this process, its real start time: alive
    assert not crash._alive(os.getpid(), started - 3600.0)  # same pid, started an hour earlier: another process
    store = _store(tmp_path)
    store.enqueue(_runs(tmp_path)[:1])
    monkeypatch.setattr(crash, "worker_identity", lambda: {**real, crash.WORKER_STARTED: started - 3600.0})
    lease = store.claim_next()
    assert store.requeue_dead() == [Dead(lease.spec.run_id, 1)]
    assert store.runs_table().set_index(vocab.RUN_ID).loc[lease.spec.run_id, vocab.STATUS] == RunStatus.PENDING


@pytest.mark.unit
def test_plain_optuna_reads_the_sweep(tmp_path: Path) -> None:
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    lease = store.claim_next()
    store.record_epoch(lease, _record(1, 0.25))
    store.finish(lease, RunStatus.DONE, value=0.25)
    backend = optuna.storages.journal.JournalFileBackend(str(tmp_path / "journal.log"))
    loaded = optuna.load_study(study_name="s", storage=optuna.storages.JournalStorage(backend))
    frame = loaded.trials_dataframe()
    assert len(frame) == 4
    done = frame[frame.state == "COMPLETE"]
    assert done.value.tolist() == [0.25]
    assert done.user_attrs_run_id.tolist() == [lease.spec.run_id]
    assert loaded.trials[done.index[0]].intermediate_values == {1: 0.25}


@pytest.mark.unit
def test_export_writes_tidy_tables(tmp_path: Path) -> None:
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    lease = store.claim_next()
    for epoch in (1, 2):
        store.record_epoch(lease, _record(epoch, 0.1 * epoch))
    store.finish(lease, RunStatus.DONE, value=0.2)
    runs_csv, epochs_csv = store.export_csv(tmp_path / "out")
    run_rows, epoch_rows = pd.read_csv(runs_csv), pd.read_csv(epochs_csv)
    assert len(run_rows) == 4 and sorted(run_rows.status) == [RunStatus.DONE] + [RunStatus.PENDING] * 3
    assert epoch_rows[[vocab.RUN_ID, vocab.EPOCH, vocab.VAL_ACC]].values.tolist() == [
        [lease.spec.run_id, 1, 0.1],
        [lease.spec.run_id, 2, 0.2],
    ]
    assert {"train.batch_size", "seed", *vocab.EPOCH_METRICS} <= set(epoch_rows.columns)
    assert run_rows.set_index(vocab.RUN_ID).loc[lease.spec.run_id, "final_val_acc"] == 0.2


def _cut_inside_epoch_two(journal: Path) -> None:
    data = journal.read_bytes()
    cut = data.rindex(b"\n", 0, data.index(b'"epoch_0002"')) + 1 + 30
    with open(journal, "rb+") as handle:  # a crash in the middle of writing epoch 2's record
        handle.truncate(cut)


@pytest.mark.unit
def test_a_journal_cut_mid_line_by_a_crash_loses_only_that_line(tmp_path: Path) -> None:
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    lease = store.claim_next()
    store.record_epoch(lease, _record(1, 0.25))
    store.record_epoch(lease, _record(2, 0.5))
    journal = tmp_path / "journal.log"
    _cut_inside_epoch_two(journal)
    reopened = _store(tmp_path)  # repairs the cut line before anything is appended
    assert journal.read_bytes().endswith(b"\n")
    trial = reopened.sweep.get_trials(deepcopy=False)[lease.trial.number]
    assert [r["epoch"] for r in epochs_of(trial)] == [1]  # epoch 1 kept, the cut epoch 2 dropped
    reopened.enqueue(runs)  # appending works and the journal stays readable
    assert len(_store(tmp_path).sweep.trials) == 4


@pytest.mark.unit
def test_a_line_cut_while_the_store_is_open_is_dropped_before_the_next_append(tmp_path: Path) -> None:
    """Another process dies mid-write while this one keeps the store open: the next append of this
    process does not glue its line onto the cut one (the journal would become unreadable).
    """
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    lease = store.claim_next()
    store.record_epoch(lease, _record(1, 0.25))
    with open(tmp_path / "journal.log", "ab") as handle:  # another process dies writing a record
        handle.write(b'{"op_code": 8, "worker_id": "dead", "trial_id": 0, "user_attr": {"epoch_0002"')
    other = store.claim_next()  # an append by the process that kept the store open
    store.record_epoch(other, _record(1, 0.75))
    fresh = _store(tmp_path)  # a journal that plain Optuna reads whole again
    assert [r[vocab.VAL_ACC] for r in epochs_of(fresh.sweep.get_trials()[other.trial.number])] == [0.75]


@pytest.mark.unit
def test_the_repair_waits_for_optunas_lock(tmp_path: Path) -> None:
    """A line being written by another process (which holds Optuna's lock) is not taken for a cut one."""
    journal = tmp_path / "journal.log"
    journal.write_bytes(b'{"op_code": 0, "worker_id": "w", "study_name": "s", "directions": [1]}\n')
    lock = optuna.storages.journal.JournalFileSymlinkLock(str(journal))
    lock.acquire()
    with open(journal, "ab") as handle:
        handle.write(b'{"op_code": 5, "worker_id"')  # half a line, still being written
    repaired: list[int] = []
    thread = threading.Thread(target=lambda: repaired.append(storage.RepairingJournal(str(journal)).repair()))
    thread.start()
    thread.join(timeout=0.5)
    assert thread.is_alive() and journal.read_bytes().endswith(b'"worker_id"')  # waiting for the writer
    with open(journal, "ab") as handle:
        handle.write(b': "w", "study_id": 0, "user_attr": {"a": 1}}\n')  # the writer finishes its line
    lock.release()
    thread.join(timeout=10)
    assert repaired == [0] and journal.read_bytes().count(b"\n") == 2


def _append_slowly(journal: str, count: int) -> None:
    """Another process's writer of the sweep study: plain Optuna, except that each append reaches the file
    in two writes under Optuna's lock (a large record on a slow disk), so the file ends mid-line meanwhile.
    """
    from optuna.storages.journal import BaseJournalBackend, JournalFileBackend, JournalFileSymlinkLock

    class SlowJournal(BaseJournalBackend):
        def __init__(self) -> None:
            self.file, self.lock = JournalFileBackend(journal), JournalFileSymlinkLock(journal)

        def read_logs(self, log_number_from: int) -> Any:
            return self.file.read_logs(log_number_from)

        def append_logs(self, logs: list[dict[str, Any]]) -> None:
            line = ("\n".join(json.dumps(log, separators=(",", ":")) for log in logs) + "\n").encode()
            self.lock.acquire()
            try:
                with open(journal, "ab") as handle:
                    handle.write(line[: len(line) // 2])
                    handle.flush()
                    time.sleep(0.005)
                    handle.write(line[len(line) // 2 :])
            finally:
                self.lock.release()

    study = optuna.load_study(study_name="s", storage=optuna.storages.JournalStorage(SlowJournal()))
    for i in range(count):
        study.enqueue_trial({}, user_attrs={"writer": "other", "i": i})


@pytest.mark.system  # a second process
def test_the_repair_and_appends_while_another_process_appends_lose_and_double_nothing(tmp_path: Path) -> None:
    journal = tmp_path / "journal.log"
    study = _store(tmp_path).sweep
    other = multiprocessing.get_context("spawn").Process(target=_append_slowly, args=(str(journal), 60))
    other.start()
    try:
        dropped, mine = [], 0
        while other.is_alive() or mine < 5:  # repair, append and read while the other process appends
            dropped.append(storage.RepairingJournal(str(journal)).repair())
            study.enqueue_trial({}, user_attrs={"writer": "this", "i": mine})
            mine += 1
            study.get_trials(deepcopy=False)
        other.join(timeout=60)
    finally:
        if other.is_alive():
            os.kill(other.pid, signal.SIGKILL)
    assert other.exitcode == 0 and set(dropped) == {0}  # never took the other's half-written line for a cut one
    assert all(json.loads(line) for line in journal.read_bytes().splitlines())
    trials = _store(tmp_path).sweep.get_trials()
    written = sorted((t.user_attrs["writer"], t.user_attrs["i"]) for t in trials)
    assert written == sorted([("other", i) for i in range(60)] + [("this", i) for i in range(mine)])


@pytest.mark.unit
def test_a_run_queued_by_a_newer_version_is_refused_not_claimed(tmp_path: Path) -> None:
    import json

    from sweep.config import UnknownSettings

    store, runs = _store(tmp_path), _runs(tmp_path)
    raw = json.loads(runs[0].to_json())
    raw["point"]["train"]["from_the_future"] = 1
    store.sweep.enqueue_trial(
        {vocab.RUN_ID: "x", vocab.ATTEMPT: 1}, user_attrs={vocab.RUN_ID: "x", vocab.ATTEMPT: 1, "spec": json.dumps(raw)}
    )
    with pytest.raises(UnknownSettings, match=r"train.from_the_future .*upgrade this machine"):
        store.claim_next()
    assert store.counts()[RunStatus.PENDING] == 1  # still queued, for a newer worker


@pytest.mark.unit
def test_records_inside_an_epoch_are_all_kept_in_step_order(tmp_path: Path) -> None:
    store, runs = _store(tmp_path), _runs(tmp_path)
    store.enqueue(runs)
    lease = store.claim_next()
    for epoch, step in ((0.5, 5), (1, 10), (1.5, 15), (2, 20)):  # eval_every_steps: 5 at 10 steps per epoch
        record = _record(epoch, 0.1)
        record.update(epoch=epoch, step=step)
        store.record_epoch(lease, record)
    trial = _store(tmp_path).sweep.get_trials(deepcopy=False)[lease.trial.number]
    assert [(r["epoch"], r["step"]) for r in epochs_of(trial)] == [(0.5, 5), (1, 10), (1.5, 15), (2, 20)]
    assert trial.intermediate_values == {1: 0.1, 2: 0.1}  # Optuna sees end-of-epoch values only


@pytest.mark.unit
def test_a_run_being_claimed_is_not_taken_for_a_dead_workers(tmp_path: Path, monkeypatch) -> None:
    """Under load a worker read a lease whose identity was half written (pid not yet there) and
    re-queued it as dead, 50 ms after it was claimed (benchmarks/speed/load.py, 4 workers). The identity is
    now written host last, and a trial without a host is judged only after CLAIM_SECONDS.
    """
    assert list(crash.worker_identity())[-1] == crash.WORKER_HOST
    store = _store(tmp_path)
    store.enqueue(_runs(tmp_path))
    waiting = store.sweep.get_trials(states=(optuna.trial.TrialState.WAITING,))[0]
    assert internals.take(store.sweep, waiting)
    internals.handle(store.sweep, waiting).set_user_attr(crash.WORKER_PID, 12345)  # being claimed: no host yet
    assert store.requeue_dead() == []
    monkeypatch.setattr(crash, "CLAIM_SECONDS", 0.0)  # as if the worker claiming it died long ago
    assert store.requeue_dead() == [Dead(waiting.user_attrs[vocab.RUN_ID], 1)]
    ended = store.sweep.get_trials()[waiting.number]
    assert (ended.state, ended.user_attrs[vocab.ERROR]) == (
        optuna.trial.TrialState.FAIL,
        "its worker died while claiming it",
    )
    attempts = [
        t.user_attrs[vocab.ATTEMPT]
        for t in store.sweep.get_trials()
        if t.user_attrs[vocab.RUN_ID] == waiting.user_attrs[vocab.RUN_ID]
    ]
    assert attempts == [1, 2]  # queued again, nothing lost


@pytest.mark.unit
def test_a_requeue_of_an_attempt_another_process_ended_adds_nothing(tmp_path: Path) -> None:
    store = _store(tmp_path)
    store.enqueue(_runs(tmp_path)[:1])
    lease = store.claim_next()
    assert store.requeue(lease, "first")
    assert not store.requeue(lease, "second")  # already ended: no third attempt
    assert [t.user_attrs[vocab.ATTEMPT] for t in store.sweep.get_trials()] == [1, 2]


@pytest.mark.unit
def test_workers_claim_runs_of_the_graph_they_hold_then_one_nobody_trains(tmp_path: Path) -> None:
    """`mates.claim_for`: a worker's next run reuses its compiled model (same batch size here) if one is
    queued; a worker with none takes a graph no other worker is training, so two workers on a grid of
    two batch sizes x two seeds build two graphs in all instead of two each.
    """
    from sweep.run.mates import claim_for

    store, runs = _store(tmp_path), _runs(tmp_path)  # bs8-s0, bs8-s1, bs64-s0, bs64-s1
    store.enqueue(runs)
    other = _store(tmp_path)  # a second worker on the same journal
    first = claim_for(store, None)
    second = claim_for(other, None)
    assert first is not None and second is not None
    assert (first.spec.point.train.batch_size, second.spec.point.train.batch_size) == (8, 64)
    store.finish(first, RunStatus.DONE, value=0.5)
    other.finish(second, RunStatus.DONE, value=0.5)
    mine = claim_for(other, second.spec)  # the queue's next is bs8-s1; this worker holds batch 64's graph
    assert mine is not None and (mine.spec.point.train.batch_size, mine.spec.seed) == (64, 1)
    again = claim_for(store, first.spec)
    assert again is not None and (again.spec.point.train.batch_size, again.spec.seed) == (8, 1)
    for done, client in ((mine, other), (again, store)):
        client.finish(done, RunStatus.DONE, value=0.5)
    assert claim_for(store, again.spec) is None
