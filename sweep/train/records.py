"""What a run records: `EpochRecord` (one row of epochs.csv), when records fall (`record_stops`),
and how one is assembled from the training stretches and evaluations (`assemble`). No TensorFlow.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from sweep import vocab
from sweep.config import TrainConfig


@dataclass(frozen=True)
class EpochRecord:
    """One row of epochs.csv (without the spec columns); names from sweep.vocab."""

    epoch: float  # 1-based, an int at the end of an epoch (epoch 2 is the post's); fractional inside one
    step: int  # optimizer steps so far
    train_acc: float
    train_eval_acc: float
    val_acc: float
    train_loss: float
    train_eval_loss: float
    val_loss: float
    gap: float
    eval_gap: float
    epoch_seconds: float  # the fit call only, not evaluation; epoch 1 includes graph tracing
    samples_per_second: float
    lr: float
    noise_scale: float | None = None  # B_simple, with train.noise_scale only (sweep/train/noise.py)
    grad_norm_sq: float | None = None
    grad_noise_trace: float | None = None
    train_eval_acc_recal: float | None = None  # with train.recalibrate_bn only (sweep/train/recal.py)
    val_acc_recal: float | None = None
    train_eval_loss_recal: float | None = None
    val_loss_recal: float | None = None
    eval_gap_recal: float | None = None
    train_eval_balanced_acc: float | None = None  # with data.imbalance > 0 only: mean recall over classes

    def to_dict(self) -> dict[str, Any]:
        """The record as stored; the noise-scale and recalibrated fields only where measured."""
        return {k: v for k, v in asdict(self).items() if v is not None or k not in vocab.OPTIONAL_METRICS}


class Diverged(Exception):
    """The training loss became NaN or infinite."""

    def __init__(self, epoch: int, step: int, loss: float) -> None:
        super().__init__(f"training loss became {loss} in epoch {epoch} (step {step})")
        self.epoch, self.step, self.loss = epoch, step, loss


def check_finite(epoch: float, step: int, stretches: list[tuple[float, float, int]]) -> None:
    """Raise Diverged if the epoch's running loss, or its latest stretch's, is NaN or infinite."""
    loss = running_means(stretches)[1]
    if not math.isfinite(loss) or not math.isfinite(stretches[-1][1]):
        raise Diverged(math.ceil(epoch), step, loss)


def assemble(
    epoch: float,
    step: int,
    stretches: list[tuple[float, float, int]],
    seconds: float,
    train_eval: dict[str, float],
    val: dict[str, float],
    lr: float,
    extra: dict[str, float],
) -> EpochRecord:
    """A record from its evaluations; train_acc and train_loss are the running means of `stretches`."""
    train_acc, loss, images = running_means(stretches)
    return EpochRecord(
        epoch=epoch,
        step=step,
        train_acc=train_acc,
        train_eval_acc=train_eval["accuracy"],
        val_acc=val["accuracy"],
        train_loss=loss,
        train_eval_loss=train_eval["loss"],
        val_loss=val["loss"],
        gap=train_acc - val["accuracy"],
        eval_gap=train_eval["accuracy"] - val["accuracy"],
        epoch_seconds=seconds,
        samples_per_second=images / seconds,
        lr=lr,
        **extra,
    )


def balanced(predicted: np.ndarray, y: np.ndarray) -> dict[str, float]:
    """Mean recall over classes on train_eval, for an imbalanced set (plain accuracy rewards class 0)."""
    labels = np.argmax(predicted, axis=1)
    recalls = [float(np.mean(labels[y == k] == k)) for k in np.unique(y)]
    return {vocab.TRAIN_EVAL_BALANCED_ACC: float(np.mean(recalls))}


def total_steps(cfg: TrainConfig, steps_per_epoch: int) -> int:
    """Optimizer steps the run takes: train.epochs passes, or exactly train.steps."""
    if cfg.budget == "steps":
        return int(cfg.steps or 0)
    return cfg.epochs * steps_per_epoch


def record_stops(steps_per_epoch: int, total: int, every: int | None) -> list[list[int]]:
    """Per epoch, the steps into that epoch after which a record is written.

    The last stop of an epoch is where it ends: steps_per_epoch, or fewer in a
    last partial epoch under budget: steps. `every` adds a stop at every multiple
    of it, counted in optimizer steps since the start of the run.
    """
    stops = []
    for start in range(0, total, steps_per_epoch):
        end = min(start + steps_per_epoch, total)
        inside = [s - start for s in range(start + 1, end) if every and s % every == 0]
        stops.append(inside + [end - start])
    return stops


def epoch_number(epoch: int, stop: int, steps_per_epoch: int) -> float:
    """The record's `epoch`: the integer epoch at its end, else epochs completed (fractional)."""
    if stop == steps_per_epoch:
        return epoch
    return round(epoch - 1 + stop / steps_per_epoch, 6)


def running_means(stretches: list[tuple[float, float, int]]) -> tuple[float, float, int]:
    """(accuracy, loss, images) over an epoch's stretches, each (mean accuracy, mean loss, images).

    One stretch (every record at the end of a whole epoch) returns Keras's own
    numbers untouched, so the defaults reproduce the records of a single fit call.
    """
    images = sum(n for _, _, n in stretches)
    if len(stretches) == 1:
        return stretches[0][0], stretches[0][1], images
    return (sum(a * n for a, _, n in stretches) / images, sum(loss * n for _, loss, n in stretches) / images, images)
