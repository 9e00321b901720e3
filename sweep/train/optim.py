"""The optimizer a run trains with: `train.optimizer` at the effective learning rate (scaled by batch
size on request, `train.lr_scaling`), with an optional linear warm-up per step (`train.warmup_epochs`).
"""

from __future__ import annotations

import math
from typing import Any

from sweep.config import TrainConfig


def effective_lr(cfg: TrainConfig) -> float:
    """train.lr scaled by global batch / reference batch (linear) or its square root (sqrt)."""
    if cfg.lr_scaling == "none":
        return cfg.lr
    ratio = cfg.batch_size / float(cfg.reference_batch_size or cfg.batch_size)
    return cfg.lr * (ratio if cfg.lr_scaling == "linear" else math.sqrt(ratio))


def learning_rate(cfg: TrainConfig, steps_per_epoch: int) -> Any:
    """A float (the defaults: train.lr itself, as before), or a warm-up schedule."""
    lr = effective_lr(cfg)
    warmup_steps = round(cfg.warmup_epochs * steps_per_epoch)
    return warmup_schedule(lr, warmup_steps) if warmup_steps > 0 else lr


def warmup_schedule(lr: float, warmup_steps: int) -> Any:
    """The warm-up schedule, `sweep.train.warmup.Warmup` (imported here: it imports Keras at its top)."""
    from sweep.train.warmup import Warmup

    return Warmup(lr, warmup_steps)


def make_optimizer(name: str, lr: Any) -> Any:
    """The Keras optimizer `train.optimizer` names, at learning rate `lr` (a float or a schedule)."""
    cls, options = optimizer_class(name)
    return cls(learning_rate=lr, **options)


def optimizer_class(name: str) -> tuple[type, dict[str, Any]]:
    """The Keras optimizer class `train.optimizer` names and its options besides the learning rate."""
    import keras

    if name == "adam":
        return keras.optimizers.Adam, {}
    if name == "momentum":
        return keras.optimizers.SGD, {"momentum": 0.9}
    return keras.optimizers.SGD, {}


def current_lr(model: Any) -> float:
    import keras

    return float(keras.ops.convert_to_numpy(model.optimizer.learning_rate))
