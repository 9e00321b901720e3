"""The store and the coordinator under faults: two `run`s at once, duplicate attempts, a full disk, a newer store,
a worker printing bytes that are not UTF-8, a worker that exits 0 holding a run.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import optuna
import pandas as pd
import pytest
import services
from conftest import REPO, TINY_GRID, run_cli, write_grid

from sweep import cli, vocab
from sweep.config import load_grid
from sweep.config.plan import plan
from sweep.run import events, resume
from sweep.store import FORMAT_ATTR, STORE_FORMAT, VERSION_ATTR, Store, internals
from sweep.vocab import RunStatus


def _completions(journal: Path, name: str) -> pd.Series:
    """COMPLETE trials per run id, read with plain Optuna."""
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    trials = optuna.load_study(study_name=name, storage=storage).get_trials()
    done = [t.user_attrs["run_id"] for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    return pd.Series(done, dtype=object).value_counts()


@pytest.mark.unit
def test_a_duplicated_attempt_is_never_trained(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "j.log", "tiny")
    spec = plan(load_grid(write_grid(tmp_path, TINY_GRID)))[0]
    for _ in range(2):  # what two `run`s enqueueing at the same moment can leave behind
        store.sweep.enqueue_trial(
            {vocab.RUN_ID: spec.run_id, vocab.ATTEMPT: 1},
            user_attrs={vocab.RUN_ID: spec.run_id, vocab.ATTEMPT: 1, "spec": spec.to_json()},
        )
    first = store.claim_next()
    assert first.trial.number == 0
    assert store.claim_next() is None  # the copy is set aside, not handed out
    copy = store.sweep.get_trials()[1]
    assert (copy.state, copy.user_attrs[vocab.STATUS]) == (optuna.trial.TrialState.FAIL, RunStatus.DUPLICATE)
    assert store.counts()[RunStatus.RUNNING] == 1


@pytest.mark.system
def test_two_runs_of_one_sweep_at_once_cooperate_and_train_each_run_once(tmp_path: Path) -> None:
    write_grid(tmp_path, TINY_GRID.replace("seeds: [0]", "seeds: [0, 1]"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-m", "sweep", "run", "grid.yaml"]
    procs = [
        subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outputs
    assert all("Traceback" not in err for _, err in outputs)
    completions = _completions(tmp_path / "results" / "tiny" / vocab.JOURNAL_FILE, "tiny")
    assert len(completions) == 4 and completions.eq(1).all()  # every run, exactly once
    runs = pd.read_csv(tmp_path / "results" / "tiny" / vocab.RUNS_CSV)
    assert sorted(runs.status) == [RunStatus.DONE] * 4


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 16 MB tmpfs: a real file system that really fills up (tests run as root, as CI does); room for a
    tiny sweep, its report and figures, before the test fills the rest.
    """
    services.require("mount")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)], check=True)
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.mark.system
def test_a_full_disk_stops_the_sweep_with_advice_and_the_store_reopens(tmp_path: Path, small_disk: Path) -> None:
    write_grid(tmp_path, TINY_GRID)
    results = small_disk / "tiny"
    assert run_cli("run", "grid.yaml", "--results", str(results), cwd=tmp_path).returncode == 0  # room to spare
    bigger = tmp_path / "bigger.yaml"
    bigger.write_text((tmp_path / "grid.yaml").read_text().replace("seeds: [0]", "seeds: [0, 1, 2]"))
    filler = small_disk / "filler"
    free = os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize
    filler.write_bytes(b"\0" * (free - 6_000))  # room for the new runs' queue entries, not their epochs
    full = run_cli("run", "bigger.yaml", "--results", str(results), cwd=tmp_path)
    assert full.returncode == 1, full.stdout + full.stderr
    assert "no space left on device" in full.stderr and "run the same command again" in full.stderr
    assert "Traceback" not in full.stderr
    filler.unlink()
    again = run_cli("run", "bigger.yaml", "--results", str(results), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    completions = _completions(results / vocab.JOURNAL_FILE, "tiny")
    assert len(completions) == 6 and completions.eq(1).all()


@pytest.mark.unit
def test_a_store_from_a_newer_version_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_grid(tmp_path, TINY_GRID)
    journal = tmp_path / "results" / "tiny" / vocab.JOURNAL_FILE
    store = Store.open(journal, "tiny")
    assert store.sweep.user_attrs[FORMAT_ATTR] == STORE_FORMAT
    store.sweep.set_user_attr(FORMAT_ATTR, STORE_FORMAT + 1)
    store.sweep.set_user_attr(VERSION_ATTR, "9.0.0")
    before = journal.read_bytes()
    monkeypatch.chdir(tmp_path)
    for command in ("run", "status"):
        assert cli.main([command, "grid.yaml"]) == 2
        refused = capsys.readouterr().err
        assert refused.count("\n") == 1, refused
        assert "written by batchsweep 9.0.0 (store format 3)" in refused and "upgrade batchsweep" in refused
    assert journal.read_bytes() == before


@pytest.mark.unit
def test_a_failed_or_diverged_run_leaves_no_checkpoint_like_a_done_one(tmp_path: Path) -> None:
    """A failed run is retried from epoch 0 and a diverged one never trains again: neither checkpoint
    is kept (nor a done run's); an interrupted run keeps its checkpoint to resume from, as --keep-models keeps all.
    """
    from sweep.run import endings

    store = Store.open(tmp_path / "j.log", "tiny")
    store.enqueue(plan(load_grid(write_grid(tmp_path, TINY_GRID.replace("seeds: [0]", "seeds: [0, 1]"))))[:3])
    places = resume.Places(tmp_path / "checkpoints")
    places.checkpoints.mkdir()
    ended = {}
    for status in (RunStatus.FAILED, RunStatus.DIVERGED, RunStatus.DONE):
        lease = store.claim_next()
        path = places.checkpoint(lease.spec.run_id)
        path.write_bytes(b"a checkpoint")
        last = {vocab.EPOCH: 1.0, lease.metric: 0.5}
        endings.end_run(store, lease, lambda event: None, places, endings.Ending(status, "boom", 2, last), None)
        ended[status] = path.exists()
    assert ended == {RunStatus.FAILED: False, RunStatus.DIVERGED: False, RunStatus.DONE: False}
    assert list(places.checkpoints.iterdir()) == []
    kept = places.checkpoint("interrupted")
    kept.write_bytes(b"a checkpoint")
    resume.drop_checkpoint(places, "interrupted", RunStatus.INTERRUPTED)
    assert kept.exists()
    with_models = resume.Places(places.checkpoints, tmp_path / "models")
    for status in (RunStatus.FAILED, RunStatus.DIVERGED, RunStatus.DONE):
        resume.drop_checkpoint(with_models, "interrupted", status)
    assert kept.exists()


@pytest.mark.system
def test_four_workers_on_one_journal_train_every_run_exactly_once(tmp_path: Path) -> None:
    write_grid(
        tmp_path,
        """\
        name: load
        seeds: [0]
        base:
          data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 9}
          train: {epochs: 1, batch_size: 8}
        grid:
          data.seed: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]
    """,
    )
    result = run_cli("run", "grid.yaml", "--workers", "4", cwd=tmp_path, timeout=900)
    assert result.returncode == 0, result.stderr
    completions = _completions(tmp_path / "results" / "load" / vocab.JOURNAL_FILE, "load")
    assert len(completions) == 16 and completions.eq(1).all()
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "results" / "load" / vocab.JOURNAL_FILE))
    )
    workers = {t.user_attrs["worker_pid"] for t in optuna.load_study(study_name="load", storage=storage).get_trials()}
    assert len(workers) >= 2  # the queue was shared (a slow-starting worker may find it empty)


@pytest.mark.system  # fault injection: two fresh models (about 12 s)
def test_a_run_that_raises_mid_training_is_recorded_failed_with_its_epochs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An error inside epoch 2 (here injected into the evaluation) fails the run; epoch 1 stays recorded,
    and its compiled model never goes back to the worker's session, so no later run reuses the broken one;
    the next run's does.
    """
    from sweep.run import driver, resume
    from sweep.train import single
    from sweep.train.session import Session

    store = Store.open(tmp_path / "j.log", "tiny")
    store.enqueue(plan(load_grid(write_grid(tmp_path, TINY_GRID))))
    places = resume.places(store.target, store.name)
    evaluate = single.Single.evaluate

    def broken_in_epoch_two(self: single.Single, pairs: list) -> list[dict[str, float]]:
        steps_per_epoch = math.ceil(len(self.split.y_train) / self.spec.point.train.batch_size)
        if int(self.model.optimizer.iterations.numpy()) > steps_per_epoch:
            raise RuntimeError("injected: evaluation broke in epoch 2")
        return evaluate(self, pairs)

    said: list[events.Event] = []
    monkeypatch.setattr(single.Single, "evaluate", broken_in_epoch_two)
    session = Session()
    [(status, retryable)] = driver.train(store, [store.claim_next()], said.append, places, session)
    assert (status, retryable) == (RunStatus.FAILED, True)
    failed = store.sweep.get_trials()[0]
    assert failed.state == optuna.trial.TrialState.FAIL and failed.user_attrs[vocab.STATUS] == RunStatus.FAILED
    assert "injected: evaluation broke in epoch 2" in failed.user_attrs[vocab.ERROR]
    assert [e.record[vocab.EPOCH] for e in said if isinstance(e, events.EpochDone)] == [1]
    assert isinstance(said[-1], events.RunEnded) and said[-1].status == RunStatus.FAILED
    assert session.compiled is None  # its compiled model is dropped, not handed to the next run
    monkeypatch.setattr(single.Single, "evaluate", evaluate)
    said.clear()
    assert driver.train(store, [store.claim_next()], said.append, places, session) == [(RunStatus.DONE, True)]
    assert [e.record[vocab.EPOCH] for e in said if isinstance(e, events.EpochDone)] == [1, 2]
    assert session.compiled is not None  # a done run's model is kept for the next run of its graph


@pytest.mark.system  # fault injection: two fresh models (about 11 s)
def test_a_run_taken_back_by_the_store_while_training_ends_quietly(tmp_path: Path) -> None:
    """If the store ends an attempt while its worker still trains it (a worker presumed dead), the
    worker drops that attempt without a traceback and goes on; the next attempt is queued.
    """
    from sweep.run import driver, resume
    from sweep.train.session import Session

    store = Store.open(tmp_path / "j.log", "tiny")
    store.enqueue(plan(load_grid(write_grid(tmp_path, TINY_GRID))))
    places = resume.places(store.target, store.name)
    session = Session()
    lease = store.claim_next()
    other = Store.open(tmp_path / "j.log", "tiny")  # the process that presumes this worker dead
    said: list[events.Event] = []

    def presumed_dead_after_epoch_one(event: events.Event) -> None:
        said.append(event)
        if isinstance(event, events.EpochDone):
            trial = other.sweep.get_trials()[lease.trial.number]
            assert other.requeue(
                replace(lease, trial=internals.handle(other.sweep, trial), study=other.sweep), "presumed dead (test)"
            )

    taken_back = driver.train(store, [lease], presumed_dead_after_epoch_one, places, session)
    assert taken_back == [(RunStatus.INTERRUPTED, False)] and session.compiled is None
    assert isinstance(said[-1], events.RunInterrupted) and "queued the run again" in said[-1].reason
    attempts = {
        t.user_attrs[vocab.ATTEMPT]: t.state
        for t in store.sweep.get_trials()
        if t.user_attrs[vocab.RUN_ID] == lease.spec.run_id
    }
    assert attempts == {1: optuna.trial.TrialState.FAIL, 2: optuna.trial.TrialState.WAITING}
    assert driver.train(store, [store.claim_next()], said.append, places, session)[0][0] == RunStatus.DONE  # goes on


LATIN1 = """\
import sys

import keras


class Latin1(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        sys.stdout.buffer.write(b"caf\\xe9 au lait\\n")  # not UTF-8: one byte the coordinator cannot decode
        sys.stdout.flush()


def make():
    return Latin1()
"""


@pytest.mark.system
def test_a_callback_printing_bytes_that_are_not_utf8_does_not_hang_run(tmp_path: Path) -> None:
    """The relay decodes with replacement: `run` ends with its CSVs and report; the byte reaches the log."""
    write_grid(tmp_path, TINY_GRID.replace("train: {", 'train: {callbacks: ["latin1.py:make"], '))
    (tmp_path / "latin1.py").write_text(LATIN1)
    done = run_cli("run", "grid.yaml", cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    results = tmp_path / "results" / "tiny"
    assert len(pd.read_csv(results / vocab.RUNS_CSV)) == 2 and (results / "report.html").is_file()
    logs = "".join(p.read_text(encoding="utf-8") for p in (results / "logs").glob("worker-*.log"))
    assert "caf\ufffd au lait" in logs


@pytest.mark.system
def test_the_coordinator_sees_a_worker_exit_that_no_relay_reports() -> None:
    """A worker whose relay never says it ended (none is started here) is found by waiting on the process."""
    import queue

    from sweep.run import coordinator

    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    try:
        item = coordinator._next(queue.Queue(), [proc], {})
    finally:
        proc.wait()
    assert item == (proc, 3)


QUITTER = """\
import os
from pathlib import Path

import keras


class Quit(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        marker = Path("quit-once")
        if not marker.exists():  # the first attempt only: its replacement trains the run to the end
            marker.write_text("")
            os._exit(0)


def make():
    return Quit()
"""


@pytest.mark.system
def test_a_worker_that_exits_0_holding_a_run_is_replaced_and_the_run_finishes(tmp_path: Path) -> None:
    write_grid(tmp_path, TINY_GRID.replace("train: {", 'train: {callbacks: ["quit.py:make"], '))
    (tmp_path / "quit.py").write_text(QUITTER)
    done = run_cli("run", "grid.yaml", "--workers", "1", cwd=tmp_path, timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"worker pid \d+ exit code 0; starting a new worker in its place", done.stdout), done.stdout
    runs = pd.read_csv(tmp_path / "results" / "tiny" / vocab.RUNS_CSV)
    assert (runs[vocab.STATUS] == RunStatus.DONE.value).all() and len(runs) == 2


@pytest.mark.system
def test_a_full_disk_under_the_checkpoints_requeues_the_run_and_is_no_death(tmp_path: Path, small_disk: Path) -> None:
    """The checkpoints on a full disk, the store on another: the run is queued again at once with the write that
    failed named, its next attempt carries no worker death, and the same command finishes it once space is back.
    """
    write_grid(tmp_path, TINY_GRID)
    checkpoints = small_disk / "checkpoints"
    checkpoints.mkdir()
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (os.statvfs(small_disk).f_bavail * os.statvfs(small_disk).f_frsize - 4096))
    env = {"BATCHSWEEP_CHECKPOINTS": str(checkpoints)}
    full = run_cli("run", "grid.yaml", "--workers", "1", cwd=tmp_path, **env)
    assert full.returncode == 1, full.stdout + full.stderr
    assert f"no space left on device: {checkpoints}/" in full.stdout + full.stderr and "Traceback" not in full.stderr
    journal = tmp_path / "results" / "tiny" / vocab.JOURNAL_FILE
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    trials = optuna.load_study(study_name="tiny", storage=storage).get_trials()
    ended = [t for t in trials if t.user_attrs.get(vocab.STATUS) == RunStatus.INTERRUPTED.value]
    assert ended and all(f"no space left on device writing {checkpoints}/" in t.user_attrs[vocab.ERROR] for t in ended)
    assert not [t for t in trials if t.user_attrs.get(vocab.WORKER_DEATHS)]  # no death counted
    filler.unlink()
    again = run_cli("run", "grid.yaml", cwd=tmp_path, **env)
    assert again.returncode == 0, again.stdout + again.stderr
    completions = _completions(journal, "tiny")
    assert len(completions) == 2 and completions.eq(1).all()
