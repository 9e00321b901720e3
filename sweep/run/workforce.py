"""A sweep's worker processes: where each runs (its devices), what it is told (flags), and what
happens when one dies (its runs queued again or failed past the cap, and a new worker in its place).
No TensorFlow.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sweep.config.plan import RunSpec
from sweep.run import coordinator
from sweep.store import Dead, RetryPolicy, Store

Say = Callable[[str], None]


def say_dead(dead: list[Dead], say: Say, warn: Say) -> None:
    """The runs whose worker died: queued again, or failed past the cap (`RetryPolicy.max_requeues`)."""
    queued = [d.run_id for d in dead if d.failed is None]
    if queued:
        say(f"re-queued {len(queued)} run(s) whose worker died: {', '.join(queued)}")
    for d in dead:
        if d.failed is not None:
            warn(f"FAILED {d.run_id}: {d.failed}")


def replace_dead(store: Store, policy: RetryPolicy, say: Say, warn: Say) -> coordinator.OnDeath:
    """What the coordinator does when a worker dies: its runs queued again (or failed past the cap), and
    a new worker in its place if it held a run and runs are still queued.
    """

    def on_death(pid: int, code: int) -> coordinator.Death:
        dead = store.requeue_dead(policy, {pid: coordinator.ended(code)})
        say_dead(dead, say, warn)
        if not dead and not store.ended_by_death(pid):  # another worker may have re-queued its run first
            return coordinator.Death.UNEXPLAINED
        return coordinator.Death.REPLACE if store.queued() else coordinator.Death.ACCOUNTED

    return on_death


def packs(pack: int | None, queued: list[RunSpec]) -> bool:
    """Whether the workers may train packs: `--pack K` above 1, or without it a queued run's batch
    size that `pack.PACK_SIZES` packs. Such workers run their towers side by side (sweep/train/devices.py).
    """
    from sweep.train.pack import default_size

    return pack > 1 if pack else any(default_size(spec.point.train.batch_size) > 1 for spec in queued)


def worker_flags(results: Path, keep_models: bool, pack: int | None) -> list[str]:
    """What a worker process needs to know: the results folder (where a database store's
    checkpoints and --keep-models' final models go, sweep/run/resume.py) and --pack.
    """
    keep = ["--keep-models"] if keep_models else []
    return ["--results", str(results), *keep, *(["--pack", str(pack)] if pack else [])]


def worker_slots(
    device_ids: str | None, workers: int | None, trials_per_gpu: int, queued: list[RunSpec]
) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES per worker process, from --devices, --trials-per-gpu and --workers."""
    from sweep.train import devices

    pool = devices.device_pool(device_ids)
    if not pool:
        return [None] * (workers or cpu_workers(queued, devices.cpu_count()))
    replicas = max(s.point.train.gpus for s in queued)
    slots: list[str | None] = list(devices.worker_slots(pool, replicas, trials_per_gpu))
    return slots[:workers] if workers else slots


def cpu_workers(queued: list[RunSpec], cores: int) -> int:
    """Workers by default on a machine without GPUs: one per core, each with a thread, up to one per
    queued run. Measured 1.43-1.55x one worker with every core on three grids (docs/levers.md): a small
    model's ops leave a second thread idle much of the time. One worker where a queued run has
    replicas (gpus above 1: its logical CPU devices share one process's threads).
    """
    if any(spec.point.train.gpus > 1 for spec in queued):
        return 1
    return max(1, min(cores, len(queued)))


def devices_note(slots: list[str | None]) -> str:
    used = [s for s in slots if s is not None]
    return f" on devices {' | '.join(used)} (CUDA_VISIBLE_DEVICES per worker)" if used else ""
