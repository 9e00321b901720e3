"""Which queued run a worker claims next (`claim_for`), which train with it (sweep/train/pack.py's
`pack_key`), and how many.

A run trains alone where it must: it cannot pack (replicas, the noise scale, user callbacks),
`--keep-models` saves its own compiled model, it resumes from a checkpoint, or its pack failed in
this worker. Each mate is claimed like any run and keeps its own lease (trial) and heartbeat.
"""

from __future__ import annotations

from sweep.config.plan import RunSpec
from sweep.run import resume
from sweep.store import Lease, Store
from sweep.train import pack


def claim_for(store: Store, last: RunSpec | None) -> Lease | None:
    """The worker's next run: one that trains in the compiled model of its last run (`last`), else one
    whose graph no worker is training now, else the queue's next. Each new graph costs a worker 1-3 s
    of building and tracing, so workers that split a grid's graphs between them trace fewer (the
    numbers are the same in any order: a reused compiled model gives a fresh one's, bit for bit).
    """
    if last is not None:
        mine = pack.shared_graph(last)
        lease = store.claim_next(accept=lambda spec: pack.shared_graph(spec) == mine)
        if lease is not None:
            return lease
    busy = {pack.shared_graph(spec) for spec in store.running()}
    return store.claim_next(accept=lambda spec: pack.shared_graph(spec) not in busy) or store.claim_next()


def size_for(lease: Lease, limit: int | None, places: resume.Places, alone: set[str]) -> int:
    """How many runs the claimed run may pack with itself: 1 when it must train alone (`alone`: runs
    whose pack failed in this worker).
    """
    spec = lease.spec
    if pack.pack_key(spec) is None or places.models is not None or spec.run_id in alone:
        return 1  # --keep-models saves each run's compiled model
    if places.checkpoint(spec.run_id).exists():
        return 1  # it resumes alone from its checkpoint
    return limit if limit is not None else pack.default_size(spec.point.train.batch_size)


def claim_mates(store: Store, lease: Lease, size: int, places: resume.Places, alone: set[str]) -> list[Lease]:
    """The claimed run and up to size - 1 more queued runs that pack with it, each claimed."""
    key = pack.pack_key(lease.spec)

    def mate_of(spec: RunSpec) -> bool:
        return pack.pack_key(spec) == key and spec.run_id not in alone and not places.checkpoint(spec.run_id).exists()

    leases = [lease]
    while len(leases) < size:
        mate = store.claim_next(accept=mate_of)
        if mate is None:
            break
        leases.append(mate)
    return leases
