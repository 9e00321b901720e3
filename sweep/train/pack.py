"""Packed training: K runs that share a compiled graph, trained together as the K towers of one model.

A small model leaves the processor mostly idle (results/bench/bench.md), and a sweep is many small
runs that differ only in seed, data order, data toggles or learning rate. A pack builds each run's
own model (seeded exactly as alone) as one tower of a Keras model with K inputs and K outputs, and
trains them in one `fit`: one traced function, one call into the backend per step for all K.

Why each tower's records equal the run's trained alone, bit for bit at the same thread count:
- the pack's loss is the towers' losses summed, and the sum's derivative with respect to each term
  is exactly 1, so a tower's gradient is its own loss's gradient; nothing else joins the towers;
- every op of a tower is an op of the same shapes and inputs as alone (its own data order, its own
  BatchNorm statistics and optimizer slots, which are per variable);
- the optimizer applies each tower's own learning rate to that tower's variables (sweep/train/tower_optimizer.py).
tests/test_pack.py trains runs packed and alone and compares every record. On JAX (one jax.jit
program for the K towers, XLA on the CPU) and on torch (eager, the towers' ops one after another)
they are equal bit for bit too: tests/test_backends.py runs that file there; on JAX two
larger packs (3 towers at batch 64, 120 classes, 32 px; ghost batch norm at batch 8) matched alone
in every field. Not checked on GPUs.

What packs (`pack_key`): the same model, data shapes, optimizer, batch size, budget and record
schedule; the seed, `data.shuffle`, `data.preprocess_mismatch`, `data.seed`, the learning rate and
its scaling, and early stopping may differ. Packed only on one replica, without `train.noise_scale`
(a gradient function per model) and without user callbacks (their state is per model). A tower
whose run ended (diverged, stopped early, pruned) goes on being computed until the pack ends, its
numbers unrecorded: towers cannot reach each other.

A packed run's `epoch_seconds` are its share of the pack's wall seconds (the pack's / K; its
`samples_per_second` follow), the machine time it cost, so runs per hour add up; `pack_size` (runs.csv)
says K. The time a run takes alone is `--pack 1`'s, or `sweep time`'s quiet measurement.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from sweep import vocab
from sweep.config import declared
from sweep.config.plan import RunSpec
from sweep.train import backends, devices, optim, recal, tower_optimizer
from sweep.train import data as data_module
from sweep.train import model as model_module
from sweep.train.compiled import (
    EVAL_BATCH,
    Compiled,
    graph_key,
    seed_everything,
    steps_per_execution,
)
from sweep.train.session import Session
from sweep.train.single import raw_recalibrated

# Towers per pack for each batch size when `--pack` is not given (a batch size between two rows takes
# the smaller one's; none listed: one run per pack). Empty: on 2026-12-05 (results/bench/pack.md) a
# pack's training steps ran up to 2.6x as fast as a run alone, but whole grids 0.98-1.04x (evaluation
# and recalibration at their records dominate), and a packed run's epoch_seconds are a share of its
# pack's, which claim C6 reads; `--pack K` turns it on.
PACK_SIZES: dict[int, int] = {}


def default_size(batch_size: int) -> int:
    """Towers per pack at this batch size (PACK_SIZES; 1 where it lists none)."""
    fitting = [b for b in PACK_SIZES if b <= batch_size]
    return PACK_SIZES[max(fitting)] if fitting else 1


def pack_key(spec: RunSpec) -> tuple | None:
    """What runs must share to train in one pack; None for a run that trains alone."""
    cfg = spec.point.train
    if cfg.gpus > 1 or cfg.noise_scale or cfg.callbacks:
        return None
    return shared_graph(spec)


def shared_graph(spec: RunSpec) -> tuple:
    """The values of the keys declared keys.GRAPH or keys.PACK: what runs that share a compiled graph
    (and could pack) have in common; read without TensorFlow.
    """
    return tuple(spec.point.value(name) for name in declared.pack_keys())


class Unpackable(Exception):
    """Runs that cannot train as one pack after all; the worker trains each alone (sweep/run/driver.py)."""


class Towers:
    """The compiled model of K runs trained together, one tower each; every call answers per tower."""

    def __init__(
        self, specs: list[RunSpec], splits: list[data_module.Split], steps_per_epoch: int, session: Session
    ) -> None:
        self.specs = specs
        self.splits = splits
        self.session = session
        self.replicas = devices.replicas_for(1)
        self.compiled, self.towers, self.reused = _model_for(specs, splits[0], steps_per_epoch, session)
        self.model, self.strategy = self.compiled.model, self.compiled.strategy
        self.own_model = self.towers[0]  # whose parameters each run counts
        self.callbacks: list[Any] = []  # packs take no user callbacks (pack_key)

    def fit(self, xs: list[np.ndarray], ys: list[np.ndarray], epoch: int) -> tuple[list[tuple[float, float]], float]:
        """Train every tower on its own stretch; each one's running accuracy and loss at its end."""
        dataset = data_module.batches(tuple(xs), tuple(ys), self.specs[0].point.train.batch_size)
        started = time.perf_counter()
        # No TerminateOnNaN: one tower's NaN must not stop the others (each is checked at its record).
        history = self.model.fit(dataset, initial_epoch=epoch - 1, epochs=epoch, verbose=0, shuffle=False).history
        took = time.perf_counter() - started
        ends = [(history[f"tower{k}_accuracy"][-1], history[f"tower{k}_{RUN_LOSS}"][-1]) for k in range(len(xs))]
        return [(float(accuracy), float(loss)) for accuracy, loss in ends], took

    def evaluate(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[str, float]]:
        """Each tower's accuracy and loss in inference mode on its own (x, y), one `evaluate` for all."""
        return evaluate_towers(self.model, pairs, self.session)

    def recalibrated(self, train_eval: list[dict[str, float]], val: list[dict[str, float]]) -> list[dict[str, float]]:
        """Each tower's *_recal fields, all K recalibrated and evaluated at once (a twin pack, `_Twins`)."""
        first = self.specs[0]
        if not first.point.model.batchnorm:  # nothing to recalibrate: the raw numbers, as alone
            return [raw_recalibrated(e, v) for e, v in zip(train_eval, val, strict=True)]
        if self.compiled.twin is None:  # built and traced once per compiled pack, like its training function
            point, classes = first.point, self.splits[0].num_classes
            self.compiled.twin = _Twins(
                lambda: model_module.build_model(point.model, point.data.image_size, classes, point.data.channels),
                len(self.specs),
            )
        numbers = self.compiled.twin.evaluate([t.get_weights() for t in self.towers], self.splits, self.session)
        return [n.fields() for n in numbers]

    def predicted(self, xs: list[np.ndarray]) -> list[np.ndarray]:
        """Each tower's class probabilities on its x (the balanced accuracy of imbalanced data)."""
        return list(self.model.predict(self.session.eval_batches(tuple(xs), None, EVAL_BATCH), verbose=0))

    def noise_scale(self, step: int) -> dict[str, float]:
        raise Unpackable("the noise scale is measured on a run alone (pack_key)")

    def lr(self, k: int) -> float:
        """The learning rate the optimizer applies to tower `k` now."""
        return tower_optimizer.current_lr(self.model.optimizer, k)

    def view(self, k: int) -> TowerView:
        """What run `k`'s checkpoint holds: its tower as its run's own model would hold it."""
        return tower_view(self.model, k)

    def end(self) -> None:
        """Nothing to tell: packs take no user callbacks."""


@dataclass(frozen=True)
class _Variables:
    variables: list[Any]


@dataclass(frozen=True)
class TowerView:
    """A tower as a checkpoint reads it: the variables of its run's model and optimizer alone, in
    their order there, so a re-queued run restores from it into an unpacked model (sweep/run/resume.py).
    """

    variables: list[Any]
    optimizer: _Variables


def tower_view(model: Any, k: int) -> TowerView:
    """Tower `k` of a pack model as its run's own model would hold it."""
    optimizer = model.optimizer
    tower = model.get_layer(f"tower{k}")
    owned = [id(v) for v in tower.trainable_variables]
    trainable = [id(v) for v in model.trainable_variables]
    rates = [id(rate) for rate in optimizer.tower_rates or ()]  # among the variables off TensorFlow
    head = optimizer.variables[:2]  # the step count and the learning rate first
    slots = [v for v in optimizer.variables[2:] if id(v) not in rates]
    per = len(slots) // len(trainable)  # Adam: momentum and velocity per variable, in variable order
    mine = [v for i, key in enumerate(trainable) if key in owned for v in slots[i * per : (i + 1) * per]]
    rate = optimizer.tower_rates[k] if optimizer.tower_rates else head[1]
    return TowerView(list(tower.variables), _Variables([head[0], rate, *mine]))


class _Twins:
    """K copies of the runs' architecture, as one model, that evaluate with recalibrated BatchNorm
    statistics (sweep/train/recal.py's `Twin` for a pack): one probe and one `evaluate` for all K, each
    copy's ops those of its run's own twin, so its numbers are the ones the run gets alone.
    """

    def __init__(self, build: Any, k: int) -> None:
        self.copies = [build() for _ in range(k)]
        self.norms = [recal.batch_norms(copy) for copy in self.copies]
        # before the copies join one model, so a probe reads each copy's own graph
        readers = [recal.statistics_of(copy, norms) for copy, norms in zip(self.copies, self.norms, strict=True)]
        self._moments = recal.traced(lambda xs: [read(x) for read, x in zip(readers, xs, strict=True)])
        self.model = _joined(self.copies, "twins")
        self.model.compile(**_tower_losses(k), jit_compile=backends.jit_compile())

    def evaluate(
        self, weights: list[list[np.ndarray]], splits: list[data_module.Split], session: Session
    ) -> list[recal.Recalibrated]:
        """Each copy's numbers with its run's weights, its BatchNorm statistics from its x_train_eval; on the
        session's evaluation pipelines.
        """
        for copy, mine in zip(self.copies, weights, strict=True):
            copy.set_weights(mine)
        recal.set_statistics(self.norms, self._moments, [s.x_train_eval for s in splits])
        train = evaluate_towers(self.model, [(s.x_train_eval, s.y_train_eval) for s in splits], session)
        val = evaluate_towers(self.model, [(s.x_val, s.y_val) for s in splits], session)
        both = zip(train, val, strict=True)
        return [recal.Recalibrated(t["accuracy"], t["loss"], v["accuracy"], v["loss"]) for t, v in both]


def evaluate_towers(model: Any, pairs: list[tuple[np.ndarray, np.ndarray]], session: Session) -> list[dict[str, float]]:
    """Each tower's compiled metrics and loss on its own (x, y), one `evaluate` for all, on the session's pipeline."""
    xs, ys = [x for x, _ in pairs], [y for _, y in pairs]
    result = model.evaluate(session.eval_batches(tuple(xs), tuple(ys), EVAL_BATCH), verbose=0, return_dict=True)
    keys = {name: name for name in vocab.COMPILE_METRICS} | {vocab.LOSS: RUN_LOSS}  # a tower's loss as alone
    return [{name: float(result[f"tower{k}_{key}"]) for name, key in keys.items()} for k in range(len(pairs))]


def _model_for(
    specs: list[RunSpec], split: data_module.Split, steps_per_epoch: int, session: Session
) -> tuple[Compiled, list[Any], bool]:
    """(compiled pack model and its strategy, each run's tower, whether it was the session's). Each tower
    is seeded and built as its run would be alone; the session's pack of the same graph takes their weights.
    """
    first = specs[0]
    schedules = [optim.learning_rate(spec.point.train, steps_per_epoch) for spec in specs]
    replicas = devices.replicas_for(1)
    traced = [s.get_config() for s in schedules if not isinstance(s, float)]  # warm-up numbers are in the graph
    key = ("pack", len(specs), graph_key(first, split.num_classes, schedules[0], replicas), str(traced))
    kept = session.take(key)
    fresh = []
    for k, spec in enumerate(specs):
        seed_everything(spec.seed)  # right before the weights are drawn, as alone
        fresh.append(_tower_model(k, spec, split.num_classes))
    if any(tower.losses for tower in fresh):
        raise Unpackable("the model adds losses of its own (regularizers): its runs train alone")
    rates = [optim.effective_lr(spec.point.train) for spec in specs]
    if kept is not None:
        model = kept.model
        towers = [model.get_layer(f"tower{k}") for k in range(len(specs))]
        for old, new in zip(towers, fresh, strict=True):
            old.set_weights(new.get_weights())
        tower_optimizer.reset(model.optimizer, rates)
        model.stop_training = False
        return kept, towers, True
    model = _joined(fresh, "pack")
    model.compile(
        optimizer=tower_optimizer.build(first.point.train.optimizer, schedules, fresh),
        **_tower_losses(len(specs)),
        jit_compile=backends.jit_compile(),
        steps_per_execution=steps_per_execution(first.point.train.batch_size, 1),
    )
    return Compiled(key, model, devices.strategy_for(replicas)), fresh, False


def _tower_model(k: int, spec: RunSpec, classes: int) -> Any:
    """The run's model, its variables' paths under `tower{k}/`. Without it every tower's paths are
    the same ("conv0/kernel"); torch's module tracks a model's variables by path, so it would zero
    one tower's gradients only, and the others' would add up across steps.
    """
    import keras

    data = spec.point.data
    with keras.name_scope(f"tower{k}"):
        return model_module.build_model(spec.point.model, data.image_size, classes, data.channels)


def _joined(models: list[Any], name: str) -> Any:
    """K models as the towers of one: K inputs, K outputs, tower k named `tower{k}`."""
    import keras

    for k, tower in enumerate(models):
        tower.name = f"tower{k}"
    inputs = [keras.Input(tower.inputs[0].shape[1:], name=f"image{k}") for k, tower in enumerate(models)]
    return keras.Model(inputs, [tower(x) for tower, x in zip(models, inputs, strict=True)], name=name)


def _tower_losses(k: int) -> dict[str, Any]:
    """`compile`'s loss and metrics for K towers: each tower's compiled metrics and its loss as alone (`_run_loss`)."""
    return {
        "loss": ["sparse_categorical_crossentropy"] * k,
        "metrics": [[*vocab.COMPILE_METRICS, _run_loss()] for _ in range(k)],
    }


RUN_LOSS = "run_loss"


def _run_loss() -> Any:
    """A tower's loss as Keras tracks a one-output model's `loss`: the batch's mean loss weighted by
    the batch's size read at run time. Keras's own per-output loss weighs each batch by its static
    size, unknown for a short last batch, so its running mean differs from the run's alone there.
    """
    import keras

    class RunLoss(keras.metrics.Mean):
        def __init__(self) -> None:
            super().__init__(name=RUN_LOSS)
            self.loss = keras.losses.SparseCategoricalCrossentropy()

        def update_state(self, y_true: Any, y_pred: Any, sample_weight: Any = None) -> Any:
            return super().update_state(self.loss(y_true, y_pred), sample_weight=_batch_size(y_pred))

    return RunLoss()


def _batch_size(y: Any) -> Any:
    """A batch's size when the step runs: `tf.shape` on TensorFlow, where a traced batch's size is
    unknown; elsewhere its shape, static under jax.jit (a short last batch is traced on its own).
    """
    import keras

    if keras.backend.backend() == backends.TENSORFLOW:
        import tensorflow as tf

        return tf.shape(y)[0]
    return keras.ops.shape(y)[0]
