"""Run checkpoints: what they hold, writing them atomically, restoring them (where they live: sweep/run/resume.py).

A worker writes one checkpoint per run, `<checkpoints>/<run_id>.npz`, after every record the
store has taken (sweep/run/resume.py), so a run that is re-queued (kill -9, SIGTERM from Slurm,
Ctrl-C) continues after its last record instead of at epoch 0. It holds every model variable
(weights and BatchNorm moving statistics, plus any random-seed state of a user's model), every
optimizer variable (its iteration counter, Adam's moments, SGD's momentum), and the position
in the run's data order (`Position`: the epoch, the record within it, the epoch's running means
so far, early stopping's state). The data order itself needs no random state: each epoch's
permutation is drawn from a sub-seed of the run seed and the epoch (sweep/train/data.py), and the
noise-scale batches from the step (sweep/train/trainer.py), so the position alone fixes them.

A checkpoint is written to a temporary name in its folder, fsynced, and renamed over the old
one (`os.replace`), so a process killed mid-write leaves the previous checkpoint whole.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import zipfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sweep import vocab
from sweep.base import atomic
from sweep.train import backends

LEFTOVER_SECONDS = 600.0  # a temporary file untouched this long is a killed write's, not one in progress
FORMAT = 1  # bumped when the contents change; another format is ignored (the run starts over)


@dataclass(frozen=True)
class Position:
    """Where a run stands after one record: enough to train on to the next as if never stopped."""

    epoch: int  # 1-based epoch of the record
    index: int  # the record's index among its epoch's stops (train.record_stops)
    stretches: list[Any] = field(default_factory=list)  # the epoch's (accuracy, loss, images) so far
    seconds: float = 0.0  # the epoch's fit seconds so far (timing only)
    watch: list[float] | None = None  # early stopping's (best, waited), as after this record
    stopped: bool = False  # early stopping (or a callback) ended the run at this record

    def covers(self, epoch: int, stops: int) -> bool:
        """Whether the epoch (of `stops` records) is finished at this position."""
        return epoch < self.epoch or (epoch == self.epoch and self.index == stops - 1)


@dataclass(frozen=True)
class Saved:
    """A checkpoint as read back."""

    run_id: str
    spec: str  # the run's spec JSON, to refuse a checkpoint of another run
    position: Position
    record: dict[str, Any]  # the record it was written after, as the store holds it
    model: list[np.ndarray]
    optimizer: list[np.ndarray]
    replicas: dict[str, np.ndarray] = field(default_factory=dict)  # "m3r1": replica 1's own copy of m3

    @property
    def epoch(self) -> float:
        return float(self.record[vocab.EPOCH])


def save(path: Path, run_id: str, spec: str, position: Position, record: dict[str, Any], model: Any) -> None:
    """Write the checkpoint atomically: a temporary file in the same folder, fsync, rename over the old."""
    meta = {"format": FORMAT, "run_id": run_id, "spec": spec, "position": asdict(position), "record": record}
    arrays = _arrays_of(model.variables, "m") | _arrays_of(model.optimizer.variables, "o")
    try:
        with atomic.replacing(path) as tmp:  # a temporary name no other process shares (containers share pids)
            with open(tmp, "wb") as out:
                np.savez(out, meta=np.array(json.dumps(meta)), **arrays)  # type: ignore[arg-type]  # numpy's stub
            _fsync(tmp)
    except OSError as err:  # a write to an open file names no file: the checkpoint is what could not be written
        if err.filename is not None:
            raise
        raise OSError(err.errno, err.strerror, str(path)) from err
    _sync_folder(path.parent)


def _arrays_of(variables: list[Any], prefix: str) -> dict[str, np.ndarray]:
    """Each variable's value as `<prefix><i>`. Under MirroredStrategy each replica keeps its own
    BatchNorm moving statistics (updated from its share of the batch, never synchronised), and
    each replica evaluates with its own: a replica whose copy differs is saved too, `<prefix><i>r<k>`.
    """
    import keras

    arrays = {}
    for i, variable in enumerate(variables):
        arrays[f"{prefix}{i}"] = first = np.asarray(keras.ops.convert_to_numpy(variable))
        for k, copy in enumerate(_replicas(variable)[1:], start=1):
            value = np.asarray(copy.numpy())
            if not np.array_equal(value, first):
                arrays[f"{prefix}{i}r{k}"] = value
    return arrays


def _replicas(variable: Any) -> tuple[Any, ...]:
    """The per-replica copies of a mirrored variable; one copy (itself) otherwise. Only TensorFlow
    mirrors (a torch variable's `value.values` is a tensor method, not copies).
    """
    if not backends.is_tensorflow():
        return (variable,)
    return tuple(getattr(getattr(variable, "value", None), "values", None) or (variable,))


def _fsync(written: Path) -> None:
    """The file's bytes on the disk before it is renamed over the old one (`atomic.replacing`)."""
    with open(written, "rb") as handle:
        os.fsync(handle.fileno())


def _sync_folder(folder: Path) -> None:
    """The folder's entry too, so the rename itself survives a power loss."""
    with contextlib.suppress(OSError):  # not every file system lets a folder be opened and synced
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def load(path: Path) -> Saved | None:
    """The checkpoint at `path`; None if there is none, or it is unreadable or of another format."""
    try:
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta"]))
            model = _arrays(data, "m")
            optimizer = _arrays(data, "o")
            replicas = {name: data[name] for name in data.files if name[:1] in ("m", "o") and "r" in name}
    except (OSError, ValueError, KeyError, zipfile.BadZipFile, EOFError):
        return None
    try:  # metadata of another shape (hand-edited, another tool's .npz): no checkpoint, not a failed run
        if meta.get("format") != FORMAT:
            return None
        position = Position(**meta["position"])
        return Saved(meta["run_id"], meta["spec"], position, meta["record"], model, optimizer, replicas)
    except (AttributeError, KeyError, TypeError):
        return None


def _arrays(data: Any, prefix: str) -> list[np.ndarray]:
    count = sum(1 for name in data.files if name.startswith(prefix) and name[1:].isdigit())
    return [data[f"{prefix}{i}"] for i in range(count)]


class Mismatch(ValueError):
    """A checkpoint whose variables do not fit the run's model (another architecture or optimizer)."""


def restore(model: Any, strategy: Any, saved: Saved) -> None:
    """Put the checkpoint's variables into the run's compiled model (fresh or reused from the cache).

    An optimizer that has not trained yet has no slots: it is built here the way Keras's first
    `fit` builds it, so its variables line up. Shapes are checked before anything is assigned.
    """
    if not model.optimizer.built:
        with strategy.scope():
            model.optimizer.build(model.trainable_variables)
    counts = (len(model.variables), len(model.optimizer.variables))
    if counts != (len(saved.model), len(saved.optimizer)):
        raise Mismatch("the checkpoint holds another number of variables than the run's model and optimizer")
    optimizer = list(zip(model.optimizer.variables, saved.optimizer, strict=True))
    pairs = [*zip(model.variables, saved.model, strict=True), *optimizer]
    if any(tuple(v.shape) != a.shape for v, a in pairs):
        raise Mismatch("the checkpoint's variables do not match the run's model and optimizer")
    own = [(_replica_copy(model, name), value) for name, value in saved.replicas.items()]
    for variable, value in pairs:
        variable.assign(value)
    for copy, value in own:  # a replica's own BatchNorm statistics, after the assignment above set every copy
        copy.assign(value)


def _replica_copy(model: Any, name: str) -> Any:
    """The replica copy that `m3r1` (replica 1 of model variable 3) or `o5r1` names."""
    index, _, k = name[1:].partition("r")
    copies = _replicas((model.variables if name[0] == "m" else model.optimizer.variables)[int(index)])
    if int(k) >= len(copies):
        raise Mismatch("the checkpoint was written with more replicas than the run has")
    return copies[int(k)]


def remove(path: Path) -> None:
    """Delete a run's checkpoint, and the temporary files killed writes left behind: those untouched for
    LEFTOVER_SECONDS. A younger one may be another process's write in progress (a zombie attempt of the
    same run, on a shared file system), which must not lose its file mid-write.
    """
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    _remove_old(path.parent.glob(f".{path.name}.*"))  # atomic.replacing's temporary names


def sweep_leftovers(folder: Path) -> int:
    """Remove every checkpoint's temporary file a killed write left in `folder` (untouched for LEFTOVER_SECONDS),
    whichever run it was for: a worker does it as it starts, so a run that finished meanwhile leaves none for
    ever. Return how many were removed.
    """
    return _remove_old(folder.glob(".*.npz.*")) if folder.is_dir() else 0


def _remove_old(leftovers: Iterable[Path]) -> int:
    removed = 0
    for leftover in leftovers:
        with contextlib.suppress(FileNotFoundError):
            if time.time() - leftover.stat().st_mtime > LEFTOVER_SECONDS:
                leftover.unlink()
                removed += 1
    return removed


def save_model(folder: Path, run_id: str, model: Any) -> Path:
    """The run's final model as `<folder>/<run_id>.keras`, written atomically like a checkpoint."""
    path = folder / f"{run_id}.keras"
    with atomic.replacing(path, suffix=".keras") as tmp:  # Keras wants the .keras suffix
        model.save(tmp)
        _fsync(tmp)
    _sync_folder(path.parent)
    return path


def load_model(path: Path | str, compile: bool = True) -> Any:
    """A saved final model, with the classes a built-in model may hold (GhostBatchNormalization, and
    a warm-up schedule's `batchsweep>Warmup`, which importing `sweep.train.warmup` registers).
    """
    import keras

    import sweep.train.warmup  # noqa: F401 - registers the warm-up schedule's class with Keras
    from sweep.train.model import ghost_batch_norm_class

    custom = {"GhostBatchNormalization": ghost_batch_norm_class()}
    return keras.saving.load_model(path, custom_objects=custom, compile=compile)
