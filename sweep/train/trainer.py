"""The one trainer: `Trainer(specs, session)` trains K runs that share a compiled graph; K = 1 is a run alone.
No file I/O; the worker writes (sweep/run/driver.py).

Each epoch is one `model.fit(..., initial_epoch=e, epochs=e+1)` call on that
epoch's batches, followed by two inference-mode evaluations: a fixed subset of
the training set (`train_eval_*`) and the validation set (`val_*`). So every
record holds both the number the post read (`train_acc`, Keras's running mean
over the epoch, in training mode, while the weights change) and the number
that is comparable with `val_acc` (`train_eval_acc`, the end-of-epoch model in
inference mode). With `train.recalibrate_bn` both evaluations are repeated with
BatchNorm statistics recomputed for the current weights (`*_recal`, sweep/train/recal.py).

Controls (docs/internals.md, "Controls"): the learning rate used is
`optim.effective_lr` (scaled by batch size on request) with an optional linear
warm-up per step; `budget: steps` stops after exactly `train.steps` optimizer
steps; `eval_every_steps` adds records inside an epoch. A record's `epoch` is
then fractional, epochs completed (1.25 = a quarter into epoch 2); at the end
of an epoch it is the integer epoch, as before. An epoch with records inside it
is trained by one `fit` call per stretch between records, and its `train_acc`
and `train_loss` are Keras's running means since the start of the epoch
(stretch means weighted by images). With every control at its default an epoch
is one `fit` call, exactly as before the controls existed.

A run alone trains in its own compiled model (sweep/train/single.py: replicas, user callbacks,
the noise scale); K runs train as the towers of one model (sweep/train/pack.py), their records
equal to each run's alone. Both answer the trainer's calls (`Engine`) per run, so the epochs,
records, positions, early stopping and divergence below are written once. The worker's session
(sweep/train/session.py) gives a trainer the compiled model of the last run of the same graph, and
keeps this trainer's for the next once its runs trained to their ends with none diverged; seeding is
in one place (sweep/train/compiled.py).

Each run's `position` says where it stands after each record, for its checkpoint
(sweep/train/checkpoint.py); `records(position)` goes on from a restored one (a run alone).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np

from sweep.config import stopping
from sweep.config.plan import RunSpec
from sweep.train import backends, checkpoint, devices
from sweep.train import data as data_module
from sweep.train import model as model_module
from sweep.train.compiled import Compiled
from sweep.train.pack import Towers
from sweep.train.records import (
    Diverged,
    EpochRecord,
    assemble,
    balanced,
    check_finite,
    epoch_number,
    record_stops,
    total_steps,
)
from sweep.train.session import Session
from sweep.train.single import Single


class Engine(Protocol):
    """A trainer's compiled model, for one run (`Single`) or a pack (`Towers`); every list is per run."""

    compiled: Compiled  # the model, its strategy and what was traced for it: the session keeps it for the next run
    model: Any  # the compiled Keras model that trains
    strategy: Any
    replicas: devices.Replicas
    reused: bool  # the previous run's compiled model, with fresh weights: no tracing
    own_model: Any  # the first run's own model, whose parameters it counts

    def fit(self, xs: list[np.ndarray], ys: list[np.ndarray], epoch: int) -> tuple[list[tuple[float, float]], float]:
        """Train a stretch; each run's running accuracy and loss at its end, and the seconds it took."""
        ...

    def evaluate(self, pairs: list[tuple[np.ndarray, np.ndarray]]) -> list[dict[str, float]]:
        """Each run's accuracy and loss in inference mode on its own (x, y)."""
        ...

    def recalibrated(self, train_eval: list[dict[str, float]], val: list[dict[str, float]]) -> list[dict[str, float]]:
        """Each run's *_recal fields."""
        ...

    def predicted(self, xs: list[np.ndarray]) -> list[np.ndarray]:
        """Each run's class probabilities on its x."""
        ...

    def noise_scale(self, step: int) -> dict[str, float]:
        """The noise-scale fields of a run alone."""
        ...

    def lr(self, k: int) -> float:
        """Run k's learning rate now."""
        ...

    def view(self, k: int) -> Any:
        """Run k's variables as its checkpoint holds them."""
        ...

    def end(self) -> None:
        """The runs have ended (a run alone's user callbacks are told)."""
        ...


@dataclass(frozen=True)
class RunInfo:
    """Facts about a run known before its first epoch; columns of runs.csv."""

    parameters: int
    train_samples: int
    val_samples: int
    num_classes: int
    replicas: int
    per_replica_batch: int
    virtual_devices: bool
    devices: str
    steps_per_epoch: int
    skipped_files: int = 0  # dataset folder: non-image files (notes.txt, .DS_Store), left out (docs/inputs.md)
    threads: int = 0  # TensorFlow intra-op threads: the same seed gives the same numbers at the same thread count
    cpu: str = ""  # and on the same CPU model (docs/levers.md, "Same numbers")
    jit_compile: bool = False  # XLA as Keras applied it (it turns it off under op determinism)
    steps_per_execution: int = 1
    reused_model: bool = False  # trained in the previous run's compiled model (fresh weights): no tracing
    pack_size: int = 1  # runs trained as towers of one model (sweep/train/pack.py); epoch_seconds are each one's share
    backend: str = backends.TENSORFLOW  # Keras's backend (KERAS_BACKEND); runs on different backends never pair


@dataclass
class RunState:
    """One run of a trainer: its spec, its data, and where it stands."""

    spec: RunSpec
    split: data_module.Split
    watch: stopping.Watch | None  # its early-stopping rule's state, if it has one
    position: checkpoint.Position = field(default_factory=lambda: checkpoint.Position(0, 0))
    stopped_early: int | None = None  # the epoch after which its rule (or a callback) stopped it
    ended: bool = False  # diverged, stopped early or pruned: trained on in a pack, not recorded


class Trainer:
    """K prepared runs that share a compiled graph, trained together; K = 1 is a run alone.

    Its compiled model (`engine`) is the run's own model for one run (sweep/train/single.py) and the
    towers of one model for several (sweep/train/pack.py); either answers every call per run, so the
    epochs, records and positions below are one code path for both. `session`: the worker's, whose
    compiled model it may reuse and which keeps its own (sweep/train/session.py); without one, a fresh
    session of its own.
    """

    def __init__(self, specs: list[RunSpec], session: Session | None = None) -> None:
        self.session = session if session is not None else Session()
        self.session.begin()  # the last trainer's evaluation pipelines are dropped
        splits = [data_module.load_split(spec.point.data) for spec in specs]  # seeds of their own
        first, split = specs[0], splits[0]
        data_module.check_batch(first.point.train.batch_size, len(split.y_train))
        self.steps_per_epoch = math.ceil(len(split.y_train) / first.point.train.batch_size)
        self.engine: Engine = (
            Single(first, split, self.steps_per_epoch, self.session)
            if len(specs) == 1
            else Towers(specs, splits, self.steps_per_epoch, self.session)
        )
        self.runs = [RunState(spec, s, _watch(spec)) for spec, s in zip(specs, splits, strict=True)]
        self.info = run_info(first, split, self.engine)

    @classmethod
    def alone(cls, spec: RunSpec, session: Session | None = None) -> Trainer:
        """A trainer of one run."""
        return cls([spec], session)

    @property
    def model(self) -> Any:
        """The compiled model that trains: the run's own, or the pack's."""
        return self.engine.model

    @property
    def strategy(self) -> Any:
        """The distribution strategy the model was built under (replicas of a run alone)."""
        return self.engine.strategy

    def epochs(self, resume: checkpoint.Position | None = None) -> Iterator[EpochRecord]:
        """A run alone's records in order (`records` for one run); Diverged is raised where its loss
        became NaN or infinite.
        """
        for found in self.records(resume):
            record = found[0]
            if isinstance(record, Diverged):
                raise record
            yield record

    def records(self, resume: checkpoint.Position | None = None) -> Iterator[dict[int, EpochRecord | Diverged]]:
        """At every record stop, each live run's record (or its Diverged), by run index; from `resume`
        on (a restored checkpoint's, a run alone only), those after it.

        Before a record is yielded, its run's `position` says where it then stands, early stopping's
        verdict at the end of an epoch included, so a checkpoint written at the record is complete.

        Once every run has ended, none diverged, the session keeps the compiled model for the next run of
        its graph. Not otherwise: a diverged run's model may be broken, and an error, a stop, or records
        left unread (the generator closed) never get here.
        """
        diverged = False
        for found in self._until_ended(resume):
            diverged = diverged or any(isinstance(record, Diverged) for record in found.values())
            yield found
        self.engine.end()
        if not diverged:
            self.session.keep(self.engine.compiled)

    def _until_ended(self, resume: checkpoint.Position | None) -> Iterator[dict[int, EpochRecord | Diverged]]:
        """`records` up to the last record of the last run still recorded."""
        cfg = self.runs[0].spec.point.train
        stops = record_stops(self.steps_per_epoch, total_steps(cfg, self.steps_per_epoch), cfg.eval_every_steps)
        if resume is not None:
            self._resume(resume)
        for epoch, epoch_stops in enumerate(stops, start=1):
            if resume is not None and (resume.stopped or resume.covers(epoch, len(epoch_stops))):
                continue
            for index, found in self._one_epoch(epoch, epoch_stops, resume):
                at_end = index == len(epoch_stops) - 1
                for k, record in found.items():
                    self._advance(self.runs[k], epoch, at_end and epoch < len(stops), at_end, record)
                yield found
                for k, record in found.items():
                    run = self.runs[k]
                    run.ended = run.ended or isinstance(record, Diverged) or run.position.stopped
                if all(run.ended for run in self.runs):  # nothing left to record
                    return

    def end(self, k: int) -> None:
        """Stop recording run `k` (a pruned search trial); in a pack its tower trains on unrecorded."""
        self.runs[k].ended = True

    def view(self, k: int) -> Any:
        """Run `k`'s model and optimizer variables as a checkpoint holds them (its own model's order)."""
        return self.engine.view(k)

    def timed_epoch(self, epoch: int) -> float:
        """Train a run alone one whole epoch with no records and return its seconds (sweep/train/timing.py)."""
        run = self.runs[0]
        order = data_module.epoch_order(run.split.y_train, run.spec.point.data.shuffle, run.spec.seed, epoch)
        return self.engine.fit([run.split.x_train[order]], [run.split.y_train[order]], epoch)[1]

    def _resume(self, resume: checkpoint.Position) -> None:
        """Take up a run alone's early-stopping state from its checkpoint's position."""
        if len(self.runs) != 1:
            raise ValueError("only a run alone resumes from a checkpoint")
        run = self.runs[0]
        if run.watch is not None and resume.watch is not None:
            run.watch.best, run.watch.waited = resume.watch[0], int(resume.watch[1])
        if resume.stopped:  # stopped at its last record: nothing left to train
            run.stopped_early = resume.epoch

    def _advance(self, run: RunState, epoch: int, may_stop: bool, at_end: bool, record: Any) -> None:
        """After a record at the end of an epoch: whether the run stops there (`may_stop`: not its last)."""
        if isinstance(record, Diverged):
            return
        stop = at_end and (
            bool(self.engine.model.stop_training) or (run.watch is not None and run.watch.stop(record.to_dict()))
        )
        stop = stop and may_stop
        state = [run.watch.best, run.watch.waited] if run.watch is not None else None
        run.position = replace(run.position, watch=state, stopped=stop)
        if stop:
            run.stopped_early = epoch

    def _one_epoch(
        self, epoch: int, stops: list[int], resume: checkpoint.Position | None
    ) -> Iterator[tuple[int, dict[int, EpochRecord | Diverged]]]:
        """Train every run up to each stop (steps into the epoch) in turn; the live runs' records at each.
        An epoch a checkpoint stopped inside goes on from there, its running means included.
        """
        batch = self.runs[0].spec.point.train.batch_size
        orders = [
            data_module.epoch_order(r.split.y_train, r.spec.point.data.shuffle, r.spec.seed, epoch) for r in self.runs
        ]
        xs = [r.split.x_train[o] for r, o in zip(self.runs, orders, strict=True)]
        ys = [r.split.y_train[o] for r, o in zip(self.runs, orders, strict=True)]
        first = resume.index + 1 if resume is not None and resume.epoch == epoch else 0
        done = 0
        seconds = 0.0
        stretches: list[list[tuple[float, float, int]]] = [[] for _ in self.runs]
        if first and resume is not None:
            done = stops[first - 1]
            seconds = resume.seconds
            stretches = [[tuple(s) for s in resume.stretches]]  # saved as lists
        for index in range(first, len(stops)):
            rows = slice(done * batch, stops[index] * batch)  # at the defaults: one stop, every row
            ends, took = self.engine.fit([x[rows] for x in xs], [y[rows] for y in ys], epoch)
            seconds += took
            images = len(ys[0][rows])
            for kept, (accuracy, loss) in zip(stretches, ends, strict=True):
                kept.append((accuracy, loss, images))
            done = stops[index]
            share = seconds / len(self.runs)  # each run's share of the machine time
            found = self._records(epoch_number(epoch, done, self.steps_per_epoch), stretches, share)
            for k in found:
                self.runs[k].position = checkpoint.Position(epoch, index, [list(s) for s in stretches[k]], share)
            yield index, found

    def _records(
        self, epoch: float, stretches: list[list[tuple[float, float, int]]], seconds: float
    ) -> dict[int, EpochRecord | Diverged]:
        """Evaluate now, once for every live run; train_acc and train_loss are the running means over
        each run's stretches of the epoch so far.
        """
        live = [k for k, run in enumerate(self.runs) if not run.ended]
        step = int(self.engine.model.optimizer.iterations.numpy())
        found: dict[int, EpochRecord | Diverged] = {}
        for k in live:
            try:
                check_finite(epoch, step, stretches[k])
            except Diverged as err:
                found[k] = err
        healthy = [k for k in live if k not in found]
        if not healthy:
            return found
        point = self.runs[0].spec.point
        train_eval = self.engine.evaluate([(r.split.x_train_eval, r.split.y_train_eval) for r in self.runs])
        val = self.engine.evaluate([(r.split.x_val, r.split.y_val) for r in self.runs])
        measured = self.engine.noise_scale(step) if point.train.noise_scale else {}
        recalibrated = self.engine.recalibrated(train_eval, val) if point.train.recalibrate_bn else None
        predicted = self.engine.predicted([r.split.x_train_eval for r in self.runs]) if point.data.imbalance else None
        for k in healthy:
            extra = dict(measured) | (recalibrated[k] if recalibrated else {})
            if predicted is not None:
                extra |= balanced(predicted[k], self.runs[k].split.y_train_eval)
            found[k] = assemble(epoch, step, stretches[k], seconds, train_eval[k], val[k], self.engine.lr(k), extra)
        return found


def _watch(spec: RunSpec) -> stopping.Watch | None:
    rule = stopping.parse(spec.point.train.early_stopping)
    return stopping.Watch(rule) if rule else None


def run_info(spec: RunSpec, split: data_module.Split, engine: Engine) -> RunInfo:
    """The facts of a prepared run (the first of a pack: its runs share them but the seed)."""
    import keras

    batch = spec.point.train.batch_size
    return RunInfo(
        parameters=model_module.trainable_parameters(engine.own_model),
        train_samples=len(split.y_train),
        val_samples=len(split.y_val),
        num_classes=split.num_classes,
        replicas=len(engine.replicas.devices),
        per_replica_batch=batch // len(engine.replicas.devices),
        virtual_devices=engine.replicas.virtual,
        devices=",".join(engine.replicas.devices),
        steps_per_epoch=math.ceil(len(split.y_train) / batch),
        skipped_files=len(data_module.skipped_files(spec.point.data)),
        threads=devices.intra_op_threads(),
        cpu=devices.cpu_model(),
        jit_compile=bool(engine.model.jit_compile),
        steps_per_execution=int(engine.model.steps_per_execution),
        reused_model=engine.reused,
        pack_size=len(engine.model.outputs) if isinstance(engine, Towers) else 1,
        backend=keras.backend.backend(),
    )
