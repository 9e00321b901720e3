"""Crash safety with real processes: kill -9 mid-epoch, then the sweep finishes with every run done once.

Journal store: the coordinator and its worker are killed; the same command again re-queues the
dead worker's run (pid + start time) and finishes. PostgreSQL: a real server on a Unix socket,
two workers, one killed; the survivor re-queues the dead one's run after its heartbeat goes stale.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import optuna
import pandas as pd
import psutil
import pytest
import services
from conftest import TINY_GRID, cli_env, run_cli, start_cli, write_grid

from sweep import vocab
from sweep.exits import EXIT_ORPHANED
from sweep.store import Store, epochs_of, status_of
from sweep.vocab import RunStatus

pytestmark = pytest.mark.system

GRID = """\
    name: crash
    seeds: [0, 1]
    base:
      data: {classes: 6, samples_per_class: 60, image_size: 16}
      train: {epochs: 3, batch_size: 4}
    grid:
      train.lr: [0.001, 0.002]
"""


def _trials(target: str | Path, name: str, states: tuple | None = None) -> list[optuna.trial.FrozenTrial]:
    """The sweep's trials, read through a store closed at once: a test that polls a database store
    must hand its connections back, or the server runs out of them.
    """
    with Store.open(target, name, create=False) as store:
        return store.sweep.get_trials(deepcopy=False, states=states)


def _wait_for_running_epoch(trials_of, timeout: float = 180) -> optuna.trial.FrozenTrial:
    """A RUNNING trial with at least one finished epoch (so the kill lands mid-run, mid-epoch)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            running = trials_of(states=(optuna.trial.TrialState.RUNNING,))
        except KeyError:  # the coordinator has not created the study yet
            running = []
        for trial in running:
            if epochs_of(trial) and "worker_pid" in trial.user_attrs:
                return trial
        time.sleep(0.3)
    raise AssertionError("no run reached its first epoch in time")


def _assert_each_run_done_once(trials: list[optuna.trial.FrozenTrial], runs: int, epochs: int) -> None:
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    per_run = Counter(t.user_attrs["run_id"] for t in complete)
    assert len(per_run) == runs and set(per_run.values()) == {1}, per_run
    assert all([r["epoch"] for r in epochs_of(t)] == list(range(1, epochs + 1)) for t in complete)


def test_kill_9_of_coordinator_and_worker_then_rerun_finishes_exactly_once(
    tmp_path: Path, started: list[subprocess.Popen]
) -> None:
    write_grid(tmp_path, GRID)
    journal = tmp_path / "results" / "crash" / "journal.log"
    coordinator = start_cli(started, "run", "grid.yaml", cwd=tmp_path)
    trials_of = lambda **kw: _trials(journal, "crash", **kw)  # noqa: E731
    victim = _wait_for_running_epoch(trials_of)
    os.kill(victim.user_attrs["worker_pid"], signal.SIGKILL)
    coordinator.kill()
    coordinator.wait()
    assert trials_of()[victim.number].state == optuna.trial.TrialState.RUNNING

    again = run_cli("run", "grid.yaml", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"re-queued 1 run(s) whose worker died: {victim.user_attrs['run_id']}" in again.stdout
    trials = trials_of()
    _assert_each_run_done_once(trials, runs=4, epochs=3)
    killed = trials[victim.number]
    assert killed.state == optuna.trial.TrialState.FAIL and killed.user_attrs["status"] == "interrupted"
    assert epochs_of(killed)  # the records it made before the kill are kept, not lost


def test_a_worker_whose_coordinator_is_already_gone_exits_at_once_without_claiming(tmp_path: Path) -> None:
    """A worker started by a coordinator arms its parent-death signal itself, after it starts: one whose
    $BATCHSWEEP_PARENT_PID is not its parent (the coordinator died before the signal was armed) exits
    at once, with one line on stderr, and leaves the store as it found it.
    """
    write_grid(tmp_path, TINY_GRID)
    queued = run_cli("run", "grid.yaml", "--no-train", cwd=tmp_path)
    assert queued.returncode == 0, queued.stdout + queued.stderr
    journal = tmp_path / "results" / "tiny" / vocab.JOURNAL_FILE
    before = journal.read_bytes()
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    worker = subprocess.run(
        [sys.executable, "-m", "sweep", "worker", "--storage", str(journal), "--study", "tiny"],
        cwd=tmp_path,
        env=cli_env(**{vocab.PARENT_PID_ENV: gone.stdout.strip()}),  # an exited process: not its parent
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert worker.returncode == EXIT_ORPHANED, worker.stdout + worker.stderr
    assert worker.stderr.splitlines() == [
        f"error: the coordinator that started this worker has exited; exiting without claiming a run "
        f"(exit {EXIT_ORPHANED})"
    ]
    assert worker.stdout == ""  # not one event
    assert journal.read_bytes() == before
    assert {t.state for t in Store.open(journal, "tiny", create=False).sweep.get_trials()} == {
        optuna.trial.TrialState.WAITING
    }


# A pause of 30 s at the start of epoch 2: a worker that learns of its coordinator's death only
# from the broken pipe of its next event would re-queue its run after it, not at once.
PAUSE = """\
import time

import keras


class Pause(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 1:
            time.sleep(30)


def make():
    return Pause()
"""


def test_kill_9_of_the_coordinator_alone_stops_its_worker_which_requeues_its_run(
    tmp_path: Path, started: list[subprocess.Popen]
) -> None:
    """The worker's parent-death signal (SIGTERM, armed by the worker at its start): when `run` is
    killed with kill -9 its worker re-queues its run at once, mid-pause, and exits.
    """
    write_grid(
        tmp_path,
        GRID.replace("seeds: [0, 1]", "seeds: [0]")
        .replace("batch_size: 4}", 'batch_size: 4, callbacks: ["pause.py:make"]}')
        .replace("train.lr: [0.001, 0.002]", "train.lr: [0.001]"),
    )
    (tmp_path / "pause.py").write_text(PAUSE)
    journal = tmp_path / "results" / "crash" / "journal.log"
    coordinator = start_cli(started, "run", "grid.yaml", cwd=tmp_path)
    trials_of = lambda **kw: _trials(journal, "crash", **kw)  # noqa: E731
    victim = _wait_for_running_epoch(trials_of)  # epoch 1 recorded: the worker pauses at epoch 2's start
    worker = psutil.Process(victim.user_attrs["worker_pid"])
    try:
        coordinator.kill()
        coordinator.wait()
        killed = time.monotonic()
        while _alive(worker):  # an orphan's new parent may never reap it: a zombie has ended too
            assert time.monotonic() - killed < 15, "the worker went on after its coordinator died"
            time.sleep(0.1)
    finally:
        with contextlib.suppress(psutil.NoSuchProcess):
            worker.kill()  # an orphan (the test failed): not left training
    stopped = trials_of()[victim.number]
    assert stopped.state == optuna.trial.TrialState.FAIL and stopped.user_attrs["status"] == "interrupted"
    assert stopped.user_attrs["error"] == "interrupted before the run finished"  # by the worker itself
    assert len(epochs_of(stopped)) == 1


def test_a_run_resumed_by_a_later_command_goes_on_at_the_thread_count_it_began_at(
    tmp_path: Path, started: list[subprocess.Popen]
) -> None:
    """Its first attempt trains at 1 thread; killed, the one run left would get a worker with every core (2 here):
    it gets 1, and its records are those of an uninterrupted run at 1 thread, bit for bit.
    """
    one_run = GRID.replace("seeds: [0, 1]", "seeds: [0]").replace("train.lr: [0.001, 0.002]", "train.lr: [0.001]")
    for folder in ("cut", "whole"):
        (tmp_path / folder).mkdir()
        write_grid(tmp_path / folder, one_run)
    whole = run_cli("run", "grid.yaml", cwd=tmp_path / "whole", BATCHSWEEP_THREADS="1")
    assert whole.returncode == 0, whole.stdout + whole.stderr
    journal = tmp_path / "cut" / "results" / "crash" / "journal.log"
    coordinator = start_cli(started, "run", "grid.yaml", cwd=tmp_path / "cut", BATCHSWEEP_THREADS="1")
    victim = _wait_for_running_epoch(lambda **kw: _trials(journal, "crash", **kw))
    checkpoint = journal.parent / "checkpoints" / f"{victim.user_attrs['run_id']}.npz"
    deadline = time.monotonic() + 60
    while not checkpoint.exists():  # the record and its checkpoint are two writes: killed after both, it resumes
        assert time.monotonic() < deadline, "no checkpoint written after the first record"
        time.sleep(0.05)
    os.kill(victim.user_attrs["worker_pid"], signal.SIGKILL)
    coordinator.kill()
    coordinator.wait()
    again = subprocess.run(
        [sys.executable, "-m", "sweep", "run", "grid.yaml"],
        cwd=tmp_path / "cut",
        env=cli_env(drop=("BATCHSWEEP_THREADS",)),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 queued run(s) began training before; 1 at 1 thread(s), the count each worker takes" in again.stdout
    runs = pd.read_csv(tmp_path / "cut" / "results" / "crash" / "runs.csv")
    assert list(runs["threads"]) == [1] and "threads_by_attempt" not in runs, runs.T
    resumed, reference = (pd.read_csv(tmp_path / f / "results" / "crash" / "epochs.csv") for f in ("cut", "whole"))
    numbers = ["train_loss", "val_loss", "train_acc", "val_acc"]
    assert int(runs["resumed_from_epoch"].iloc[0]) >= 1
    pd.testing.assert_frame_equal(resumed[numbers], reference[numbers], check_exact=True)


def _alive(process: psutil.Process) -> bool:
    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture()
def postgres_url():
    """A throwaway PostgreSQL server on a Unix socket only (no TCP port, so none another process can take
    first), run as the postgres user when we are root. The URL names the socket's folder:
    postgresql://postgres@/sweeps?host=FOLDER&port=5432.

    Its folder is made directly in /tmp: pytest's tmp folders are private to root (mode 700),
    which the postgres user cannot enter.
    """
    services.require("postgres")
    bin_ = services.postgres_bin()
    assert bin_ is not None  # require() returned: it is here
    folder = Path(tempfile.mkdtemp(prefix="batchsweep-pg-"))
    data, port = folder / "data", 5432  # the socket's name, .s.PGSQL.5432, in a folder of its own
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_pg:
        shutil.chown(folder, "postgres")

    def run(*cmd: object, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run([*as_pg, *map(str, cmd)], capture_output=True, text=True)
        assert done.returncode == 0 or not check, f"{cmd[0]}: {done.stdout}{done.stderr}"
        return done

    try:
        run(bin_ / "initdb", "-D", data, "-A", "trust", "-U", "postgres")
        options = f"-p {port} -k {folder} -c listen_addresses=''"
        run(bin_ / "pg_ctl", "-D", data, "-l", folder / "log", "-w", "start", "-o", options)
        import psycopg  # not createdb: a client program, which PATH may not hold beside initdb

        with psycopg.connect(host=str(folder), port=port, user="postgres", dbname="postgres", autocommit=True) as db:
            db.execute("CREATE DATABASE sweeps")
        yield f"postgresql://postgres@/sweeps?host={folder}&port={port}"
    finally:
        pid_file = data / "postmaster.pid"
        if pid_file.exists():  # started, even if it never became ready
            stopped = run(bin_ / "pg_ctl", "-D", data, "-m", "immediate", "stop", check=False)
            if stopped.returncode != 0 and pid_file.exists():  # then by its pid
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def test_postgres_two_workers_one_killed_every_run_done_once(
    tmp_path: Path, started: list[subprocess.Popen], postgres_url: str
) -> None:
    write_grid(tmp_path, GRID)
    enqueue = start_cli(
        started, "run", "grid.yaml", "--storage", postgres_url, "--workers", "2", cwd=tmp_path, BATCHSWEEP_HEARTBEAT="1"
    )
    trials_of = lambda **kw: _trials(postgres_url, "crash", **kw)  # noqa: E731
    victim = _wait_for_running_epoch(trials_of)
    os.kill(victim.user_attrs["worker_pid"], signal.SIGKILL)
    output, _ = enqueue.communicate(timeout=600)
    # the killed worker's run is re-queued at once, and the sweep finishes it
    assert f"re-queued 1 run(s) whose worker died: {victim.user_attrs['run_id']}" in output
    assert enqueue.returncode == 0, output
    trials = trials_of()
    _assert_each_run_done_once(trials, runs=4, epochs=3)
    killed = trials[victim.number]
    assert killed.state == optuna.trial.TrialState.FAIL and status_of(killed) == RunStatus.INTERRUPTED
    redone = [
        t
        for t in trials
        if t.state == optuna.trial.TrialState.COMPLETE and t.user_attrs["run_id"] == victim.user_attrs["run_id"]
    ]
    assert redone[0].user_attrs["worker_pid"] != victim.user_attrs["worker_pid"]  # another worker finished it


DEATH_GRID = """\
    name: deaths
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 2, batch_size: 8}
    grid:
      train.callbacks: [[], ["killer.py:make"]]
"""
KILLER = """\
import os
import signal

import keras


class Killer(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        os.kill(os.getpid(), signal.SIGKILL)


def make():
    return Killer()
"""


@pytest.mark.parametrize("store", ["journal", "postgres"])
def test_a_run_that_kills_its_worker_every_time_fails_after_the_cap_and_the_sweep_finishes(
    tmp_path: Path, request: pytest.FixtureRequest, store: str
) -> None:
    """Out of memory on every attempt, as kill -9: with --max-requeues 1 the run is queued again once,
    a new worker takes the dead one's place each time, the second death leaves the run failed with how
    its worker died, and the other run of the sweep is done.
    """
    write_grid(tmp_path, DEATH_GRID)
    (tmp_path / "killer.py").write_text(KILLER)
    storage = ["--storage", request.getfixturevalue("postgres_url")] if store == "postgres" else []
    done = run_cli(
        "run", "grid.yaml", "--workers", "1", "--max-requeues", "1", *storage, cwd=tmp_path, BATCHSWEEP_HEARTBEAT="1"
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output  # a run failed: the sweep's exit code says so
    assert output.count("killed by SIGKILL; starting a new worker in its place") >= 1, output
    runs = pd.read_csv(tmp_path / "results" / "deaths" / vocab.RUNS_CSV).set_index(vocab.RUN_ID)
    killer = next(r for r in runs.index if "killer" in r)
    assert runs.loc[killer, vocab.STATUS] == RunStatus.FAILED and runs.loc[killer, vocab.ATTEMPT] == 2
    error = runs.loc[killer, vocab.ERROR]
    assert re.fullmatch(r"worker died 2 times \(last: worker pid \d+ on .+ died mid-run: killed by SIGKILL\)", error)
    assert f"FAILED {killer}: {error}" in output
    other = runs.drop(index=killer)
    assert other[vocab.STATUS].tolist() == [RunStatus.DONE] and other["epochs_done"].tolist() == [2]


HANG = """\
import time

import keras


class Hang(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        time.sleep(3600)


def make():
    return Hang()
"""


def test_a_run_that_hangs_is_stopped_by_the_watchdog_and_counts_as_a_death(tmp_path: Path) -> None:
    """A run that makes no record (a callback that never returns) keeps its worker alive for ever; the
    watchdog stops the worker past its bound (here 10x a floor of 0.5 s, before any record) and, with
    --max-requeues 0, the run is left failed with the watchdog's reason, in well under the hour.
    """
    write_grid(tmp_path, DEATH_GRID.replace('[[], ["killer.py:make"]]', '[["hang.py:make"]]'))
    (tmp_path / "hang.py").write_text(HANG)
    started = time.monotonic()
    done = run_cli("run", "grid.yaml", "--max-requeues", "0", cwd=tmp_path, BATCHSWEEP_STALL_FLOOR="0.5")
    assert time.monotonic() - started < 120
    assert done.returncode == 1, done.stdout + done.stderr
    runs = pd.read_csv(tmp_path / "results" / "deaths" / vocab.RUNS_CSV)
    assert runs[vocab.STATUS].tolist() == [RunStatus.FAILED]
    assert re.fullmatch(
        r"worker died 1 time \(last: no record for \d+ s \(bound 5 s: 10x the floor of 0.5 s, before this "
        r"worker's first record\); the watchdog stopped its worker\)",
        runs[vocab.ERROR][0],
    ), runs[vocab.ERROR][0]


def test_runs_queueing_on_a_new_database_at_the_same_moment_all_succeed(tmp_path: Path, postgres_url: str) -> None:
    """Eight `run --no-train` started together on a database no sweep has used (the tasks of a Slurm array
    starting at once): Optuna's tables are made once, every command succeeds, each run is queued once.
    """
    write_grid(tmp_path, GRID)
    command = [sys.executable, "-m", "sweep", "run", "grid.yaml", "--storage", postgres_url, "--no-train"]
    procs = [
        subprocess.Popen(
            command, cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for _ in range(8)
    ]
    try:
        outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    assert [proc.returncode for proc in procs] == [0] * 8, "\n".join(outputs)
    waiting = _trials(postgres_url, "crash", states=(optuna.trial.TrialState.WAITING,))
    assert sorted(Counter(t.user_attrs["run_id"] for t in waiting).values()) == [1, 1, 1, 1]


def test_a_closed_database_store_hands_its_connections_back(postgres_url: str) -> None:
    """A process that opens a store again and again (`status` in a loop, a polling test) must not run
    the server out of connections: each closed store leaves none behind.
    """
    import psycopg

    Store.open(postgres_url, "conn", create=True).close()
    query = urlsplit(postgres_url).query
    socket = parse_qs(query)["host"][0]
    with psycopg.connect(host=socket, port=5432, user="postgres", dbname="postgres", autocommit=True) as db:
        count = "SELECT count(*) FROM pg_stat_activity WHERE datname = 'sweeps'"
        before = db.execute(count).fetchone()[0]
        for _ in range(30):
            with Store.open(postgres_url, "conn", create=False) as store:
                assert store.counts()[RunStatus.PENDING] == 0
        # a closed connection's server process leaves pg_stat_activity a moment later: wait for it, a little
        deadline, left = time.monotonic() + 10, db.execute(count).fetchone()[0]
        while left > before and time.monotonic() < deadline:
            time.sleep(0.2)
            left = db.execute(count).fetchone()[0]
        assert left == before  # unclosed, the stores kept 28 open


def test_ctrl_c_requeues_the_running_run_and_exits_130(tmp_path: Path, started: list[subprocess.Popen]) -> None:
    write_grid(tmp_path, GRID)
    journal = tmp_path / "results" / "crash" / "journal.log"
    coordinator = start_cli(started, "run", "grid.yaml", cwd=tmp_path)
    trials_of = lambda **kw: _trials(journal, "crash", **kw)  # noqa: E731
    victim = _wait_for_running_epoch(trials_of)
    coordinator.send_signal(signal.SIGINT)
    output, _ = coordinator.communicate(timeout=60)
    assert coordinator.returncode == 130, output
    assert "running runs are cancelled and queued again" in output
    cancelled = trials_of()[victim.number]
    assert cancelled.state == optuna.trial.TrialState.FAIL and cancelled.user_attrs["status"] == "interrupted"
    assert not trials_of(states=(optuna.trial.TrialState.RUNNING,))

    again = run_cli("run", "grid.yaml", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    _assert_each_run_done_once(trials_of(), runs=4, epochs=3)


def test_a_database_password_is_never_shown(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "S3cretPW"
    url = postgres_url.replace("postgres@", f"postgres:{secret}@")  # trust auth accepts any password
    write_grid(tmp_path, TINY_GRID)
    (tmp_path / "store.url").write_text(url + "\n")
    (tmp_path / "store.url").chmod(0o600)  # it holds a password: readable by its owner only
    outputs = [
        run_cli("run", "grid.yaml", "--storage", url, cwd=tmp_path),
        run_cli("status", "grid.yaml", "--storage", "@store.url", cwd=tmp_path),
        run_cli("run", "grid.yaml", "--storage", url.replace("@/sweeps?", "@/nosuchdb?"), cwd=tmp_path),
    ]
    monkeypatch.setenv("BATCHSWEEP_STORAGE", url)  # the third way the README gives
    outputs.append(run_cli("status", "grid.yaml", cwd=tmp_path))
    assert outputs[0].returncode == 0 and outputs[1].returncode == 0, outputs[0].stderr + outputs[1].stderr
    assert outputs[3].returncode == 0 and "2 done" in outputs[3].stdout, outputs[3].stdout + outputs[3].stderr
    assert outputs[2].returncode == 2 and "postgres:***@" in outputs[2].stderr
    assert "Store: postgresql://postgres:***@/sweeps?host=" in outputs[0].stdout
    texts = [o.stdout + o.stderr for o in outputs]
    texts += [p.read_text(errors="replace") for p in (tmp_path / "results").rglob("*") if p.is_file()]
    assert len(texts) > 10  # logs, runs.csv, epochs.csv, tables, report.md, report.html, ...
    assert not [t for t in texts if secret in t]


CLAIMER = """\
import sys
import time

from sweep.store import Store

lease = Store.open(sys.argv[1], "tiny", create=False).claim_next()
print(lease.spec.run_id, flush=True)
time.sleep(600)  # killed here: claimed, never trained
"""


def test_a_run_claimed_on_a_database_by_a_worker_killed_before_training_is_queued_again(
    tmp_path: Path, started: list[subprocess.Popen], postgres_url: str
) -> None:
    """The first heartbeat is the claim's: a worker killed between its claim and its training (kill -9,
    OOM, a lost node) leaves a run that goes stale and is re-queued, and the sweep finishes.
    """
    write_grid(tmp_path, TINY_GRID)
    queued = run_cli("run", "grid.yaml", "--storage", postgres_url, "--no-train", cwd=tmp_path)
    assert queued.returncode == 0, queued.stdout + queued.stderr
    (tmp_path / "claimer.py").write_text(CLAIMER)
    claimer = subprocess.Popen(
        [sys.executable, "claimer.py", postgres_url], cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE, text=True
    )
    started.append(claimer)
    assert claimer.stdout is not None
    victim = claimer.stdout.readline().strip()
    os.kill(claimer.pid, signal.SIGKILL)
    claimer.wait()
    done = subprocess.run(
        [sys.executable, "-m", "sweep", "run", "grid.yaml", "--storage", postgres_url],
        cwd=tmp_path,
        env=cli_env(BATCHSWEEP_HEARTBEAT="1"),
        capture_output=True,
        text=True,
        timeout=240,  # before the fix: the claimed run stayed RUNNING and every worker waited for it
    )
    assert done.returncode == 0, done.stdout + done.stderr
    trials = _trials(postgres_url, "tiny")
    assert {t.user_attrs["run_id"] for t in trials if t.state == optuna.trial.TrialState.COMPLETE} == {
        victim,
        *(t.user_attrs["run_id"] for t in trials),
    }
    assert [status_of(t) for t in trials if t.user_attrs["run_id"] == victim][0] == RunStatus.INTERRUPTED


LEAK = """\
import os

import keras


class Leak(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise ValueError("cannot reach " + os.environ["BATCHSWEEP_STORAGE"])


def make():
    return Leak()
"""


def test_a_failure_line_naming_the_store_is_masked_on_the_terminal(tmp_path: Path, postgres_url: str) -> None:
    """A callback that raises with the storage URL in its message: the run fails, and neither the live
    failure line nor anything written shows the password (a query parameter whose name holds it).
    """
    secret = "S3cretXyz"
    url = postgres_url + f"&sslpassword={secret}"  # used only for an SSL key: harmless on a Unix socket
    write_grid(tmp_path, TINY_GRID.replace("train: {", 'train: {callbacks: ["leak.py:make"], '))
    (tmp_path / "leak.py").write_text(LEAK)
    done = run_cli("run", "grid.yaml", "--storage", url, "--retries", "0", cwd=tmp_path)
    assert done.returncode == 1 and "FAILED: ValueError: cannot reach postgresql://" in done.stdout, done.stdout
    texts = [done.stdout + done.stderr] + [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file()]
    assert len(texts) > 10 and not [t for t in texts if secret in t]  # logs, CSVs, the report


def test_a_workers_command_line_holds_no_storage_url(
    tmp_path: Path, started: list[subprocess.Popen], postgres_url: str
) -> None:
    """Every user of a machine can read a process's command line (ps, /proc/<pid>/cmdline): `run`
    hands the store to its workers through their environment.
    """
    import psutil

    secret = "S3cretPW"
    write_grid(tmp_path, GRID)
    (tmp_path / "store.url").write_text(postgres_url.replace("postgres@", f"postgres:{secret}@") + "\n")
    (tmp_path / "store.url").chmod(0o600)
    coordinator = start_cli(started, "run", "grid.yaml", "--storage", "@store.url", cwd=tmp_path)
    try:
        deadline, workers = time.monotonic() + 120, []
        while not workers and time.monotonic() < deadline:
            workers = [p for p in psutil.Process(coordinator.pid).children() if "worker" in p.cmdline()]
            time.sleep(0.2)
        assert workers, "no worker process started"
        cmdline = Path(f"/proc/{workers[0].pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        assert "sweep worker --study crash" in cmdline
        socket_folder = parse_qs(urlsplit(postgres_url).query)["host"][0]
        assert not [piece for piece in (secret, "postgresql", socket_folder, "store.url") if piece in cmdline], cmdline
    finally:
        coordinator.send_signal(signal.SIGINT)
        coordinator.communicate(timeout=120)
