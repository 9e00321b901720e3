"""A sweep's worker processes: where each runs (its devices), what it is told (flags), and what
happens when one dies (its runs queued again or failed past the cap, and a new worker in its place).
No TensorFlow."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sweep import coordinator
from sweep.plan import RunSpec
from sweep.store import Dead, RetryPolicy, Store

if TYPE_CHECKING:
    from sweep.orchestrate import Console, Options


def say_dead(dead: list[Dead], console: Console) -> None:
    """The runs whose worker died: queued again, or failed past the cap (`RetryPolicy.max_requeues`)."""
    queued = [d.run_id for d in dead if d.failed is None]
    if queued:
        console.say(f"re-queued {len(queued)} run(s) whose worker died: {', '.join(queued)}")
    for d in dead:
        if d.failed is not None:
            console.warn(f"FAILED {d.run_id}: {d.failed}")


def replace_dead(store: Store, policy: RetryPolicy, console: Console) -> coordinator.OnDeath:
    """What the coordinator does when a worker dies: its runs queued again (or failed past the cap), and
    a new worker in its place if it held a run and runs are still queued."""

    def on_death(pid: int, code: int) -> coordinator.Death:
        dead = store.requeue_dead(policy, {pid: coordinator.ended(code)})
        say_dead(dead, console)
        if not dead and not store.ended_by_death(pid):  # another worker may have re-queued its run first
            return coordinator.Death.UNEXPLAINED
        return coordinator.Death.REPLACE if store.queued() else coordinator.Death.ACCOUNTED

    return on_death


def packs(pack: int | None, queued: list[RunSpec]) -> bool:
    """Whether the workers may train packs: `--pack K` above 1, or without it a queued run's batch
    size that `pack.PACK_SIZES` packs. Such workers run their towers side by side (sweep/devices.py)."""
    from sweep.pack import default_size

    return pack > 1 if pack else any(default_size(spec.point.train.batch_size) > 1 for spec in queued)


def worker_flags(results: Path, options: Options) -> list[str]:
    """What a worker process needs to know: the results folder (where a database store's
    checkpoints and --keep-models' final models go, sweep/checkpoint.py) and --pack."""
    keep = ["--keep-models"] if options.keep_models else []
    return ["--results", str(results), *keep, *(["--pack", str(options.pack)] if options.pack else [])]


def worker_slots(options: Options, queued: list[RunSpec]) -> list[str | None]:
    """CUDA_VISIBLE_DEVICES per worker process, from devices / trials_per_gpu / workers."""
    from sweep import devices

    pool = devices.device_pool(options.devices)
    if not pool:
        return [None] * (options.workers or 1)
    replicas = max(s.point.train.gpus for s in queued)
    slots: list[str | None] = list(devices.worker_slots(pool, replicas, options.trials_per_gpu))
    return slots[: options.workers] if options.workers else slots


def devices_note(slots: list[str | None]) -> str:
    used = [s for s in slots if s is not None]
    return f" on devices {' | '.join(used)} (CUDA_VISIBLE_DEVICES per worker)" if used else ""
