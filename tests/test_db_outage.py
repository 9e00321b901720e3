"""A database outage mid-sweep, on a real PostgreSQL server stopped with `pg_ctl -m immediate stop` (a crash):
one within the bound is ridden out (every run done once, records as an uninterrupted sweep's); one past it
ends `run` with one line, and the runs its workers held are queued again by the next `run`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import optuna
import pandas as pd
import pytest
import services
from conftest import run_cli, start_cli, write_grid

from sweep import vocab
from sweep.store import Store, epochs_of

pytestmark = pytest.mark.system

GRID = """\
    name: outage
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 20, image_size: 12}
      train: {epochs: 40, batch_size: 8}
    grid:
      train.batch_size: [4, 8]
"""
OUTAGE_SECONDS = 30
SECRET = "Outage-pw-7"  # trust authentication takes any password: it is here to be masked


@dataclass
class Server:
    """A throwaway PostgreSQL on a Unix socket (as tests/test_resume.py's `postgres_url`) that a test stops
    and starts again; run as the postgres user when we are root.
    """

    folder: Path
    bin: Path
    as_pg: list[str]
    url: str = ""

    def ctl(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [*self.as_pg, str(self.bin / "pg_ctl"), "-D", str(self.folder / "data"), *args]
        done = subprocess.run(cmd, capture_output=True, text=True)
        assert done.returncode == 0 or not check, done.stdout + done.stderr
        return done

    def start(self) -> None:
        options = f"-p 5432 -k {self.folder} -c listen_addresses=''"
        self.ctl("-l", str(self.folder / "log"), "-w", "start", "-o", options)

    def crash(self) -> None:
        self.ctl("-m", "immediate", "stop")


@pytest.fixture()
def server() -> Iterator[Server]:
    services.require("postgres")
    bin_ = services.postgres_bin()
    assert bin_ is not None
    folder = Path(tempfile.mkdtemp(prefix="batchsweep-pg-"))  # not pytest's tmp: the postgres user enters it
    as_pg = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    if as_pg:
        shutil.chown(folder, "postgres")
    found = Server(folder, bin_, as_pg, f"postgresql://postgres:{SECRET}@/sweeps?host={folder}&port=5432")
    try:
        init = subprocess.run(
            [*as_pg, str(bin_ / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", "postgres"]
        )
        assert init.returncode == 0
        found.start()
        import psycopg

        with psycopg.connect(host=str(folder), port=5432, user="postgres", dbname="postgres", autocommit=True) as db:
            db.execute("CREATE DATABASE sweeps")
        yield found
    finally:
        pid_file = folder / "data" / "postmaster.pid"
        if pid_file.exists() and found.ctl("-m", "immediate", "stop", check=False).returncode and pid_file.exists():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def _trials(url: str, states: tuple | None = None) -> list[optuna.trial.FrozenTrial]:
    with Store.open(url, "outage", create=False) as store:
        return store.sweep.get_trials(deepcopy=False, states=states)


def _wait_until_both_run(url: str, timeout: float = 240) -> None:
    """Both runs RUNNING, each with a record: the outage falls mid-run for both."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(KeyError):  # the study is not made yet
            running = _trials(url, (optuna.trial.TrialState.RUNNING,))
            if len(running) == 2 and all(epochs_of(t) for t in running):
                return
        time.sleep(0.2)
    raise AssertionError("the two runs were not both training in time")


TIMINGS = (vocab.EPOCH_SECONDS, vocab.SAMPLES_PER_SECOND)


def _records(results: Path) -> pd.DataFrame:
    """Every record's metrics but its timings (epochs.csv), in a fixed order."""
    table = pd.read_csv(results / vocab.EPOCHS_CSV)
    metrics = [m.name for m in vocab.METRICS if m.name in table.columns and m.name not in TIMINGS]
    assert {vocab.VAL_ACC, vocab.TRAIN_LOSS, vocab.LR} <= set(metrics)
    return table[["run_id", *metrics]].sort_values(["run_id", vocab.STEP]).reset_index(drop=True)


def test_a_30_s_database_crash_mid_sweep_is_ridden_out_with_the_records_of_an_uninterrupted_sweep(
    tmp_path: Path, started: list[subprocess.Popen], server: Server
) -> None:
    calm, stormy = tmp_path / "calm", tmp_path / "stormy"
    for folder in (calm, stormy):
        folder.mkdir()
        write_grid(folder, GRID)
    uninterrupted = run_cli("run", "grid.yaml", "--workers", "2", cwd=calm, timeout=600)
    assert uninterrupted.returncode == 0, uninterrupted.stdout + uninterrupted.stderr
    sweep = start_cli(started, "run", "grid.yaml", "--workers", "2", "--storage", server.url, cwd=stormy)
    _wait_until_both_run(server.url)
    server.crash()
    time.sleep(OUTAGE_SECONDS)
    server.start()
    output, _ = sweep.communicate(timeout=600)
    assert sweep.returncode == 0, output
    assert "Traceback" not in output and SECRET not in output
    trials = _trials(server.url)
    complete = Counter(t.user_attrs["run_id"] for t in trials if t.state == optuna.trial.TrialState.COMPLETE)
    assert len(trials) == 2 and sorted(complete.values()) == [1, 1], output  # each run done once, one attempt each
    records = _records(stormy / "results" / "outage")
    assert len(records) == 2 * 40
    pd.testing.assert_frame_equal(records, _records(calm / "results" / "outage"), check_exact=True)


def test_an_outage_past_the_bound_ends_run_in_one_line_and_the_next_run_queues_its_runs_again(
    tmp_path: Path, started: list[subprocess.Popen], server: Server
) -> None:
    write_grid(tmp_path, GRID)
    bound = {"BATCHSWEEP_OUTAGE_SECONDS": "3"}  # the bound lowered for this test: the code reads it in one place
    sweep = start_cli(started, "run", "grid.yaml", "--workers", "2", "--storage", server.url, cwd=tmp_path, **bound)
    _wait_until_both_run(server.url)
    server.crash()
    try:
        output, _ = sweep.communicate(timeout=120)
    finally:
        server.start()
    shown = f"postgresql://postgres:***@/sweeps?host={server.folder}&port=5432"
    last = output.strip().splitlines()[-1]
    assert sweep.returncode == 7, output
    assert last == f"error: the database {shown} could not be reached for 3 s; once it is back, run the same " + (
        "command again: the runs its workers held are queued again"
    )
    assert "Traceback" not in output and SECRET not in output and output.count(shown) == 2, output  # Store: and the end
    assert len(_trials(server.url, (optuna.trial.TrialState.RUNNING,))) == 2  # nothing could be written meanwhile
    again = run_cli("run", "grid.yaml", "--storage", server.url, "--no-train", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "re-queued 2 run(s) whose worker died" in again.stdout, again.stdout
    status = run_cli("status", "grid.yaml", "--storage", server.url, cwd=tmp_path)
    assert "outage: 2 runs: 0 done, 0 running, 0 failed, 0 diverged, 2 pending" in status.stdout, status.stdout
