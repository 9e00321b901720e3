"""The commands a user types, run as subprocesses against a real journal and real TensorFlow."""

from __future__ import annotations

from pathlib import Path

import optuna
import pandas as pd
import pytest

from conftest import TINY_GRID, run_cli, write_grid
from sweep import vocab


def test_run_status_and_rerun(tmp_path: Path) -> None:
    write_grid(tmp_path, TINY_GRID + "      train.lr: [0.001, 1.0e+12]\n")
    # 2 batch sizes x 2 learning rates x 1 seed -> 4 runs; lr 1e12 diverges
    first = run_cli("run", "grid.yaml", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    epoch_lines = [l for l in first.stdout.splitlines() if " epoch " in l and "val_acc" in l]
    assert len(epoch_lines) == 4  # 2 finished runs x 2 epochs, one line each
    assert "ETA" in epoch_lines[0] and "runs 0/4" in epoch_lines[0]
    assert first.stdout.count("DIVERGED") == 2
    assert "status: 2 done, 0 running, 0 failed, 2 diverged, 0 pending" in first.stdout

    results = tmp_path / "results" / "tiny"
    runs = pd.read_csv(results / vocab.RUNS_CSV)
    epochs = pd.read_csv(results / vocab.EPOCHS_CSV)
    assert sorted(runs.status) == ["diverged", "diverged", "done", "done"]
    assert runs[runs.status == "diverged"]["error"].str.contains("training loss became").all()
    assert (runs[runs.status == "done"]["parameters"] > 0).all()
    assert len(epochs[epochs.status == "done"]) == 4 and set(epochs.epoch) == {1, 2}
    assert epochs[vocab.GAP].round(6).equals((epochs[vocab.TRAIN_ACC] - epochs[vocab.VAL_ACC]).round(6))

    status = run_cli("status", "grid.yaml", cwd=tmp_path)
    assert status.stdout.strip() == "tiny: 4 runs: 2 done, 0 running, 0 failed, 2 diverged, 0 pending"

    again = run_cli("run", "grid.yaml", cwd=tmp_path)
    assert again.returncode == 0
    assert "all 4 runs of tiny are already finished; nothing to train." in again.stdout
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(str(results / "journal.log")))
    assert len(optuna.load_study(study_name="tiny", storage=storage).trials) == 4  # nothing ran twice


def test_a_failing_run_is_recorded_and_the_sweep_goes_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "broken.npz").write_bytes(b"not an npz archive")
    write_grid(tmp_path, TINY_GRID.replace("train.batch_size: [4, 8]", "data.dataset: [glyphs120, npz]")
               .replace("data: {dataset: glyphs120,", "data: {")
               + "      data.path: [null, broken.npz]\n")
    result = run_cli("run", "grid.yaml", cwd=tmp_path)
    # glyphs120+broken.npz and npz+null are invalid combinations -> the file is rejected first
    assert result.returncode == 2 and "data.path" in result.stderr

    write_grid(tmp_path, """\
        name: mixed
        base:
          data: {classes: 4, samples_per_class: 10, image_size: 12}
          train: {epochs: 1, batch_size: 8}
        grid:
          data.seed: [0, 1]
    """, name="ok.yaml")
    write_grid(tmp_path, """\
        name: mixed
        base:
          data: {classes: 4, samples_per_class: 10, image_size: 16}
          train: {epochs: 1, batch_size: 8}
    """, name="bad.yaml")
    assert run_cli("run", "ok.yaml", cwd=tmp_path).returncode == 0
    # A fault of the machine, not of the run: the dataset cache cannot be written (a file is in the way).
    monkeypatch.setenv("BATCHSWEEP_CACHE", str(tmp_path / "broken.npz"))
    failed = run_cli("run", "bad.yaml", cwd=tmp_path)
    assert failed.returncode == 1
    assert "FAILED" in failed.stderr and "status: 0 done, 0 running, 1 failed, 0 diverged, 0 pending" in failed.stdout
    runs = pd.read_csv(tmp_path / "results" / "mixed" / vocab.RUNS_CSV)
    assert sorted(runs.status) == ["done", "done", "failed"]
    failed_row = runs.set_index("status").loc["failed"]
    assert "Traceback" in failed_row["error"]
    assert failed_row["attempt"] == 2  # --retries 1 (the default): tried twice, then left failed


def test_worker_command_needs_an_existing_store(tmp_path: Path) -> None:
    result = run_cli("worker", "--storage", str(tmp_path / "none.log"), "--study", "x", cwd=tmp_path)
    assert result.returncode == 2 and "no such journal file" in result.stderr
    assert not (tmp_path / "none.log").exists()
