"""A sweep whose store and CSVs are real and whose records are synthetic: what `plan`, `status`
and `report` are timed on (benchmarks/speed/commands.py), with no training.

`fill_store` is the only code of the benchmarks that uses `sweep.store`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sweep import vocab
from sweep.config import load_grid
from sweep.config.plan import RunSpec, plan
from sweep.vocab import RunStatus

SYNTHETIC_GRID = Path(__file__).resolve().parents[1] / "synthetic.yaml"
TRAIN_SAMPLES, VAL_SAMPLES = 2880, 720


@dataclass(frozen=True)
class SyntheticRun:
    """What a worker would have recorded for one run: its facts, its epochs and its final value."""

    info: dict[str, Any]
    epochs: tuple[dict[str, Any], ...]
    value: float


def synthetic_sweep(folder: Path, grid: Path = SYNTHETIC_GRID) -> Path:
    """Plan `grid` and record a plausible run for each of its runs in a store under `folder`, with
    the CSVs exported; returns the results folder (folder / the sweep's name).
    """
    parsed = load_grid(grid)
    rng = np.random.default_rng(0)
    results = folder / parsed.name
    results.mkdir(parents=True, exist_ok=True)
    fill_store(results, parsed.name, plan(parsed), lambda spec: synthetic_run(spec, rng))
    return results


def fill_store(results: Path, name: str, runs: list[RunSpec], record: Callable[[RunSpec], SyntheticRun]) -> None:
    """Enqueue `runs` in a journal store in `results`, claim each as a worker would, store
    `record(spec)` (a SyntheticRun) for it, finish it as done, and export the CSVs.
    """
    from sweep.store import Store

    store = Store.open(results / vocab.JOURNAL_FILE, name)
    store.enqueue(runs)
    while (lease := store.claim_next()) is not None:
        run = record(lease.spec)
        store.record_info(lease, run.info)
        for epoch in run.epochs:
            store.record_epoch(lease, epoch)
        store.finish(lease, RunStatus.DONE, value=run.value)
    store.export_csv(results)


def synthetic_run(spec: RunSpec, rng: np.random.Generator) -> SyntheticRun:
    """Accuracies that rise with the steps taken and fall a little with the batch size, seconds that
    fall with it; noise from `rng`.
    """
    batch = spec.point.train.batch_size
    steps = math.ceil(TRAIN_SAMPLES / batch)
    info = {
        "parameters": 71800,
        "train_samples": TRAIN_SAMPLES,
        "val_samples": VAL_SAMPLES,
        "num_classes": 120,
        "replicas": 1,
        "per_replica_batch": batch,
        "virtual_devices": False,
        "devices": "/device:CPU:0",
        "steps_per_epoch": steps,
    }
    epochs = tuple(_synthetic_epoch(epoch, steps, batch, rng) for epoch in range(1, spec.point.train.epochs + 1))
    return SyntheticRun(info, epochs, epochs[-1][vocab.VAL_ACC])


def _synthetic_epoch(epoch: int, steps: int, batch: int, rng: np.random.Generator) -> dict[str, Any]:
    learned = 1 - math.exp(-epoch * steps / 400)
    train_acc = float(np.clip(0.9 * learned + rng.normal(0, 0.02), 0, 1))
    train_eval = float(np.clip(0.85 * learned + rng.normal(0, 0.02), 0, 1))
    val = float(np.clip(0.8 * learned - 0.02 * math.log2(batch / 8) + rng.normal(0, 0.02), 0, 1))
    seconds = TRAIN_SAMPLES / (400 + 4 * batch) * (1.3 if epoch == 1 else 1.0)
    return {
        vocab.EPOCH: epoch,
        vocab.STEP: epoch * steps,
        vocab.TRAIN_ACC: train_acc,
        vocab.TRAIN_EVAL_ACC: train_eval,
        vocab.VAL_ACC: val,
        vocab.TRAIN_LOSS: 4.8 * (1 - train_acc) + 0.1,
        vocab.TRAIN_EVAL_LOSS: 4.8 * (1 - train_eval) + 0.1,
        vocab.VAL_LOSS: 4.8 * (1 - val) + 0.2,
        vocab.GAP: train_acc - val,
        vocab.EVAL_GAP: train_eval - val,
        vocab.EPOCH_SECONDS: seconds,
        vocab.SAMPLES_PER_SECOND: TRAIN_SAMPLES / seconds,
        vocab.LR: 0.001,
    }
