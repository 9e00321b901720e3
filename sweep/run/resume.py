"""A worker's side of checkpoints: resume a claimed run, checkpoint it at every record, clean up.

The store and the checkpoint must tell the same story. Each attempt at a run is a trial of its
own, so a re-queued run's earlier records sit on the attempt that was cut short. A checkpoint is
written only after the store has taken its record, so the store is never behind it; it may be
one record ahead (killed between the two writes), and that record is trained again, the same
numbers (the run is deterministic). On claiming a run, the checkpoint is used only if an earlier
attempt holds exactly the record it was written after: those records, up to and including that
one, are copied onto the new attempt (so epochs.csv has each record once), the model and
optimizer are restored, and training goes on at the next record. Otherwise the run starts at
epoch 0 and the stale checkpoint is removed.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sweep import vocab
from sweep.exits import UsageError
from sweep.store import Lease, Store, storage
from sweep.train import checkpoint
from sweep.vocab import RunStatus

Say = Callable[[str], None]
CHECKPOINTS_ENV = "BATCHSWEEP_CHECKPOINTS"
CHECKPOINTS_DIR = "checkpoints"
MODELS_DIR = "models"


@dataclass(frozen=True)
class Places:
    """Where a worker keeps checkpoints, and final models (with --keep-models only)."""

    checkpoints: Path
    models: Path | None = None
    results: Path | None = None  # the results folder: its timing.csv bounds a first record's wait (watchdog.py)

    def checkpoint(self, run_id: str) -> Path:
        return self.checkpoints / f"{run_id}.npz"


def places(target: str, study: str, results: Path | None = None, keep_models: bool = False) -> Places:
    """$BATCHSWEEP_CHECKPOINTS, else `checkpoints/` beside a journal file, else (a database store)
    in the results folder: `results`, default results/<study>. Models go to <results>/models, where
    the results folder of a journal store defaults to the journal's folder.
    """
    journal = None if storage.is_database(target) else Path(target).parent
    folder = results or journal or Path("results") / study
    env = os.environ.get(CHECKPOINTS_ENV)
    checkpoints = Path(env) if env else (journal or folder) / CHECKPOINTS_DIR
    if not env and checkpoints.is_symlink():  # a place of the user's own choosing goes through the variable
        raise UsageError(
            f"{checkpoints} is a symbolic link; remove it, or set ${CHECKPOINTS_ENV} to keep checkpoints elsewhere"
        )
    return Places(checkpoints, folder / MODELS_DIR if keep_models else None, folder)


def _log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)  # a worker's stderr is its log file


def resume(
    store: Store, lease: Lease, model: Any, strategy: Any, places: Places, say: Say = _log
) -> tuple[checkpoint.Position, dict[str, Any]] | None:
    """Restore a run alone's compiled `model` (under its `strategy`) from its checkpoint if the store
    agrees with it; return the position to go on from and the record it stands at, or None to start
    at epoch 0.
    """
    spec = lease.spec
    path = places.checkpoint(spec.run_id)
    if not path.exists():
        return None
    saved = checkpoint.load(path)
    records = _agreed(saved, store.earlier_records(lease)) if saved and saved.spec == spec.to_json() else None
    if saved is None or records is None:
        say(f"checkpoint of {spec.run_id} does not match the store's records; starting from epoch 0")
        checkpoint.remove(path)
        return None
    try:
        checkpoint.restore(model, strategy, saved)
    except checkpoint.Mismatch as err:
        say(f"checkpoint of {spec.run_id} not used ({err}); starting from epoch 0")
        checkpoint.remove(path)
        return None
    for record in records:  # the records before the checkpoint, once, on this attempt
        store.record_epoch(lease, record)
    store.record_fact(lease, vocab.RESUMED_FROM_EPOCH, saved.epoch)
    say(f"resuming {spec.run_id} from its checkpoint after epoch {saved.epoch:g}")
    return saved.position, records[-1]


def _agreed(saved: checkpoint.Saved, attempts: list[list[dict[str, Any]]]) -> list[dict[str, Any]] | None:
    """The records of the latest earlier attempt that holds the checkpoint's record, up to it."""
    wanted = _text(saved.record)
    for records in attempts:
        texts = [_text(r) for r in records]
        if wanted in texts:
            return records[: texts.index(wanted) + 1]
    return None


def _text(record: dict[str, Any]) -> str:
    """A record compared as text: NaN equals NaN, and float digits are exact."""
    return json.dumps(record, sort_keys=True)


def keep_model(places: Places, run_id: str, status: RunStatus, model: Any) -> None:
    """--keep-models: a done run's final model as <results>/models/<run_id>.keras."""
    if places.models is not None and status is RunStatus.DONE and model is not None:
        checkpoint.save_model(places.models, run_id, model)


def drop_checkpoint(places: Places, run_id: str, status: RunStatus) -> None:
    """A run that ended (done, pruned, diverged, failed) needs no checkpoint; --keep-models keeps it.
    A failed run is retried from epoch 0, as its last checkpoint may hold what made it fail.
    """
    if places.models is None and (status.final or status is RunStatus.FAILED):
        checkpoint.remove(places.checkpoint(run_id))
