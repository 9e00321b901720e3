"""The warm-up learning-rate schedule (`train.warmup_epochs`, sweep/train/optim.py) as a Keras class of its own.

A module apart because it imports Keras at its top: `sweep.train.optim` is imported where TensorFlow must
not be, and imports this module only when a run has a warm-up. Importing it registers the class
with Keras as `batchsweep>Warmup`, which is how a saved model names it. Keras finds a registered
class only once its module is imported, so a model kept by `--keep-models` whose run had a warm-up
loads, compiled, with::

    import keras
    import sweep.train.warmup  # registers batchsweep>Warmup

    model = keras.saving.load_model(path)

(`sweep.train.checkpoint.load_model(path)` imports it itself.)
"""

from __future__ import annotations

from typing import Any

import keras


@keras.saving.register_keras_serializable(package="batchsweep")
class Warmup(keras.optimizers.schedules.LearningRateSchedule):
    """lr x min(1, (step + 1) / warmup_steps): step 0 uses lr / warmup_steps, then linear up to lr."""

    def __init__(self, lr: float, warmup_steps: int) -> None:
        super().__init__()
        self.lr = lr
        self.warmup_steps = warmup_steps

    def __call__(self, step: Any) -> Any:
        ramp = keras.ops.minimum(1.0, (keras.ops.cast(step, "float32") + 1.0) / self.warmup_steps)
        return self.lr * ramp

    def get_config(self) -> dict[str, Any]:
        return {"lr": self.lr, "warmup_steps": self.warmup_steps}

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> Warmup:
        return cls(lr=config["lr"], warmup_steps=config["warmup_steps"])
