"""`run --no-train` and `slurm --dry-run`: queue a sweep for workers started elsewhere, or show the
batch script, without TensorFlow; every bad flag is one line, exit 2, nothing written. Slurm itself
runs in tests/test_slurm.py.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli_env, write_grid

from sweep import cli, vocab
from sweep.store import Store
from sweep.vocab import RunStatus

GRID = """\
    name: queued
    seeds: [0, 1]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 20, image_size: 12}
      train: {epochs: 1, batch_size: 8}
    grid:
      train.batch_size: [4, 8]
"""
HEAVY = "sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras'))"


@pytest.mark.system  # fresh interpreters: this one has TensorFlow loaded already
def test_no_train_queues_every_run_without_tensorflow_and_the_printed_worker_trains_them(tmp_path: Path) -> None:
    write_grid(tmp_path, GRID)
    code = f"import sys; from sweep import cli; code = cli.main(['run', 'grid.yaml', '--no-train']); print({HEAVY})"
    env = cli_env(drop=("BATCHSWEEP_STORAGE",), BATCHSWEEP_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[-1] == "[]"  # no TensorFlow, no Keras
    journal = tmp_path / "results" / "queued" / vocab.JOURNAL_FILE
    assert lines[0].startswith("queued: queued 4 run(s) to train of 4 (4 newly queued)")
    worker = f"sweep worker --study queued --storage {journal}"
    assert lines[1].endswith(worker), lines
    assert Store.open(journal, "queued", create=False).counts()[RunStatus.PENDING] == 4
    assert not (tmp_path / "results" / "queued" / vocab.RUNS_CSV).exists()  # nothing trained, nothing exported

    # the command it printed trains them, from anywhere
    trained = subprocess.run(
        [str(Path(sys.executable).with_name("sweep")), *worker.split()[1:]],
        cwd="/",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert Store.open(journal, "queued", create=False).counts()[RunStatus.DONE] == 4


@pytest.mark.unit
@pytest.mark.parametrize(
    "flag",
    [["--workers", "2"], ["--devices", "0"], ["--in-process"], ["--until-decided"], ["--retries", "0"]]
    + [["--trials-per-gpu", "2"], ["--pack", "2"]],
)
def test_no_train_refuses_flags_that_steer_training(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, flag: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BATCHSWEEP_STORAGE", raising=False)
    write_grid(tmp_path, GRID)
    assert cli.main(["run", "grid.yaml", "--no-train", *flag]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {flag[0]} "), err
    assert not (tmp_path / "results").exists()


def _slurm(tmp_path: Path, capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str, str]:
    code = cli.main(["slurm", str(tmp_path / "grid.yaml"), *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.unit
def test_slurm_dry_run_prints_the_array_script_and_queues_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch: a dry run does not need it
    write_grid(tmp_path, GRID)
    url = "postgresql://sweeper@db.example/sweeps"
    code, out, err = _slurm(tmp_path, capsys, "--array", "3", "--storage", url, "--dry-run", "--gpus-per-task", "1")
    assert code == 0, err
    assert out.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --array=0-2", "#SBATCH --gpus-per-task=1", "#SBATCH --no-requeue"):
        assert line + "\n" in out
    assert f"#SBATCH --output={tmp_path}/results/queued/slurm/worker-%A_%a.out\n" in out
    assert f"\n  {sys.executable} -m sweep worker --study queued --retries 1 --max-requeues 3 --storage {url}\n" in out
    assert "if [ $code -eq 4 ]; then continue; fi" in out  # a worker asking for a fresh process gets one
    assert "CUDA_VISIBLE_DEVICES=" not in out.replace("CUDA_VISIBLE_DEVICES=${", "")  # Slurm's own, never ours
    assert not (tmp_path / "results").exists()

    secret = url.replace("sweeper@", "sweeper:S3cret@")  # a password is never written into the script
    code, out, err = _slurm(tmp_path, capsys, "--array", "2", "--storage", secret, "--dry-run", "--requeue")
    assert code == 0 and "S3cret" not in out and "--storage" not in out.split("-m sweep worker")[1], out
    assert "#SBATCH --requeue\n" in out and "$BATCHSWEEP_STORAGE" in out


@pytest.mark.unit
@pytest.mark.parametrize(
    "args, says",
    [
        (["--array", "0"], "--array '0': give the number of worker tasks"),
        (["--array", "two"], "--array 'two': give the number of worker tasks"),
        (["--array", "2"], "sbatch not found on PATH"),
        (["--array", "2", "--time", "soon"], "--time 'soon': give minutes"),
        (["--array", "2", "--sbatch-arg", "mem=8G"], "--sbatch-arg 'mem=8G': give one sbatch option"),
        (["--array", "2", "--gpus-per-task", "1"], "--gpus-per-task 1: a run of queued has train.gpus 2"),
    ],
)
def test_slurm_bad_flags_are_one_line_and_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, args: list[str], says: str
) -> None:
    monkeypatch.chdir(tmp_path)
    if "sbatch not found" not in says:
        _fake_sbatch(tmp_path, "echo 'should not be called' >&2; exit 1")
    monkeypatch.setenv("PATH", str(tmp_path))
    write_grid(tmp_path, GRID + "      train.gpus: [1, 2]\n")
    code, out, err = _slurm(tmp_path, capsys, *args)
    assert code == 2 and err.count("\n") == 1 and err.startswith(f"error: {says}"), out + err
    assert not (tmp_path / "results").exists()


@pytest.mark.system
def test_slurm_says_what_sbatch_said_when_it_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BATCHSWEEP_STORAGE", raising=False)
    _fake_sbatch(tmp_path, "echo 'sbatch: error: invalid partition specified: gpu' >&2; exit 1")
    monkeypatch.setenv("PATH", str(tmp_path))
    write_grid(tmp_path, GRID)
    code, out, err = _slurm(tmp_path, capsys, "--array", "2", "--partition", "gpu")
    script = tmp_path / "results" / "queued" / "slurm" / "worker.sbatch"
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("error: sbatch failed (exit 1): sbatch: error: invalid partition specified: gpu; ")
    assert f"sbatch {script}" in err and "#SBATCH --partition=gpu" in script.read_text()


def _fake_sbatch(folder: Path, body: str) -> None:
    path = folder / "sbatch"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.mark.system
def test_slurm_queues_the_runs_then_submits_the_script_and_warns_about_a_journal_across_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BATCHSWEEP_STORAGE", raising=False)
    _fake_sbatch(tmp_path, f'echo "$@" > {tmp_path}/sbatch.args; echo 42')  # what sbatch --parsable prints
    monkeypatch.setenv("PATH", str(tmp_path))
    write_grid(tmp_path, GRID)
    code, out, err = _slurm(tmp_path, capsys, "--array", "2")
    folder = tmp_path / "results" / "queued"
    assert code == 0, out + err
    assert out.startswith("warning: a journal file is safe only when every task runs on one node")
    assert "submitted job array 42: 2 worker task(s)" in out
    assert f"logs: {folder}/slurm/worker-42_<task>.out" in out
    assert (tmp_path / "sbatch.args").read_text().split() == ["--parsable", str(folder / "slurm" / "worker.sbatch")]
    assert f"--storage {folder / vocab.JOURNAL_FILE}\n" in (folder / "slurm" / "worker.sbatch").read_text()
    assert Store.open(folder / vocab.JOURNAL_FILE, "queued", create=False).counts()[RunStatus.PENDING] == 4
