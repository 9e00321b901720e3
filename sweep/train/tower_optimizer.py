"""The optimizer of a pack (sweep/train/pack.py): `train.optimizer` applying tower k's own learning rate to
tower k's variables, so that each tower's step is the step its run takes alone.

Constant rates are a variable per tower, used in place of the optimizer's one; warm-up schedules are
each tower's own, evaluated at the step as the optimizer evaluates its own. Everything else is the
optimizer's own update.

One mechanism on every backend: the optimizer's `_backend_update_step` (the call that applies the
gradients of a list of variables at one learning rate) runs once per tower, on the tower's variables
(those of the run alone, in their order) at the tower's rate. Behind it each backend updates as it
does for a run alone: variable by variable on TensorFlow and JAX; on torch with torch's `_foreach`
ops, by the subclass Keras swaps in for Adam and SGD there (a subclass of Keras's own class would get
the generic per-variable update instead, whose numbers differ), so the pack's optimizer subclasses
the class Keras instantiates.

jax.jit reads a variable outside the step's state once, when it traces the step: a reused pack model
would train on at the first pack's rates. Off TensorFlow the rates are optimizer state.
"""

from __future__ import annotations

from typing import Any

from sweep.train import backends, optim
from sweep.train.compiled import zero_optimizer


def build(name: str, schedules: list[Any], towers: list[Any]) -> Any:
    """`train.optimizer` for these towers (models), tower k at `schedules[k]` (a float or a schedule)."""
    import keras

    cls, options = optim.optimizer_class(name)
    cls = type(cls(**options))  # the class Keras instantiates for it on this backend (torch's own on torch)
    rates = None
    if all(isinstance(s, float) for s in schedules):
        rates = [keras.Variable(s, dtype="float32", trainable=False, name=f"lr{k}") for k, s in enumerate(schedules)]
    owner_of = {id(v): k for k, tower in enumerate(towers) for v in tower.trainable_variables}
    owners: list[int] = []  # tower of each trainable variable, in the optimizer's order
    as_state = rates if rates and keras.backend.backend() != backends.TENSORFLOW else []

    class TowerOptimizer(cls):  # type: ignore[misc, valid-type]
        def build(self, var_list: list[Any]) -> None:
            owners[:] = [owner_of[id(v)] for v in var_list]
            super().build(var_list)
            for rate in as_state:
                self._track_variable(rate)  # after the slots: pack.tower_view leaves them out

        def _backend_update_step(self, grads: list[Any], variables: list[Any], learning_rate: Any) -> None:
            tower_of = [owners[self._get_variable_index(v)] for v in variables]
            for tower in sorted(set(tower_of)):
                mine = [i for i, t in enumerate(tower_of) if t == tower]
                rate = rates[tower] if rates else schedules[tower](self.iterations)
                super()._backend_update_step([grads[i] for i in mine], [variables[i] for i in mine], rate)

    optimizer = TowerOptimizer(learning_rate=schedules[0], **options)
    # Not attributes Keras tracks: the rates are optimizer state off TensorFlow only (`build` above).
    object.__setattr__(optimizer, "tower_rates", tuple(rates) if rates else None)
    object.__setattr__(optimizer, "tower_schedules", tuple(schedules))
    return optimizer


def current_lr(optimizer: Any, k: int) -> float:
    """Tower k's learning rate now, as `optim.current_lr` reads a run's own."""
    import keras

    rates = optimizer.tower_rates  # None under warm-up schedules
    now = rates[k] if rates else optimizer.tower_schedules[k](optimizer.iterations)
    return float(keras.ops.convert_to_numpy(now))


def reset(optimizer: Any, rates: list[float]) -> None:
    """A zeroed optimizer (step count, slots) with these runs' constant learning rates (the
    cache key holds any warm-up schedule: those are the same as the compiled model's).
    """
    zero_optimizer(optimizer)
    for rate, value in zip(optimizer.tower_rates or (), rates, strict=False):
        rate.assign(value)
