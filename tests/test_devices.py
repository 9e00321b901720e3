"""Device assignment: a pool of GPU ids becomes one CUDA_VISIBLE_DEVICES per worker process.

Without GPUs the ids are placeholders: each worker reports the devices it was given, and
the runs it trained record them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import TINY_GRID, cli_env, run_cli, write_grid

from sweep.train.devices import device_pool, with_host_devices, worker_environment, worker_slots


@pytest.mark.unit
def test_slots_never_share_a_device_unless_asked() -> None:
    assert worker_slots(["0", "2"], replicas=1) == ["0", "2"]
    assert worker_slots(["0", "1", "2", "3"], replicas=2) == ["0,1", "2,3"]
    assert worker_slots(["0", "1", "2"], replicas=2) == ["0,1"]  # device 2 alone cannot host a 2-replica run
    assert worker_slots(["0", "2"], replicas=1, trials_per_gpu=2) == ["0", "2", "0", "2"]
    assert worker_slots(["0"], replicas=4) == ["0"]  # more replicas than GPUs: one group, split logically


@pytest.mark.unit
def test_pool_comes_from_the_flag_then_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,3")
    assert device_pool("0, 2") == ["0", "2"]
    assert device_pool(None) == ["1", "3"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert device_pool(None) == []  # explicitly no GPUs: train on the CPU


@pytest.mark.unit
def test_a_gpu_worker_takes_gpu_memory_as_needed_so_workers_can_share_a_gpu() -> None:
    env = worker_environment({}, threads=1, visible="0")
    assert (env["CUDA_VISIBLE_DEVICES"], env["TF_FORCE_GPU_ALLOW_GROWTH"]) == ("0", "true")
    kept = worker_environment({"TF_FORCE_GPU_ALLOW_GROWTH": "false"}, visible="0")
    assert kept["TF_FORCE_GPU_ALLOW_GROWTH"] == "false"
    assert "TF_FORCE_GPU_ALLOW_GROWTH" not in worker_environment({}, threads=2)  # the CPU: nothing to share


@pytest.mark.unit
def test_xla_gets_the_thread_count_and_the_host_devices_beside_the_users_flags() -> None:
    assert worker_environment({}, threads=1)["PJRT_NPROC"] == "1"  # XLA's CPU pool reads neither TF_ nor OMP_
    assert "PJRT_NPROC" not in worker_environment({})  # no thread count given: XLA's default, one per core
    user = "--xla_dump_to=/x --xla_force_host_platform_device_count=1"
    assert with_host_devices(user, 2) == "--xla_dump_to=/x --xla_force_host_platform_device_count=2"
    assert with_host_devices("--xla_force_host_platform_device_count=8", 2).endswith("=8")  # more already: kept
    assert with_host_devices("", 4) == "--xla_force_host_platform_device_count=4"


@pytest.mark.unit
def test_a_packing_worker_runs_its_towers_side_by_side_on_tensorflow(monkeypatch) -> None:
    """One intra-op thread and an inter-op thread per core: the towers' ops run a core each."""
    threads = ("TF_NUM_INTRAOP_THREADS", "OMP_NUM_THREADS", "TF_NUM_INTEROP_THREADS")
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    assert [worker_environment({}, threads=4, towers=True)[n] for n in threads] == ["1", "1", "4"]
    assert [worker_environment({}, threads=4)[n] for n in threads] == ["4", "4", "2"]  # a run alone: inside each op
    assert [worker_environment({}, threads=1, towers=True)[n] for n in threads] == ["1", "1", "1"]
    monkeypatch.setenv("KERAS_BACKEND", "jax")  # XLA and torch step one op at a time: every thread inside each
    assert [worker_environment({}, threads=4, towers=True)[n] for n in threads] == ["4", "4", "2"]


PACKED_GRID = TINY_GRID.replace("seeds: [0]", "seeds: [0, 1]").replace("[4, 8]", "[8]")


@pytest.mark.system
def test_packed_runs_record_one_thread_and_the_numbers_of_their_runs_alone_at_one_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`run --pack 2` on 2 threads: each run records threads 1 and pack_size 2, and every record
    equals the same run trained alone at one thread.
    """
    write_grid(tmp_path, PACKED_GRID)
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")
    monkeypatch.setenv("BATCHSWEEP_THREADS", "2")
    packed = run_cli("run", "grid.yaml", "--workers", "1", "--pack", "2", cwd=tmp_path)
    assert packed.returncode == 0, packed.stdout + packed.stderr
    monkeypatch.setenv("BATCHSWEEP_THREADS", "1")
    alone = run_cli("run", "grid.yaml", "--workers", "1", "--pack", "1", "--results", "alone", cwd=tmp_path)
    assert alone.returncode == 0, alone.stdout + alone.stderr
    runs = pd.read_csv(tmp_path / "results" / "tiny" / "runs.csv")
    assert runs["threads"].tolist() == [1, 1] and runs["pack_size"].tolist() == [2, 2]
    timings = ["epoch_seconds", "samples_per_second"]
    order = ["run_id", "epoch"]
    ours = pd.read_csv(tmp_path / "results" / "tiny" / "epochs.csv").drop(columns=timings).sort_values(order)
    theirs = pd.read_csv(tmp_path / "alone" / "epochs.csv").drop(columns=timings).sort_values(order)
    assert len(ours) == 4
    pd.testing.assert_frame_equal(ours.reset_index(drop=True), theirs.reset_index(drop=True), check_exact=True)


# In a jax process: XLA's CPU thread pool (threads named tf_XLAEigen) after one jitted step, and what
# devices.intra_op_threads() records. The CPU time of a short fit is no signal on a shared machine.
POOL_PROBE = """
import os, jax, jax.numpy as jnp
from sweep.train import devices
jax.jit(lambda a: a @ a)(jnp.ones((64, 64))).block_until_ready()
names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
print(names.count("tf_XLAEigen"), devices.intra_op_threads())
"""


@pytest.mark.system
@pytest.mark.parametrize("threads", [1, 3])
def test_a_jax_worker_uses_the_threads_it_is_given(threads: int) -> None:
    env = worker_environment(cli_env(KERAS_BACKEND="jax"), threads=threads)
    done = subprocess.run([sys.executable, "-c", POOL_PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(threads), str(threads)]


@pytest.mark.system
def test_run_with_a_device_pool_gives_each_worker_its_own_device(tmp_path: Path) -> None:
    write_grid(tmp_path, TINY_GRID.replace("seeds: [0]", "seeds: [0, 1]"))
    # 2 batch sizes x 2 seeds -> 4 runs, over 2 placeholder GPUs, one worker each
    result = run_cli("run", "grid.yaml", "--devices", "0,2", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "starting 2 worker(s) on devices 0 | 2" in result.stdout
    runs = pd.read_csv(tmp_path / "results" / "tiny" / "runs.csv", dtype={"visible_devices": str})
    assert set(runs.visible_devices) == {"0", "2"}
    for _, same_device in runs.groupby("visible_devices"):
        spans = sorted(zip(pd.to_datetime(same_device.started), pd.to_datetime(same_device.finished), strict=True))
        assert all(end <= next_start for (_, end), (next_start, _) in zip(spans, spans[1:], strict=False))  # in turn


@pytest.mark.system
def test_replica_counts_change_within_one_sweep(tmp_path: Path) -> None:
    # TensorFlow cannot run MirroredStrategy over 2 and then 4 devices in one process:
    # the worker hands the 4-replica run to a fresh process instead of failing it.
    write_grid(tmp_path, TINY_GRID.replace("train.batch_size: [4, 8]", "train.gpus: [1, 2, 4]"))
    result = run_cli("run", "grid.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    runs = pd.read_csv(tmp_path / "results" / "tiny" / "runs.csv").set_index("train.gpus")
    assert runs.status.tolist() == ["done"] * 3
    assert runs.replicas.to_dict() == {1: 1, 2: 2, 4: 4}
    assert runs.per_replica_batch.to_dict() == {1: 8, 2: 4, 4: 2}
    assert runs.loc[4, "worker_pid"] != runs.loc[2, "worker_pid"]


@pytest.mark.unit
def test_progress_follows_a_steps_budget() -> None:
    from sweep.run import events
    from sweep.run.coordinator import Progress, format_event

    progress = Progress(runs_total=1, epochs_total=3)
    assert format_event(events.EpochsKnown("r", planned=3, epochs=24), progress) is None
    assert progress.epochs_total == 24
    record = {"epoch": 12, "train_acc": 0.5, "train_eval_acc": 0.5, "val_acc": 0.4, "gap": 0.1, "epoch_seconds": 1.0}
    line = format_event(events.EpochDone("r", 24, record), progress)
    assert "r epoch 12/24" in line and "epochs 1/24" in line


@pytest.mark.unit
def test_progress_counts_epochs_not_the_records_inside_them() -> None:
    """eval_every_steps writes records at epoch 0.5, 1, 1.5, 2: the bar counts the 2 epochs, not 4 records."""
    from sweep.run import events
    from sweep.run.coordinator import Progress, format_event

    progress = Progress(runs_total=1, epochs_total=2)
    for epoch in (0.5, 1, 1.5, 2):
        record = {"epoch": epoch, "train_acc": 0.5, "train_eval_acc": 0.5, "val_acc": 0.4, "gap": 0.1}
        line = format_event(events.EpochDone("r", 2, {**record, "epoch_seconds": 1.0}), progress)
    assert progress.epochs_done == 2 and "100% runs 0/1 epochs 2/2" in line


@pytest.mark.unit
def test_worker_events_survive_the_trip_through_a_line() -> None:
    from sweep.run import events

    sent = [
        events.RunStarted("r", 3),
        events.EpochsKnown("r", 3, 24),
        events.EpochDone("r", 24, {"epoch": 1.5}),
        events.RunEnded("r", "failed", 2, "ValueError: x"),
        events.RunInterrupted("r"),
        events.RunRetried("r", 3),
        events.WorkerStopped("no space left"),
    ]
    assert [events.from_line(events.to_line(e)) for e in sent] == sent
    assert events.from_line("TensorFlow says hello\n") is None
    another_version = events.PREFIX + '{"event": "epoch", "run_id": "r", "val_acc": 1}\n'
    assert events.from_line(another_version) is None


@pytest.mark.unit
def test_without_gpus_run_starts_a_worker_per_core_up_to_one_per_run() -> None:
    """The default on a CPU: one worker per core (each with one thread), never more than runs to train,
    and one where a queued run has replicas (its logical devices share one process's threads).
    """
    from sweep.config.keys import PointConfig
    from sweep.config.plan import RunSpec
    from sweep.run.workforce import cpu_workers, worker_slots

    def runs(count: int, gpus: int = 1) -> list[RunSpec]:
        point = PointConfig().with_value("train.gpus", gpus)
        return [RunSpec(sweep="w", seed=seed, point=point, varying=()) for seed in range(count)]

    assert cpu_workers(runs(6), cores=2) == 2
    assert cpu_workers(runs(6), cores=16) == 6
    assert cpu_workers(runs(1), cores=2) == 1
    assert cpu_workers(runs(5) + runs(1, gpus=2), cores=8) == 1
    from sweep.train.devices import cpu_count

    assert worker_slots(None, None, 1, runs(3)) == [None] * min(3, cpu_count())
    assert worker_slots(None, 1, 1, runs(3)) == [None]  # --workers 1 stays available
