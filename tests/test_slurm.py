"""`sweep slurm` on a real one-node Slurm cluster (tests/slurm_cluster.py) with a real PostgreSQL
store: a job array of workers trains every run exactly once, and a task requeued mid-run by Slurm
puts its run back in the sweep's queue, where the next start finishes it with every epoch once.
"""

from __future__ import annotations

import shlex
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import optuna
import pandas as pd
import pytest
import services
import slurm_cluster
from conftest import cli_env, write_grid
from test_resume import postgres_url  # noqa: F401 - the fixture: a real PostgreSQL on a Unix socket

from sweep import vocab
from sweep.run import events as run_events
from sweep.store import Store, epochs_of, status_of
from sweep.vocab import RunStatus

pytestmark = pytest.mark.system  # Slurm daemons, a database server, worker processes

ARRAY_GRID = """\
    name: array
    seeds: [0, 1]
    base:
      data: {dataset: glyphs120, classes: 4, samples_per_class: 20, image_size: 12}
      train: {epochs: 1, batch_size: 8}
    grid:
      train.batch_size: [4, 8]
"""
# One run long enough to be requeued mid-run: a few seconds per epoch on one thread.
REQUEUE_GRID = """\
    name: requeued
    seeds: [0]
    base:
      data: {dataset: glyphs120, classes: 6, samples_per_class: 60, image_size: 16}
      train: {epochs: 6, batch_size: 4}
"""
ARRAY_SECONDS = 600


@pytest.fixture(scope="module")
def slurm() -> Iterator[slurm_cluster.Cluster]:
    services.require("slurm")
    with slurm_cluster.cluster() as found:
        yield found


def _submit(cluster: slurm_cluster.Cluster, folder: Path, *args: str, **env: str) -> str:
    """`sweep slurm grid.yaml ARGS` as a user on the login node (environment `env` added); the array's job id."""
    import subprocess
    import sys

    drop = ("BATCHSWEEP_STORAGE", "CUDA_VISIBLE_DEVICES")
    env = cluster.env(cli_env(drop=drop, BATCHSWEEP_THREADS="1", BATCHSWEEP_HEARTBEAT="1", **env))
    done = subprocess.run(
        [sys.executable, "-m", "sweep", "slurm", "grid.yaml", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    submitted = [line for line in done.stdout.splitlines() if line.startswith("submitted job array ")]
    assert submitted, done.stdout
    return submitted[0].split()[3].rstrip(":")


def _logs(folder: Path, name: str, job_id: str) -> str:
    logs = sorted((folder / "results" / name / "slurm").glob(f"worker-{job_id}_*.out"))
    return "\n".join(f"--- {p.name}\n{p.read_text()[-3000:]}" for p in logs)


def _complete(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]


def test_a_job_array_trains_every_run_exactly_once(
    tmp_path: Path,
    slurm: slurm_cluster.Cluster,
    postgres_url: str,  # noqa: F811 - the fixture imported above
) -> None:
    write_grid(tmp_path, ARRAY_GRID)
    # Slurm passes CUDA_VISIBLE_DEVICES to a task (its allocated GPUs; here, with no GPUs configured,
    # the value sbatch exported): the worker must train with it as it is.
    job_id = _submit(slurm, tmp_path, "--array", "2", "--storage", postgres_url, CUDA_VISIBLE_DEVICES="0")
    slurm.wait_gone(job_id, ARRAY_SECONDS)

    logs = _logs(tmp_path, "array", job_id)
    assert logs.count("--- worker-") == 2, logs  # one Slurm output file per task
    store = Store.open(postgres_url, "array", create=False)
    assert store.counts()[RunStatus.DONE] == 4, logs
    trials = store.sweep.get_trials(deepcopy=False)
    assert len(trials) == 4 and {t.user_attrs[vocab.ATTEMPT] for t in trials} == {1}, logs  # each trained once
    runs_csv, _ = store.export_csv(tmp_path / "out")
    runs = pd.read_csv(runs_csv, dtype={"visible_devices": str})
    assert len(runs) == 4 and set(runs[vocab.STATUS]) == {RunStatus.DONE} and runs.run_id.is_unique
    assert set(runs.visible_devices) == {"0"}, logs
    script = (tmp_path / "results" / "array" / "slurm" / "worker.sbatch").read_text()
    assert "#SBATCH --array=0-1" in script and f"--storage {shlex.quote(postgres_url)}" in script


def test_a_requeued_task_puts_its_run_back_and_the_run_finishes_once_with_every_epoch(
    tmp_path: Path,
    slurm: slurm_cluster.Cluster,
    postgres_url: str,  # noqa: F811 - the fixture imported above
) -> None:
    write_grid(tmp_path, REQUEUE_GRID)
    job_id = _submit(slurm, tmp_path, "--array", "1", "--requeue", "--storage", postgres_url)
    study = Store.open(postgres_url, "requeued", create=False).sweep
    deadline = time.monotonic() + ARRAY_SECONDS
    while not [t for t in study.get_trials(deepcopy=False) if len(epochs_of(t)) >= 2]:
        assert time.monotonic() < deadline, _logs(tmp_path, "requeued", job_id)
        assert slurm.jobs(job_id), "the array ended before the run had two records: " + _logs(
            tmp_path, "requeued", job_id
        )
        time.sleep(0.5)
    slurm.run("scontrol", "requeue", job_id)
    slurm.wait_gone(job_id, ARRAY_SECONDS)

    logs = _logs(tmp_path, "requeued", job_id)
    trials = study.get_trials(deepcopy=False)
    assert [status_of(t) for t in trials] == [RunStatus.INTERRUPTED, RunStatus.DONE], logs
    cut = trials[0]
    # Slurm's SIGTERM reached the worker, which queued its run again at once (not a heartbeat gone stale)
    assert cut.user_attrs[vocab.ERROR] == "interrupted before the run finished", logs
    # the task's log holds both attempts: how the first one ended, then the second
    (log,) = (tmp_path / "results" / "requeued" / "slurm").glob(f"worker-{job_id}_*.out")
    events = [e.kind for e in map(run_events.from_line, log.read_text().splitlines()) if e is not None]
    assert events[0] == "start" and events.count("start") == 2 and "interrupted" in events, logs
    assert events.index("interrupted") < events.index("start", 1), logs
    assert len(epochs_of(cut)) >= 2  # the records made before the requeue are kept
    assert Counter(t.user_attrs[vocab.RUN_ID] for t in _complete(study)) == {cut.user_attrs[vocab.RUN_ID]: 1}
    runs_csv, epochs_csv = Store.open(postgres_url, "requeued", create=False).export_csv(tmp_path / "out")
    runs = pd.read_csv(runs_csv)
    assert runs[vocab.STATUS].tolist() == [RunStatus.DONE]
    assert pd.read_csv(epochs_csv)[vocab.EPOCH].tolist() == [1, 2, 3, 4, 5, 6]  # every epoch, none twice
    # the requeued task's run went on from its last checkpoint, not from epoch 0
    assert runs[vocab.RESUMED_FROM_EPOCH].tolist() == [len(epochs_of(cut))], logs
    full = "".join(p.read_text() for p in (tmp_path / "results" / "requeued" / "slurm").glob(f"worker-{job_id}_*"))
    assert f"from its checkpoint after epoch {len(epochs_of(cut))}" in full, logs
