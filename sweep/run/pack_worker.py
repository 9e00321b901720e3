"""A worker's side of packed training (sweep/train/pack.py): take the queued runs that pack with the one it
claimed, train them as one PackedRun, and record each as its own run: records, checkpoints, status.

Each run of a pack keeps its own claim (trial), heartbeat, records and checkpoint, so the store
sees K ordinary runs. A checkpoint of a packed run is written as its run alone would hold it
(`pack.tower_view`): a pack whose worker dies leaves K runs that are re-queued one by one, and a
run with a checkpoint trains alone from it (sweep/run/resume.py); the others pack again from epoch 0.
"""

from __future__ import annotations

import contextlib
import math
import traceback
from dataclasses import asdict
from typing import Any

from sweep import vocab
from sweep.config.plan import RunSpec
from sweep.run import events, resume
from sweep.run.endings import Ending, end_run, pruned_error, should_prune
from sweep.store import Lease, Store
from sweep.train import checkpoint, pack


def size_for(claim: Lease, limit: int | None, places: resume.Places, alone: set[str]) -> int:
    """How many runs the claimed run may pack with itself: 1 when it must train alone (`alone`: runs
    whose pack failed in this worker).
    """
    spec = claim.spec
    if pack.pack_key(spec) is None or places.models is not None or spec.run_id in alone:
        return 1  # --keep-models saves each run's compiled model
    if places.checkpoint(spec.run_id).exists():
        return 1  # it resumes alone from its checkpoint
    return limit if limit is not None else pack.default_size(spec.point.train.batch_size)


def claim_mates(store: Store, claim: Lease, size: int, places: resume.Places, alone: set[str]) -> list[Lease]:
    """The claimed run and up to size - 1 more queued runs that pack with it, each claimed."""
    key = pack.pack_key(claim.spec)

    def mate_of(spec: RunSpec) -> bool:
        return pack.pack_key(spec) == key and spec.run_id not in alone and not places.checkpoint(spec.run_id).exists()

    claims = [claim]
    while len(claims) < size:
        mate = store.claim_next(accept=mate_of)
        if mate is None:
            break
        claims.append(mate)
    return claims


def run_pack(store: Store, claims: list[Lease], emit: events.Emit, places: resume.Places) -> list[str]:
    """Train the claimed (and started) runs as one pack; returns each run's status, in order.

    An error (one run's data or model, say) does not fail the pack's runs: those still training are
    queued again (status interrupted) for the caller to train alone, where the run at fault fails on
    its own and the others go on from their checkpoints. Ctrl-C propagates (the caller re-queues).
    """
    from sweep.train.records import Diverged, total_steps
    from sweep.train.trainer import forget_compiled

    for claim in claims:
        emit(events.RunStarted(claim.spec.run_id, claim.spec.point.train.epochs))
    endings: dict[int, Ending] = {}
    last: dict[int, dict[str, Any]] = {}
    epochs = claims[0].spec.point.train.epochs
    packed = None
    try:
        with contextlib.ExitStack() as beating:
            for claim in claims:
                beating.enter_context(store.heartbeat(claim))
            packed = pack.PackedRun([c.spec for c in claims])
            steps = packed.steps_per_epoch
            epochs = math.ceil(total_steps(claims[0].spec.point.train, steps) / steps)
            for claim in claims:
                store.record_info(claim, asdict(packed.info))
                if epochs != claim.spec.point.train.epochs:
                    emit(events.EpochsKnown(claim.spec.run_id, claim.spec.point.train.epochs, epochs))
            for found in packed.records():
                for k, record in found.items():
                    if isinstance(record, Diverged):
                        endings[k] = Ending(vocab.DIVERGED, str(record), epochs, last.get(k))
                        continue
                    last[k] = record.to_dict()
                    _store_record(store, claims[k], packed, k, last[k], places, emit, epochs)
                    if should_prune(claims[k], record.epoch, epochs):
                        error = pruned_error(claims[k], record.epoch)
                        endings[k] = Ending(vocab.PRUNED, error, epochs, last[k])
                        packed.end(k)
            for k, tower in enumerate(packed.towers):
                if k not in endings:
                    endings[k] = Ending(vocab.DONE, None, epochs, last.get(k))
                    if tower.stopped_early is not None:
                        store.record_fact(claims[k], vocab.STOPPED_EARLY, tower.stopped_early)
    except KeyboardInterrupt:
        forget_compiled()
        raise
    except Exception:  # noqa: BLE001 - one run's error must not fail its mates: each trains alone next
        forget_compiled()
        reason = f"its pack failed ({traceback.format_exc().strip().splitlines()[-1]}); it trains alone next"
        ended = [endings.get(k) for k in range(len(claims))]
        return [
            end_run(store, claim, emit, places, e, None) if e else _requeue(store, claim, reason, emit)
            for claim, e in zip(claims, ended, strict=True)
        ]
    return [end_run(store, claim, emit, places, endings[k], None) for k, claim in enumerate(claims)]


def _requeue(store: Store, claim: Lease, reason: str, emit: events.Emit) -> str:
    """End the attempt unfinished and queue the run again (its checkpoint, if any, is kept)."""
    store.requeue(claim, reason)
    emit(events.RunInterrupted(claim.spec.run_id, reason))
    return vocab.INTERRUPTED


def _store_record(
    store: Store,
    claim: Lease,
    packed: pack.PackedRun,
    k: int,
    record: dict[str, Any],
    places: resume.Places,
    emit: events.Emit,
    epochs: int,
) -> None:
    """The store takes the record, then the run's checkpoint is written at it: both or neither."""
    spec = claim.spec
    with resume.uninterrupted():
        store.record_epoch(claim, record)
        view = pack.tower_view(packed.model, k)
        position = packed.towers[k].position
        checkpoint.save(places.checkpoint(spec.run_id), spec.run_id, spec.to_json(), position, record, view)
    emit(events.EpochDone(spec.run_id, epochs, record))
