"""A sweep's worker processes: where each runs (its devices), what it is told (flags), and what
happens when one dies (its runs queued again or failed past the cap, and a new worker in its place).
No TensorFlow.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sweep.config.plan import RunSpec
from sweep.run import coordinator
from sweep.store import Dead, RetryPolicy, Store
from sweep.store.tables import threads_by_run

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


@dataclass(frozen=True)
class Crew:
    """The worker processes to start: their devices (`worker_slots`), the threads each, and what to say of it."""

    slots: list[str | None]
    threads: int
    note: str = ""  # said before the workers start, where queued runs pinned the thread count


def crew(store: Store, queued: list[RunSpec], device_ids: str | None, workers: int | None, per_gpu: int) -> Crew:
    """`worker_slots`, and the threads each worker takes: a fair share of the cores, unless queued runs began
    training before. A run's numbers depend on its thread count in their last bits, so a run resumed at another
    count is not the run it began as: the workers then take the count those runs began at (the most common,
    where they differ), and without --workers there are only as many as the cores hold at that count.
    $BATCHSWEEP_THREADS overrides, said where it breaks a run's count.
    """
    slots = worker_slots(device_ids, workers, per_gpu, queued)
    fair = coordinator.threads_per_worker(len(slots))
    ids = {spec.run_id for spec in queued}
    began = [counts[0] for run_id, counts in threads_by_run(store.trials()).items() if run_id in ids and counts]
    if not began:
        return Crew(slots, fair)
    count = fair if os.environ.get(coordinator.THREADS_ENV) else Counter(began).most_common(1)[0][0]
    if count != fair and workers is None and all(slot is None for slot in slots):
        from sweep.train import devices

        slots = slots[: max(1, devices.cpu_count() // count)]
    return Crew(slots, count, _pinned_note(began, count))


def _pinned_note(began: list[int], count: int) -> str:
    same = began.count(count)
    note = f"{len(began)} queued run(s) began training before; {same} at {count} thread(s), the count each worker takes"
    if same < len(began):
        note += f"; {len(began) - same} at another count: their later records may differ in the last bits"
    return note


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
