"""Preemption with real processes: a worker killed with kill -9 right after a run's epoch 3 of 6 is
recorded (and checkpointed); the same `run` command again resumes the run at epoch 4, and its six
records equal, bit for bit (timings aside), those of the same run trained uninterrupted elsewhere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import optuna
import pandas as pd
import pytest
from conftest import run_cli, start_cli, write_grid

from sweep import vocab
from sweep.run import resume
from sweep.store import Store, epochs_of
from sweep.train import checkpoint
from sweep.vocab import RunStatus

pytestmark = pytest.mark.system

GRID = """\
    name: preempt
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 6, batch_size: 8, callbacks: ["pause.py:make"]}
"""
# A pause at the start of epoch 4, so the kill lands between epoch 3's checkpoint and epoch 4's record.
PAUSE = """\
import time

import keras


class Pause(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if epoch == 3:
            time.sleep(3)


def make():
    return Pause()
"""
TIMINGS = ["epoch_seconds", "samples_per_second"]


def _running(journal: Path, name: str) -> list[optuna.trial.FrozenTrial]:
    """The sweep's running trials (none while its study does not exist yet)."""
    try:
        study = Store.open(journal, name, create=False).sweep
    except KeyError:
        return []
    return study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,))


def _wait_for_checkpoint_of_epoch(journal: Path, epoch: int, timeout: float = 240) -> optuna.trial.FrozenTrial:
    """The running trial once its record and its checkpoint of `epoch` are both written."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for trial in _running(journal, "preempt"):
            saved = checkpoint.load(journal.parent / "checkpoints" / f"{trial.user_attrs['run_id']}.npz")
            if len(epochs_of(trial)) == epoch and saved is not None and saved.epoch == epoch:
                return trial
        time.sleep(0.1)
    raise AssertionError(f"no run reached epoch {epoch} in time")


def test_kill_9_after_epoch_3_resumes_at_epoch_4_with_identical_records(
    tmp_path: Path, started: list[subprocess.Popen], monkeypatch: pytest.MonkeyPatch
) -> None:
    journal, coordinator, victim = _run_until_epoch_3_is_checkpointed(tmp_path, started, monkeypatch)
    os.kill(victim.user_attrs["worker_pid"], signal.SIGKILL)
    coordinator.kill()
    coordinator.wait()
    run_id = victim.user_attrs["run_id"]
    _resumes_at_epoch_4_with_identical_records(tmp_path, journal, run_id)


def test_sigterm_after_epoch_3_requeues_at_once_and_resumes_at_epoch_4(
    tmp_path: Path, started: list[subprocess.Popen], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Slurm's preemption (or scancel) sends SIGTERM: the worker re-queues its run at once (it is
    paused 3 s at epoch 4's start), with epoch 3's checkpoint on disk; the next `run` resumes it.
    """
    journal, coordinator, victim = _run_until_epoch_3_is_checkpointed(tmp_path, started, monkeypatch)
    sent = time.monotonic()
    os.kill(victim.user_attrs["worker_pid"], signal.SIGTERM)
    while Store.open(journal, "preempt", create=False).sweep.get_trials(deepcopy=False)[victim.number].state == (
        optuna.trial.TrialState.RUNNING
    ):
        assert time.monotonic() - sent < 2.5, "the run was not re-queued before the pause ended"
        time.sleep(0.05)
    output = coordinator.communicate(timeout=120)[0]
    assert coordinator.returncode != 0 and "interrupted; it is queued again" in output, output
    saved = checkpoint.load(journal.parent / "checkpoints" / f"{victim.user_attrs['run_id']}.npz")
    assert saved is not None and saved.epoch == 3
    _resumes_at_epoch_4_with_identical_records(tmp_path, journal, victim.user_attrs["run_id"])


def test_sigterm_to_run_stops_its_workers_says_how_to_resume_and_exits_143(
    tmp_path: Path, started: list[subprocess.Popen], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`kill PID` (or a container's stop) to the `run` command, as Ctrl-C: each worker queues its run again,
    and `run` ends with the one line that says what to do, exit 128 + 15.
    """
    journal, coordinator, victim = _run_until_epoch_3_is_checkpointed(tmp_path, started, monkeypatch)
    coordinator.send_signal(signal.SIGTERM)
    output = coordinator.communicate(timeout=120)[0]
    assert coordinator.returncode == 143, output
    assert output.rstrip().endswith("stopped; run the same command again to resume where it stopped"), output
    trial = Store.open(journal, "preempt", create=False).sweep.get_trials(deepcopy=False)[victim.number]
    assert trial.state == optuna.trial.TrialState.FAIL and trial.user_attrs[vocab.STATUS] == RunStatus.INTERRUPTED


# The pause, where a library catches the stop's KeyboardInterrupt: one drops it (as Python does for one
# raised inside a __del__), one raises an error of its own instead (as TensorFlow's iterators can).
LOST_IN_A_LIBRARY = {
    "dropped": "pass",
    "turned into another error": "raise ValueError('iterator state broken')",
}


@pytest.mark.parametrize("caught", LOST_IN_A_LIBRARY)
def test_a_sigterm_a_library_catches_still_requeues_the_run_after_at_most_one_more_record(
    tmp_path: Path, started: list[subprocess.Popen], monkeypatch: pytest.MonkeyPatch, caught: str
) -> None:
    """The worker remembers the stop: the run is queued again by its worker, as interrupted (never failed,
    never left to go stale), once its record at hand is written, from a checkpoint at that record.
    """
    pausing = tmp_path / "pausing"
    pause = PAUSE.replace(
        "time.sleep(3)",
        f"open({str(pausing)!r}, 'w').close()\n            try:\n                time.sleep(3)\n"
        f"            except KeyboardInterrupt:\n                {LOST_IN_A_LIBRARY[caught]}",
    )
    journal, coordinator, victim = _run_until_epoch_3_is_checkpointed(tmp_path, started, monkeypatch, pause)
    while not pausing.exists():  # the signal lands in the library's pause
        time.sleep(0.05)
    os.kill(victim.user_attrs["worker_pid"], signal.SIGTERM)
    output = coordinator.communicate(timeout=120)[0]
    assert coordinator.returncode != 0 and "interrupted; it is queued again" in output, output
    trials = Store.open(journal, "preempt", create=False).sweep.get_trials(deepcopy=False)
    cut = trials[victim.number]
    assert cut.user_attrs[vocab.STATUS] == RunStatus.INTERRUPTED, output
    assert cut.user_attrs[vocab.ERROR] == "interrupted before the run finished"
    recorded = 4 if caught == "dropped" else 3  # dropped: the stop is taken at epoch 4's record
    assert [r[vocab.EPOCH] for r in epochs_of(cut)] == list(range(1, recorded + 1))
    saved = checkpoint.load(journal.parent / "checkpoints" / f"{victim.user_attrs['run_id']}.npz")
    assert saved is not None and saved.epoch == recorded
    assert trials[-1].state == optuna.trial.TrialState.WAITING  # its next attempt, queued


def _run_until_epoch_3_is_checkpointed(
    tmp_path: Path, started: list[subprocess.Popen], monkeypatch: pytest.MonkeyPatch, pause: str = PAUSE
) -> tuple[Path, subprocess.Popen, optuna.trial.FrozenTrial]:
    """`run` of the 6-epoch grid with one worker (`pause` its callback), until its run has epoch 3's
    checkpoint on disk.
    """
    monkeypatch.setenv("BATCHSWEEP_THREADS", "1")  # every process of the test: the same numbers need the same threads
    monkeypatch.delenv(resume.CHECKPOINTS_ENV, raising=False)
    write_grid(tmp_path, GRID)
    (tmp_path / "pause.py").write_text(pause)
    journal = tmp_path / "results" / "preempt" / "journal.log"
    coordinator = start_cli(started, "run", "grid.yaml", "--workers", "1", cwd=tmp_path)
    return journal, coordinator, _wait_for_checkpoint_of_epoch(journal, 3)


def _resumes_at_epoch_4_with_identical_records(tmp_path: Path, journal: Path, run_id: str) -> None:

    again = run_cli("run", "grid.yaml", "--workers", "1", cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    logs = "".join(p.read_text() for p in (journal.parent / "logs").glob("*.log"))
    assert f"resuming {run_id} from its checkpoint after epoch 3" in logs
    runs = pd.read_csv(journal.parent / vocab.RUNS_CSV)
    assert runs[vocab.RESUMED_FROM_EPOCH].tolist() == [3.0]
    assert runs["epochs_done"].tolist() == [6]
    resumed = pd.read_csv(journal.parent / vocab.EPOCHS_CSV)
    steps = Store.open(journal, "preempt", create=False).current()[run_id]
    assert [r[vocab.EPOCH] for r in epochs_of(steps)] == [1, 2, 3, 4, 5, 6]  # each once, on the last attempt
    assert not (journal.parent / "checkpoints" / f"{run_id}.npz").exists()  # done: its checkpoint is gone

    whole = run_cli("run", "grid.yaml", "--workers", "1", "--results", "whole", cwd=tmp_path, timeout=600)
    assert whole.returncode == 0, whole.stdout + whole.stderr
    reference = pd.read_csv(tmp_path / "whole" / vocab.EPOCHS_CSV)
    assert reference[vocab.RUN_ID].tolist() == [run_id] * 6
    pd.testing.assert_frame_equal(resumed.drop(columns=TIMINGS), reference.drop(columns=TIMINGS), check_exact=True)


PACK_GRID = """\
    name: packkill
    seeds: [0, 1, 2]
    base:
      data: {dataset: glyphs120, classes: 30, samples_per_class: 20, image_size: 16}
      train: {epochs: 6, batch_size: 8}
"""


@pytest.mark.parametrize("backend", ["tensorflow", "jax"])
def test_kill_9_of_a_packed_worker_finishes_every_run_of_its_pack_exactly_once(
    tmp_path: Path, started: list[subprocess.Popen], monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Three runs train as one pack; its worker is killed with kill -9 once each has a checkpoint of
    epoch 2. The same `run` again finishes each run once (resumed alone from its checkpoint), with
    epochs 1-6 once each and records equal to the runs trained alone, uninterrupted. On both backends
    (the processes' KERAS_BACKEND).
    """
    monkeypatch.setenv("BATCHSWEEP_THREADS", "1")
    monkeypatch.setenv("KERAS_BACKEND", backend)
    monkeypatch.delenv(resume.CHECKPOINTS_ENV, raising=False)
    write_grid(tmp_path, PACK_GRID)
    journal = tmp_path / "results" / "packkill" / "journal.log"
    coordinator = start_cli(started, "run", "grid.yaml", "--workers", "1", "--pack", "3", cwd=tmp_path)
    pids = _pack_checkpointed_at(journal, epoch=2)
    assert len(pids) == 1  # one worker trains all three
    os.kill(pids.pop(), signal.SIGKILL)
    coordinator.kill()
    coordinator.wait()

    again = run_cli("run", "grid.yaml", "--workers", "1", cwd=tmp_path, timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    folder = journal.parent
    runs = pd.read_csv(folder / vocab.RUNS_CSV)
    assert len(runs) == 3 and (runs[vocab.STATUS] == RunStatus.DONE).all() and (runs["epochs_done"] == 6).all()
    assert (runs[vocab.RESUMED_FROM_EPOCH] >= 2).all()  # each went on from its own checkpoint
    for trial in Store.open(journal, "packkill", create=False).current().values():
        assert [r[vocab.EPOCH] for r in epochs_of(trial)] == [1, 2, 3, 4, 5, 6]
    assert not list((folder / "checkpoints").glob("*.npz"))

    whole = run_cli(
        "run", "grid.yaml", "--workers", "1", "--pack", "1", "--results", "whole", cwd=tmp_path, timeout=900
    )
    assert whole.returncode == 0, whole.stdout + whole.stderr
    order = [vocab.RUN_ID, vocab.EPOCH]
    resumed = pd.read_csv(folder / vocab.EPOCHS_CSV).drop(columns=TIMINGS).sort_values(order).reset_index(drop=True)
    reference = pd.read_csv(tmp_path / "whole" / vocab.EPOCHS_CSV).drop(columns=TIMINGS).sort_values(order)
    pd.testing.assert_frame_equal(resumed, reference.reset_index(drop=True), check_exact=True)


def _pack_checkpointed_at(journal: Path, epoch: int, timeout: float = 300) -> set[int]:
    """The worker pids of the running trials, once three are running and each has a checkpoint of
    `epoch` or later.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = _running(journal, "packkill")
        saved = [checkpoint.load(journal.parent / "checkpoints" / f"{t.user_attrs['run_id']}.npz") for t in running]
        if len(running) == 3 and all(s is not None and s.epoch >= epoch for s in saved):
            return {t.user_attrs["worker_pid"] for t in running}
        time.sleep(0.1)
    raise AssertionError(f"the pack did not reach epoch {epoch} in time")
