"""`sweep run` and `sweep worker` flags end to end: real processes on a tiny grid, read back from the
store, runs.csv and the live workers' /proc. Every process a test starts is stopped by its pid.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections import Counter
from pathlib import Path

import optuna
import pandas as pd
import psutil
import pytest
from conftest import start_cli, write_grid

from sweep import vocab
from sweep.train import devices
from sweep.vocab import RunStatus

pytestmark = pytest.mark.system  # every test here starts sweep processes

GRID = """\
    name: flags
    seeds: [0, 1, 2]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 10, image_size: 12}
      train: {epochs: 1, batch_size: 8}
"""
# What the caller's shell may set that would change what these tests read.
OVERRIDES = (
    "BATCHSWEEP_THREADS",
    "BATCHSWEEP_STORAGE",
    "BATCHSWEEP_WORKER_MAX_MB",
    "TF_NUM_INTRAOP_THREADS",
    "OMP_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES",
)


def _finish(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def _trials(journal: Path, name: str = "flags") -> list[optuna.trial.FrozenTrial]:
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(journal)))
    return optuna.load_study(study_name=name, storage=storage).get_trials()


def _runs(folder: Path) -> pd.DataFrame:
    return pd.read_csv(folder / "results" / "flags" / vocab.RUNS_CSV, dtype={"visible_devices": str})


@pytest.mark.parametrize("retries, attempts", [(0, 1), (2, 3)])
def test_retries_give_that_many_more_attempts_at_a_failing_run(
    tmp_path: Path, started: list[subprocess.Popen], retries: int, attempts: int
) -> None:
    write_grid(tmp_path, GRID.replace("seeds: [0, 1, 2]", "seeds: [0]"))
    (tmp_path / "in_the_way").write_bytes(b"")  # the dataset cache cannot be written: every attempt fails
    proc = start_cli(
        started,
        "run",
        "grid.yaml",
        "--retries",
        str(retries),
        cwd=tmp_path,
        drop=OVERRIDES,
        BATCHSWEEP_CACHE="in_the_way",
    )
    code, out = _finish(proc)
    assert code == 1, out
    trials = _trials(tmp_path / "results" / "flags" / vocab.JOURNAL_FILE)
    assert [(t.user_attrs[vocab.ATTEMPT], t.user_attrs[vocab.STATUS]) for t in trials] == [
        (k, RunStatus.FAILED) for k in range(1, attempts + 1)
    ]
    assert out.count("failed; retrying it") == retries
    assert _runs(tmp_path)["attempt"].tolist() == [attempts]


def _live_workers(coordinator: subprocess.Popen, count: int, timeout: float = 120) -> list[psutil.Process]:
    """The coordinator's `sweep worker` children, once `count` of them are alive."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(psutil.NoSuchProcess):
            workers = [p for p in psutil.Process(coordinator.pid).children() if "worker" in p.cmdline()]
            if len(workers) >= count:
                return workers
        time.sleep(0.05)
    raise AssertionError(f"{count} workers were not alive at once within {timeout} s")


def _environ(process: psutil.Process) -> dict[str, str]:
    raw = Path(f"/proc/{process.pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)


def test_trials_per_gpu_starts_that_many_workers_on_the_device(tmp_path: Path, started: list[subprocess.Popen]) -> None:
    write_grid(tmp_path, GRID)
    proc = start_cli(
        started, "run", "grid.yaml", "--devices", "0", "--trials-per-gpu", "3", cwd=tmp_path, drop=OVERRIDES
    )
    workers = _live_workers(proc, 3)
    environments = [_environ(worker) for worker in workers]
    assert [e.get("CUDA_VISIBLE_DEVICES") for e in environments] == ["0"] * 3
    share = str(max(1, devices.cpu_count() // 3))  # three workers share the cores
    assert [e.get("TF_NUM_INTRAOP_THREADS") for e in environments] == [share] * 3
    code, out = _finish(proc)
    assert code == 0, out
    assert "starting 3 worker(s) on devices 0 | 0 | 0" in out
    runs = _runs(tmp_path)
    assert runs.status.tolist() == [RunStatus.DONE] * 3 and set(runs.visible_devices) == {"0"}
    assert set(runs.worker_pid) <= {w.pid for w in workers}


@pytest.mark.parametrize("workers", [1, 2])
def test_each_worker_gets_its_share_of_the_cores(tmp_path: Path, started: list[subprocess.Popen], workers: int) -> None:
    write_grid(tmp_path, GRID)
    code, out = _finish(start_cli(started, "run", "grid.yaml", "--workers", str(workers), cwd=tmp_path, drop=OVERRIDES))
    assert code == 0, out
    assert f"starting {workers} worker(s)" in out
    runs = _runs(tmp_path)
    assert runs.status.tolist() == [RunStatus.DONE] * 3
    assert runs.threads.tolist() == [max(1, devices.cpu_count() // workers)] * 3
    assert runs.worker_pid.nunique() <= workers


def test_a_worker_over_its_memory_bound_is_replaced_between_runs(
    tmp_path: Path, started: list[subprocess.Popen]
) -> None:
    write_grid(tmp_path, GRID)
    code, out = _finish(
        start_cli(
            started, "run", "grid.yaml", "--workers", "1", cwd=tmp_path, drop=OVERRIDES, BATCHSWEEP_WORKER_MAX_MB="1"
        )
    )
    assert code == 0, out
    runs = _runs(tmp_path)
    assert runs.status.tolist() == [RunStatus.DONE] * 3 and runs.attempt.tolist() == [1] * 3  # none cut short
    assert runs.worker_pid.nunique() == 3  # a fresh worker for every run


def test_a_worker_started_by_hand_joins_a_running_sweep(tmp_path: Path, started: list[subprocess.Popen]) -> None:
    write_grid(
        tmp_path,
        GRID.replace("seeds: [0, 1, 2]", "seeds: [0, 1, 2, 3, 4, 5, 6, 7]").replace(
            "samples_per_class: 10, image_size: 12}", "samples_per_class: 30, image_size: 16}"
        ),
    )
    journal = tmp_path / "results" / "flags" / vocab.JOURNAL_FILE
    sweep = start_cli(started, "run", "grid.yaml", "--workers", "1", cwd=tmp_path, drop=OVERRIDES)
    deadline = time.monotonic() + 120
    while not (journal.exists() and _queued(journal) == 8):  # the sweep has queued its runs
        assert time.monotonic() < deadline and sweep.poll() is None, "the sweep did not queue its runs"
        time.sleep(0.1)
    by_hand = start_cli(started, "worker", "--storage", str(journal), "--study", "flags", cwd=tmp_path, drop=OVERRIDES)
    code, out = _finish(sweep)
    assert code == 0, out
    hand_code, hand_out = _finish(by_hand)
    assert hand_code == 0, hand_out
    complete = [t for t in _trials(journal) if t.state == optuna.trial.TrialState.COMPLETE]
    assert sorted(Counter(t.user_attrs[vocab.RUN_ID] for t in complete).values()) == [1] * 8  # each run once
    trained_by = Counter(t.user_attrs["worker_pid"] for t in complete)
    assert by_hand.pid in trained_by and len(trained_by) == 2, trained_by  # the hand-started worker and the sweep's


def _queued(journal: Path) -> int:
    try:
        return len(_trials(journal))
    except KeyError:  # the study is not created yet
        return 0
